package gateway_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/gateway"
	"fencegate/internal/testenv"
)

// readiness is a /readyz answer.
type readiness struct {
	Ready    bool              `json:"ready"`
	Checks   map[string]string `json:"checks"`
	Warnings []string          `json:"warnings"`
}

// readyz reads the gateway's /readyz.
func (e *env) readyz(tb testing.TB) (int, readiness) {
	tb.Helper()
	r := do(tb, http.MethodGet, e.url+"/readyz", nil, nil)
	var answer readiness
	if err := json.Unmarshal(r.body, &answer); err != nil {
		tb.Fatalf("/readyz answered %s: %v", r, err)
	}
	return r.status, answer
}

// quotaBytes is the database quota of the etcd that TestNoSpace fills.
const quotaBytes = 1 << 20

// TestNoSpace: when etcd's database reaches its quota, a fenced write
// answers 503 fence-unavailable saying that etcd is out of space, with one
// log line that says what to do however many writes fail, and /readyz
// fails naming the NOSPACE alarm. The metrics show the database's size
// near its quota. Disarmed without freeing space, the gateway is ready
// again but /readyz warns that the database is nearly full; once the
// operator has compacted and defragmented, writes go through again.
func TestNoSpace(t *testing.T) {
	logs := new(lockedBuffer)
	e := &env{
		etcd:   testenv.StartEtcdWithQuota(t, quotaBytes),
		bucket: fmt.Sprintf("nospace%d-%d", time.Now().UnixNano()%1e9, bucketSeq.Add(1)),
		minio:  sharedS3.Minio(t),
	}
	sharedS3.CreateBucket(t, e.bucket)
	e.startGateway(t, gateway.Config{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	client := e.etcd.Client(t)
	if r := e.put(t, "k", 5, "v5"); r.status >= 300 {
		t.Fatalf("put token 5: %s", r)
	}
	testenv.FillUntilNoSpace(t, client)

	for _, tok := range []api.Token{6, 7, 8} {
		r := e.put(t, "k", tok, fmt.Sprintf("v%d must not land", tok))
		wantProblem(t, r, http.StatusServiceUnavailable, "fence-unavailable")
		if !strings.Contains(r.problem.Detail, "etcd is out of space") {
			t.Errorf("NOSPACE write: detail %q does not say that etcd is out of space", r.problem.Detail)
		}
	}
	if body, token, _ := e.stored(t, "k"); body != "v5" || token != "5" {
		t.Fatalf("S3 holds %q token %q; want v5 token 5", body, token)
	}
	hints := 0
	for _, line := range logs.lines(t) {
		if msg, _ := line["msg"].(string); strings.Contains(msg, "etcdctl alarm disarm") {
			hints++
		}
	}
	if hints != 1 {
		t.Errorf("%d log lines say how to recover from NOSPACE after 3 failed writes; want 1", hints)
	}
	testenv.WaitUntil(t, 30*time.Second, "/readyz fails naming the NOSPACE alarm", func() bool {
		status, answer := e.readyz(t)
		return status == http.StatusServiceUnavailable && strings.Contains(answer.Checks["etcd"], "NOSPACE alarm raised")
	})
	families := e.scrape(t)
	size, quota := sample(families, "fencegate_etcd_db_size_bytes", nil), sample(families, "fencegate_etcd_db_quota_bytes", nil)
	if quota != quotaBytes || size < quotaBytes*0.8 {
		t.Errorf("metrics: etcd db size %v, quota %v; want quota %d and size near it", size, quota, quotaBytes)
	}

	// Disarmed, with the database still nearly full: ready, with a warning.
	testenv.DisarmAlarms(t, client)
	testenv.WaitUntil(t, 30*time.Second, "/readyz ready, warning that etcd is nearly full", func() bool {
		status, answer := e.readyz(t)
		return status == http.StatusOK && len(answer.Warnings) == 1 && strings.Contains(answer.Warnings[0], "of its quota")
	})

	// The operator's recovery (docs/operations.md).
	testenv.RecoverFromNoSpace(t, client, e.etcd.Endpoints())
	testenv.WaitUntil(t, 30*time.Second, "/readyz ready without warnings", func() bool {
		status, answer := e.readyz(t)
		return status == http.StatusOK && len(answer.Warnings) == 0
	})
	if r := e.put(t, "k", 6, "v6"); r.status >= 300 {
		t.Fatalf("put token 6 after recovery: %s", r)
	}
	if size := sample(e.scrape(t), "fencegate_etcd_db_size_bytes", nil); size >= quotaBytes*0.8 {
		t.Errorf("metrics after recovery: etcd db size %v; want below 80%% of %d", size, quotaBytes)
	}
}

// TestReadyzProbesOnce: many concurrent /readyz calls share one probe of
// etcd and one of S3, however many there are: the answer is cached. (The
// cache is kept for an hour, so that a slow machine cannot spread the
// calls over two periods.)
func TestReadyzProbesOnce(t *testing.T) {
	const calls = 20
	cfg := gateway.Config{ReadinessCache: time.Hour}
	one := newEnv(t, cfg)
	etcdBefore := one.etcdCalls.Count()
	if status, answer := one.readyz(t); status != http.StatusOK {
		t.Fatalf("/readyz = %d %+v", status, answer)
	}
	etcdPerProbe, s3PerProbe := one.etcdCalls.Count()-etcdBefore, one.s3.Count()
	if etcdPerProbe == 0 || s3PerProbe != 1 {
		t.Fatalf("one /readyz made %d etcd and %d S3 requests; want some and 1", etcdPerProbe, s3PerProbe)
	}

	many := &env{etcd: one.etcd, bucket: one.bucket, minio: one.minio}
	many.startGateway(t, cfg)
	etcdBefore = many.etcdCalls.Count()
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			if status, answer := many.readyz(t); status != http.StatusOK {
				t.Errorf("/readyz = %d %+v", status, answer)
			}
		})
	}
	wg.Wait()
	if n := many.etcdCalls.Count() - etcdBefore; n != etcdPerProbe {
		t.Errorf("%d concurrent /readyz made %d etcd requests; want %d, one probe's", calls, n, etcdPerProbe)
	}
	if n := many.s3.Count(); n != s3PerProbe {
		t.Errorf("%d concurrent /readyz made %d S3 requests; want %d, one probe's", calls, n, s3PerProbe)
	}
}

// TestMetricsStoreSpace: /metrics exports etcd's database size, the part
// of it in use, and its quota (etcd's default here, 2 GiB).
func TestMetricsStoreSpace(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	families := e.scrape(t)
	size := sample(families, "fencegate_etcd_db_size_bytes", nil)
	inUse := sample(families, "fencegate_etcd_db_size_in_use_bytes", nil)
	quota := sample(families, "fencegate_etcd_db_quota_bytes", nil)
	if quota != 2<<30 || size <= 0 || inUse <= 0 || inUse > size {
		t.Errorf("metrics: etcd db size %v, in use %v, quota %v; want a size, a part of it in use, and a quota of 2 GiB", size, inUse, quota)
	}
}
