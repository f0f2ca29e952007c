package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"fencegate/api"
	"fencegate/gateway"
	"fencegate/tokenstore"
)

// objectRoute is the route pattern of the object routes, as chi names it.
const objectRoute = "/v1/objects/{bucket}/*"

// scrape reads the gateway's /metrics and parses it.
func (e *env) scrape(tb testing.TB) map[string]*dto.MetricFamily {
	tb.Helper()
	resp, err := http.Get(e.url + "/metrics")
	if err != nil {
		tb.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		tb.Fatalf("GET /metrics: parsing: %v", err)
	}
	return families
}

// sample sums the series of family name whose labels include want: a
// counter's or gauge's value, a histogram's sample count. A family that
// is not there (no series yet) sums to zero.
func sample(families map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	for _, m := range families[name].GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	have := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// series names one sum of series: a family and the labels to match.
type series struct {
	name   string
	labels map[string]string
}

func (s *series) String() string { return fmt.Sprintf("%s%v", s.name, s.labels) }

// Series the tests look at.
var (
	staleTotal      = &series{"fencegate_stale_refusals_total", nil}
	fenceChecks     = &series{"fencegate_fence_check_duration_seconds", nil}
	s3Requests      = &series{"fencegate_s3_request_duration_seconds", nil}
	s3Puts          = &series{"fencegate_s3_request_duration_seconds", map[string]string{"operation": "put"}}
	s3Observes      = &series{"fencegate_s3_request_duration_seconds", map[string]string{"operation": "observe"}}
	etcdErrors      = &series{"fencegate_etcd_errors_total", nil}
	lostRaces       = &series{"fencegate_s3_lost_races_total", nil}
	refusedWrites   = &series{"fencegate_refused_writes_total", nil}
	acceptedChecks  = &series{"fencegate_fence_check_duration_seconds", map[string]string{"result": "accepted"}}
	staleChecks     = &series{"fencegate_fence_check_duration_seconds", map[string]string{"result": "stale"}}
	putsAccepted    = &series{"fencegate_requests_total", map[string]string{"route": objectRoute, "method": "PUT", "status_class": "2xx", "problem": ""}}
	putsUnavailable = &series{"fencegate_requests_total", map[string]string{"route": objectRoute, "method": "PUT", "status_class": "5xx", "problem": "fence-unavailable"}}
	failedChecks    = &series{"fencegate_fence_check_duration_seconds", map[string]string{"result": "error"}}
	putsStale       = &series{"fencegate_requests_total", map[string]string{"route": objectRoute, "method": "PUT", "status_class": "4xx", "problem": "stale-token"}}
	putDurations    = &series{"fencegate_request_duration_seconds", map[string]string{"route": objectRoute, "method": "PUT"}}
	staleFromCache  = &series{"fencegate_stale_refusals_total", map[string]string{"source": "cache"}}
	staleFromEtcd   = &series{"fencegate_stale_refusals_total", map[string]string{"source": "etcd"}}
	refusedForStale = &series{"fencegate_refused_writes_total", map[string]string{"reason": "stale-token"}}
)

// TestMetricsMoveOnWrites scrapes /metrics around writes to a real etcd
// and S3 server and checks that exactly the right series moved, by
// exactly the right amounts.
func TestMetricsMoveOnWrites(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	const key = "metered"
	resource := api.Resource("s3/" + e.bucket + "/" + key)

	// other raises the high-water mark behind the gateway's back, so that
	// its cache does not know and etcd refuses.
	other, err := tokenstore.New(e.etcd.Client(t), tokenstore.Config{RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}

	// Every step lists the series that must move and by how much; the
	// series in watched that a step does not list must not move.
	watched := []*series{staleTotal, fenceChecks, s3Requests, etcdErrors, lostRaces, refusedWrites,
		acceptedChecks, staleChecks, failedChecks, s3Puts, s3Observes, putsAccepted, putsStale, putsUnavailable, putDurations,
		staleFromCache, staleFromEtcd, refusedForStale}
	steps := []struct {
		name       string
		before     func(t *testing.T)
		token      api.Token
		wantStatus int
		want       map[*series]float64
	}{
		{
			name:       "accepted write",
			token:      5,
			wantStatus: http.StatusCreated,
			want: map[*series]float64{
				putsAccepted: 1, putDurations: 1,
				fenceChecks: 1, acceptedChecks: 1,
				// The ETag cache is empty: the version is observed with a HEAD.
				s3Requests: 2, s3Observes: 1, s3Puts: 1,
			},
		},
		{
			name:       "stale write refused from the cache",
			token:      3,
			wantStatus: http.StatusConflict,
			want: map[*series]float64{
				putsStale: 1, putDurations: 1,
				staleTotal: 1, staleFromCache: 1,
				refusedWrites: 1, refusedForStale: 1,
				// Nothing reaches etcd or S3.
			},
		},
		{
			name: "stale write refused by etcd",
			before: func(t *testing.T) {
				if err := other.FenceCheck(context.Background(), resource, 9); err != nil {
					t.Fatalf("raising the mark to 9: %v", err)
				}
			},
			token:      7,
			wantStatus: http.StatusConflict,
			want: map[*series]float64{
				putsStale: 1, putDurations: 1,
				staleTotal: 1, staleFromEtcd: 1,
				refusedWrites: 1, refusedForStale: 1,
				fenceChecks: 1, staleChecks: 1,
				// The version comes from the ETag cache; no PUT follows.
			},
		},
		{
			name: "write that loses a race to a direct S3 write",
			before: func(t *testing.T) {
				// The gateway's ETag cache still names its own last
				// version: the conditional PUT fails with 412, and the
				// retry observes with a HEAD.
				if _, err := e.minio.PutObject(context.Background(), e.bucket, key, strings.NewReader("direct"), 6, minio.PutObjectOptions{}); err != nil {
					t.Fatalf("direct write: %v", err)
				}
			},
			token:      9,
			wantStatus: http.StatusOK,
			want: map[*series]float64{
				putsAccepted: 1, putDurations: 1,
				fenceChecks: 2, acceptedChecks: 2,
				s3Requests: 3, s3Puts: 2, s3Observes: 1, lostRaces: 1,
			},
		},
		{
			name:       "write while etcd is down",
			before:     func(t *testing.T) { e.etcd.Stop(t) },
			token:      10,
			wantStatus: http.StatusServiceUnavailable,
			want: map[*series]float64{
				putsUnavailable: 1, putDurations: 1,
				fenceChecks: 1, failedChecks: 1, etcdErrors: 1,
				// Observed from the ETag cache; nothing written.
			},
		},
	}
	for _, step := range steps {
		if step.before != nil {
			step.before(t)
		}
		before := e.scrape(t)
		r := e.put(t, key, step.token, "body "+step.name)
		if r.status != step.wantStatus {
			t.Fatalf("%s: PUT token %d = %s; want %d", step.name, step.token, r, step.wantStatus)
		}
		after := e.scrape(t)
		for _, s := range watched {
			got := sample(after, s.name, s.labels) - sample(before, s.name, s.labels)
			if want := step.want[s]; got != want {
				t.Errorf("%s: %s moved by %g; want %g", step.name, s, got, want)
			}
		}
	}
	want := "body write that loses a race to a direct S3 write"
	if body, token, _ := e.stored(t, key); body != want || token != "9" {
		t.Errorf("stored object = %q with token %q; want %q, token 9", body, token, want)
	}
}

// TestMetricsLabelsAreBounded sends requests with unique paths and a
// made-up method, and checks that no label of any series carries them:
// requests are counted by route pattern, and unknown methods as "other".
func TestMetricsLabelsAreBounded(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	unique := fmt.Sprintf("u%d", time.Now().UnixNano())
	requests := []struct {
		method, path string
		wantRoute    string
		wantMethod   string
		wantStatus   int
	}{
		{http.MethodPut, "/v1/objects/" + e.bucket + "/" + unique + "/a", objectRoute, "PUT", http.StatusCreated},
		{http.MethodGet, "/v1/objects/" + e.bucket + "/" + unique + "/missing", objectRoute, "GET", http.StatusNotFound},
		{http.MethodGet, "/v1/fences/s3/" + e.bucket + "/" + unique, "/v1/fences/*", "GET", http.StatusOK},
		{http.MethodGet, "/no-such-route/" + unique, "none", "GET", http.StatusNotFound},
		{"X" + strings.ToUpper(unique), "/v1/objects/" + e.bucket + "/" + unique, "none", "other", http.StatusMethodNotAllowed},
	}
	for _, req := range requests {
		var tokens []string
		if req.method == http.MethodPut {
			tokens = []string{"1"}
		}
		if r := do(t, req.method, e.url+req.path, tokens, []byte("x")); r.status != req.wantStatus {
			t.Fatalf("%s %s = %s; want %d", req.method, req.path, r, req.wantStatus)
		}
	}
	families := e.scrape(t)
	for name, family := range families {
		for _, m := range family.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(strings.ToLower(l.GetValue()), strings.ToLower(unique)) || strings.Contains(l.GetValue(), e.bucket) {
					t.Errorf("%s has label %s=%q: a raw path or method in a label", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
	for _, req := range requests {
		labels := map[string]string{"route": req.wantRoute, "method": req.wantMethod, "status_class": fmt.Sprintf("%dxx", req.wantStatus/100)}
		if got := sample(families, "fencegate_requests_total", labels); got < 1 {
			t.Errorf("%s %s: fencegate_requests_total%v = %g; want at least 1", req.method, req.path, labels, got)
		}
	}
}

// TestMetricsRegistryPerGateway checks that two gateways in one process
// count apart (no global registry), and that /metrics carries the Go
// runtime and process collectors.
func TestMetricsRegistryPerGateway(t *testing.T) {
	e1 := newEnv(t, gateway.Config{})
	e2 := newEnvSharing(t, e1)
	if r := e1.put(t, "one", 1, "x"); r.status != http.StatusCreated {
		t.Fatalf("PUT = %s; want 201", r)
	}
	if got := sample(e1.scrape(t), putsAccepted.name, putsAccepted.labels); got != 1 {
		t.Errorf("first gateway: %s = %g; want 1", putsAccepted, got)
	}
	families := e2.scrape(t)
	if got := sample(families, putsAccepted.name, putsAccepted.labels); got != 0 {
		t.Errorf("second gateway: %s = %g; want 0 (it served no write)", putsAccepted, got)
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "fencegate_requests_in_flight"} {
		if families[name] == nil {
			t.Errorf("/metrics has no %s", name)
		}
	}
	// The scrape itself is in flight while it is served.
	if got := sample(families, "fencegate_requests_in_flight", nil); got != 1 {
		t.Errorf("fencegate_requests_in_flight = %g during the scrape; want 1", got)
	}
}
