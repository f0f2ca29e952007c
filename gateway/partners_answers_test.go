package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
	"fencegate/backends/s3"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/partners"
)

// newAnswerStore returns an answer store on the shared S3 server, in a
// bucket of its own (made unless create is false: a bucket that does not
// exist makes every write fail), under the prefix "answers/".
func newAnswerStore(tb testing.TB, bucket string, create bool) *s3.Answers {
	tb.Helper()
	if create {
		sharedS3.CreateBucket(tb, bucket)
	}
	client, err := s3.New(context.Background(), s3.Config{
		Endpoint:        sharedS3.Endpoint(),
		AccessKeyID:     sharedS3.AccessKey,
		SecretAccessKey: sharedS3.SecretKey,
		UsePathStyle:    true,
	})
	if err != nil {
		tb.Fatal(err)
	}
	answers, err := client.Answers(bucket, "answers/")
	if err != nil {
		tb.Fatal(err)
	}
	return answers
}

// startAnswerGateway is startPartnerGateway with opts added.
func startAnswerGateway(tb testing.TB, etcd *testenv.Etcd, cfg gateway.Config, routes []partners.PartnerRoute, opts ...gateway.Option) (string, *gateway.Gateway) {
	tb.Helper()
	store, partnerStore := newPartnerStores(tb, etcd, time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	gw, err := gateway.New(cfg, store, newMemObjects(), append([]gateway.Option{gateway.WithPartners(routes, partnerStore, nil)}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	tb.Cleanup(srv.Close)
	return srv.URL, gw
}

// idempotencyRecords returns the values of the idempotency records in
// etcd, by key.
func idempotencyRecords(tb testing.TB, etcd *testenv.Etcd) map[string][]byte {
	tb.Helper()
	resp, err := etcd.Client(tb).Get(tb.Context(), "fencegate/idem/", clientv3.WithPrefix())
	if err != nil {
		tb.Fatal(err)
	}
	out := make(map[string][]byte, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = kv.Value
	}
	return out
}

// answerObjects lists the answer store's objects in bucket.
func answerObjects(tb testing.TB, mc *minio.Client, bucket string) []string {
	tb.Helper()
	var names []string
	for obj := range mc.ListObjects(tb.Context(), bucket, minio.ListObjectsOptions{Prefix: "answers/", Recursive: true}) {
		if obj.Err != nil {
			tb.Fatal(obj.Err)
		}
		names = append(names, obj.Key)
	}
	return names
}

// TestPartnerAnswersStayOutOfEtcd: 20 answers of 64 KiB each, under 20
// keys. etcd keeps their records, a few hundred bytes each, and the
// bodies are in the answer store, one object each; each replay has its
// exact bytes.
func TestPartnerAnswersStayOutOfEtcd(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	bucket := fmt.Sprintf("answers-%d", bucketSeq.Add(1))
	gw, _ := startAnswerGateway(t, etcd, gateway.Config{}, []partners.PartnerRoute{payRoute(t, partner.URL)}, gateway.WithPartnerAnswers(newAnswerStore(t, bucket, true)))
	const n = 20
	for i := range n {
		req := partnerReq{method: "GET", path: fmt.Sprintf("pay/accounts/a%d/huge", i), token: 1, key: fmt.Sprintf("k%d", i)}
		first := partnerDo(t, gw, req)
		if first.status != 200 || len(first.body) != 64<<10 {
			t.Fatalf("call %d = %d with %d bytes; want 200 with 64 KiB", i, first.status, len(first.body))
		}
		again := partnerDo(t, gw, req)
		if !replayed(again) || !bytes.Equal(again.body, first.body) || again.header.Get(api.HeaderIdempotentBodyOmitted) != "" {
			t.Fatalf("replay %d = %d with %d bytes, %v; want the same 64 KiB replayed", i, again.status, len(again.body), again.header)
		}
	}
	records := idempotencyRecords(t, etcd)
	var total int
	for _, v := range records {
		total += len(v)
	}
	if len(records) != n || total > n*1024 {
		t.Errorf("etcd holds %d records, %d bytes of values; want %d records of at most 1 KiB each (the bodies in the answer store)", len(records), total, n)
	}
	if objects := answerObjects(t, sharedS3.Minio(t), bucket); len(objects) != n {
		t.Errorf("the answer store holds %d objects; want %d: %v", len(objects), n, objects)
	}
	if c := partner.count(); c != n {
		t.Errorf("partner got %d calls; want %d", c, n)
	}
	t.Logf("%d records, %d bytes in etcd", len(records), total)
}

// TestPartnerAnswerReplayedByAnotherGateway: the body one gateway stored
// is replayed, byte for byte, by another that shares its etcd and answer
// bucket.
func TestPartnerAnswerReplayedByAnotherGateway(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	bucket := fmt.Sprintf("answers-%d", bucketSeq.Add(1))
	routes := []partners.PartnerRoute{payRoute(t, partner.URL)}
	gw1, _ := startAnswerGateway(t, etcd, gateway.Config{}, routes, gateway.WithPartnerAnswers(newAnswerStore(t, bucket, true)))
	gw2, _ := startAnswerGateway(t, etcd, gateway.Config{}, routes, gateway.WithPartnerAnswers(newAnswerStore(t, bucket, false)))
	req := partnerReq{path: "pay/accounts/a1/huge", token: 3, key: "report-1"}
	first := partnerDo(t, gw1, req)
	if first.status != 200 || !bytes.Equal(first.body, hugeAnswer(1)) {
		t.Fatalf("first = %d with %d bytes; want 200 with the partner's 64 KiB", first.status, len(first.body))
	}
	again := partnerDo(t, gw2, req)
	if !replayed(again) || again.status != 200 || !bytes.Equal(again.body, hugeAnswer(1)) || again.header.Get("Location") != "/reports/r_1" {
		t.Fatalf("replay through the other gateway = %d with %d bytes, %v; want the stored 200 with its exact 64 KiB", again.status, len(again.body), again.header)
	}
	if n := partner.count(); n != 1 {
		t.Fatalf("partner got %d calls; want 1", n)
	}
}

// TestPartnerAnswerBodyGone: a body deleted from the answer store, or
// replaced by other bytes, is never replayed and never forwarded again:
// the replay has the stored status and headers, no body, and
// Idempotent-Body-Omitted: true.
func TestPartnerAnswerBodyGone(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	bucket := fmt.Sprintf("answers-%d", bucketSeq.Add(1))
	gw, _ := startAnswerGateway(t, etcd, gateway.Config{}, []partners.PartnerRoute{payRoute(t, partner.URL)}, gateway.WithPartnerAnswers(newAnswerStore(t, bucket, true)))
	mc := sharedS3.Minio(t)
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, object string)
	}{
		{"deleted", func(t *testing.T, object string) {
			if err := mc.RemoveObject(t.Context(), bucket, object, minio.RemoveObjectOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
		{"other bytes", func(t *testing.T, object string) {
			other := bytes.Repeat([]byte("y"), 64<<10)
			if _, err := mc.PutObject(t.Context(), bucket, object, bytes.NewReader(other), int64(len(other)), minio.PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := partner.count()
			req := partnerReq{path: "pay/accounts/a1/huge", token: 1, key: "gone-" + tc.name}
			if first := partnerDo(t, gw, req); first.status != 200 || len(first.body) != 64<<10 {
				t.Fatalf("first = %d with %d bytes; want 200 with 64 KiB", first.status, len(first.body))
			}
			objects := answerObjects(t, mc, bucket)
			if len(objects) == 0 {
				t.Fatal("no object in the answer store")
			}
			for _, o := range objects {
				tc.lose(t, o)
			}
			r := partnerDo(t, gw, req)
			if r.status != 200 || len(r.body) != 0 || !replayed(r) || r.header.Get(api.HeaderIdempotentBodyOmitted) != "true" || r.header.Get("Location") == "" {
				t.Fatalf("replay = %d, %d bytes, %v; want the stored 200 and headers without the body, marked omitted", r.status, len(r.body), r.header)
			}
			if n := partner.count() - before; n != 1 {
				t.Fatalf("partner got %d calls; want 1 (a lost body is never forwarded again)", n)
			}
		})
	}
}

// TestPartnerAnswerWriteFails: the answer store cannot take the body (its
// bucket does not exist). The client still gets the whole answer; the
// record is complete without a body (no reference to one that was never
// written), so a replay gets the status and headers marked omitted, and
// the partner is called once.
func TestPartnerAnswerWriteFails(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	broken := newAnswerStore(t, fmt.Sprintf("missing-%d", bucketSeq.Add(1)), false)
	gw, _ := startAnswerGateway(t, etcd, gateway.Config{}, []partners.PartnerRoute{payRoute(t, partner.URL)}, gateway.WithPartnerAnswers(broken))
	req := partnerReq{path: "pay/accounts/a1/huge", token: 1, key: "k-broken"}
	if first := partnerDo(t, gw, req); first.status != 200 || !bytes.Equal(first.body, hugeAnswer(1)) {
		t.Fatalf("first = %d with %d bytes; want the partner's 200 with its 64 KiB", first.status, len(first.body))
	}
	for key, value := range idempotencyRecords(t, etcd) {
		if bytes.Contains(value, []byte(`"body_id"`)) || !bytes.Contains(value, []byte(`"body_omitted":true`)) || len(value) > 1024 {
			t.Errorf("record %s = %d bytes, %q...; want it complete, its body omitted, with no reference", key, len(value), value[:min(len(value), 400)])
		}
	}
	r := partnerDo(t, gw, req)
	if r.status != 200 || len(r.body) != 0 || !replayed(r) || r.header.Get(api.HeaderIdempotentBodyOmitted) != "true" {
		t.Fatalf("replay = %d, %d bytes, %v; want the stored 200 without the body, marked omitted", r.status, len(r.body), r.header)
	}
	if n := partner.count(); n != 1 {
		t.Fatalf("partner got %d calls; want 1", n)
	}
}

// TestPartnerAnswerOfALostRecordIsDeleted: the request's in-flight record
// disappears while the partner handles it (here deleted by hand, as its
// lease expiring would): Finish stores nothing, and the gateway deletes
// the body it wrote for that record, which no record will ever name.
func TestPartnerAnswerOfALostRecordIsDeleted(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	var calls atomic.Int64
	partner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if _, err := client.Delete(r.Context(), "fencegate/idem/", clientv3.WithPrefix()); err != nil {
			t.Errorf("delete the record: %v", err)
		}
		w.Write(hugeAnswer(1))
	}))
	t.Cleanup(partner.Close)
	bucket := fmt.Sprintf("answers-%d", bucketSeq.Add(1))
	gw, _ := startAnswerGateway(t, etcd, gateway.Config{}, []partners.PartnerRoute{payRoute(t, partner.URL)}, gateway.WithPartnerAnswers(newAnswerStore(t, bucket, true)))
	if r := partnerDo(t, gw, partnerReq{path: "pay/accounts/a1/huge", token: 1, key: "k-lost"}); r.status != 200 || !bytes.Equal(r.body, hugeAnswer(1)) {
		t.Fatalf("first = %d with %d bytes; want the partner's 200 with its 64 KiB", r.status, len(r.body))
	}
	if records := idempotencyRecords(t, etcd); len(records) != 0 {
		t.Fatalf("etcd holds %d records; want none (the record was lost)", len(records))
	}
	if objects := answerObjects(t, sharedS3.Minio(t), bucket); len(objects) != 0 {
		t.Fatalf("the answer store holds %v; want nothing (the body of a lost record is deleted)", objects)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("partner got %d calls; want 1", n)
	}
}
