package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/partners"
	"fencegate/tokenstore"
)

// newTracer returns a tracer whose ended spans rec records.
func newTracer(tb testing.TB) (trace.Tracer, *tracetest.SpanRecorder) {
	tb.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tb.Cleanup(func() { tp.Shutdown(tb.Context()) })
	return tp.Tracer("fencegate-test"), rec
}

// serverSpans waits until rec holds n ended server spans (the track
// middleware ends a request's span after its answer is sent) and returns
// them, with every ended span.
func serverSpans(tb testing.TB, rec *tracetest.SpanRecorder, n int) (servers, all []sdktrace.ReadOnlySpan) {
	tb.Helper()
	testenv.WaitUntil(tb, 5*time.Second, fmt.Sprintf("%d server spans have ended", n), func() bool {
		all = rec.Ended()
		servers = servers[:0]
		for _, s := range all {
			if s.SpanKind() == trace.SpanKindServer {
				servers = append(servers, s)
			}
		}
		return len(servers) >= n
	})
	if len(servers) != n {
		tb.Fatalf("%d server spans ended; want %d", len(servers), n)
	}
	return servers, all
}

func TestTracingAcceptedPut(t *testing.T) {
	tracer, rec := newTracer(t)
	e := newEnv(t, gateway.Config{Tracer: tracer})

	// The first write of a key observes it (no cached version); the
	// second takes its version from the etag cache: a fence check and a
	// put.
	if r := e.put(t, "k", 1, "one"); r.status != http.StatusCreated {
		t.Fatalf("first PUT = %s; want 201", r)
	}
	servers, all := serverSpans(t, rec, 1)
	names, _ := testenv.SpanChildren(t, servers[0], all)
	if want := []string{"s3 observe", "etcd fence_check", "s3 put"}; !slices.Equal(names, want) {
		t.Errorf("first PUT's children = %q; want %q", names, want)
	}

	r := e.put(t, "k", 2, "two")
	if r.status != http.StatusOK {
		t.Fatalf("second PUT = %s; want 200", r)
	}
	servers, all = serverSpans(t, rec, 2)
	server := servers[1]
	if server.Name() != "PUT /v1/objects/{bucket}/*" {
		t.Errorf("server span name = %q; want the route pattern", server.Name())
	}
	if server.Parent().IsValid() {
		t.Errorf("server span has parent %v; want a new trace (no traceparent sent)", server.Parent())
	}
	if server.Status().Code == codes.Error {
		t.Errorf("server span status = %v; want not Error for a 200", server.Status())
	}
	testenv.WantSpanAttrs(t, server, map[string]string{
		"http.request.method":       "PUT",
		"url.path":                  "/v1/objects/" + e.bucket + "/k",
		"http.response.status_code": "200",
		"fencegate.request_id":      r.header.Get("X-Request-Id"),
		"fencegate.resource":        string(api.ObjectResource(e.bucket, "k")),
		"fencegate.token":           "2",
	})
	names, children := testenv.SpanChildren(t, server, all)
	if want := []string{"etcd fence_check", "s3 put"}; !slices.Equal(names, want) {
		t.Fatalf("second PUT's children = %q; want %q", names, want)
	}
	testenv.WantSpanAttrs(t, children[0], map[string]string{"result": "accepted", "fencegate.resource": string(api.ObjectResource(e.bucket, "k"))})
	testenv.WantSpanAttrs(t, children[1], map[string]string{"result": "ok", "bucket": e.bucket})
	for _, c := range children {
		if c.StartTime().Before(server.StartTime()) || c.EndTime().After(server.EndTime()) {
			t.Errorf("span %q [%v, %v] is not within its parent's [%v, %v]", c.Name(), c.StartTime(), c.EndTime(), server.StartTime(), server.EndTime())
		}
	}
}

func TestTracingContinuesTraceparent(t *testing.T) {
	tracer, rec := newTracer(t)
	e := newEnv(t, gateway.Config{Tracer: tracer})
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanID  = "00f067aa0ba902b7"
	)
	req, err := http.NewRequest(http.MethodPut, e.objectURL("k"), strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(api.HeaderFenceToken, "3")
	req.Header.Set("Traceparent", "00-"+traceID+"-"+spanID+"-01")
	if r := send(t, req); r.status != http.StatusCreated {
		t.Fatalf("PUT = %s; want 201", r)
	}
	servers, all := serverSpans(t, rec, 1)
	server := servers[0]
	if got := server.SpanContext().TraceID().String(); got != traceID {
		t.Errorf("server span's trace = %s; want the traceparent's %s", got, traceID)
	}
	if got := server.Parent().SpanID().String(); got != spanID || !server.Parent().IsRemote() {
		t.Errorf("server span's parent = %s (remote %v); want the traceparent's %s", got, server.Parent().IsRemote(), spanID)
	}
	if names, _ := testenv.SpanChildren(t, server, all); !slices.Contains(names, "etcd fence_check") || !slices.Contains(names, "s3 put") {
		t.Errorf("children = %q; want the fence check and the put", names)
	}
}

func TestTracingStaleFromCache(t *testing.T) {
	tracer, rec := newTracer(t)
	e := newEnv(t, gateway.Config{Tracer: tracer})
	if r := e.put(t, "k", 10, "ten"); r.status != http.StatusCreated {
		t.Fatalf("PUT token 10 = %s; want 201", r)
	}
	serverSpans(t, rec, 1)
	etcdBefore, s3Before := e.etcdCalls.Count(), e.s3.Count()
	r := e.put(t, "k", 5, "five")
	wantProblem(t, r, http.StatusConflict, "stale-token")
	if e.etcdCalls.Count() != etcdBefore || e.s3.Count() != s3Before {
		t.Fatalf("the stale PUT reached etcd or S3; want a refusal from the cache")
	}
	servers, all := serverSpans(t, rec, 2)
	server := servers[1]
	testenv.WantSpanAttrs(t, server, map[string]string{
		"http.response.status_code": "409",
		"fencegate.resource":        string(api.ObjectResource(e.bucket, "k")),
		"fencegate.token":           "5",
	})
	if server.Status().Code == codes.Error {
		t.Errorf("a 409's server span has status %v; want not Error", server.Status())
	}
	if names, _ := testenv.SpanChildren(t, server, all); len(names) != 0 {
		t.Errorf("the stale refusal's children = %q; want none (no etcd, no S3)", names)
	}
}

func TestTracingPartnerTraceparent(t *testing.T) {
	tracer, rec := newTracer(t)
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	store, partnerStore := newPartnerStores(t, etcd, time.Second)
	cfg := gateway.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Tracer: tracer}
	gw, err := gateway.New(cfg, store, newMemObjects(), gateway.WithPartners([]partners.PartnerRoute{payRoute(t, partner.URL)}, partnerStore, nil))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)

	const clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	r := partnerDo(t, srv.URL, partnerReq{path: "pay/accounts/a1/charges", token: 7, body: "{}",
		header: http.Header{"Traceparent": {"00-" + clientTrace + "-00f067aa0ba902b7-01"}}})
	if r.status != http.StatusCreated {
		t.Fatalf("partner call = %s; want 201", r)
	}
	servers, all := serverSpans(t, rec, 1)
	server := servers[0]
	if server.Name() != "POST /v1/partners/{route}/*" {
		t.Errorf("server span name = %q", server.Name())
	}
	names, children := testenv.SpanChildren(t, server, all)
	if want := []string{"etcd partner_admission", "partner pay"}; !slices.Equal(names, want) {
		t.Fatalf("children = %q; want %q", names, want)
	}
	testenv.WantSpanAttrs(t, children[0], map[string]string{"result": "accepted", "fencegate.token": "7"})
	testenv.WantSpanAttrs(t, children[1], map[string]string{"http.response.status_code": "201"})
	calls := partner.snapshot()
	if len(calls) != 1 {
		t.Fatalf("partner got %d calls; want 1", len(calls))
	}
	// The partner's parent is the gateway's client span, in the client's
	// trace.
	want := "00-" + clientTrace + "-" + children[1].SpanContext().SpanID().String() + "-01"
	if got := calls[0].Header.Get("Traceparent"); got != want {
		t.Errorf("partner saw traceparent %q; want %q", got, want)
	}
}

func TestTracingAttributesOfFailures(t *testing.T) {
	tracer, rec := newTracer(t)
	e := newEnv(t, gateway.Config{Tracer: tracer})
	e.etcd.Stop(t)
	r := e.put(t, "k", 1, "x")
	if r.status < 500 {
		t.Fatalf("PUT with etcd down = %s; want a 5xx", r)
	}
	servers, all := serverSpans(t, rec, 1)
	server := servers[0]
	if server.Status().Code != codes.Error {
		t.Errorf("server span status = %v; want Error for %d", server.Status(), r.status)
	}
	_, children := testenv.SpanChildren(t, server, all)
	var check sdktrace.ReadOnlySpan
	for _, c := range children {
		if c.Name() == "etcd fence_check" {
			check = c
		}
	}
	if check == nil {
		t.Fatalf("no fence check span among %d children", len(children))
	}
	testenv.WantSpanAttrs(t, check, map[string]string{"result": "error"})
	if check.Status().Code != codes.Error {
		t.Errorf("fence check span status = %v; want Error", check.Status())
	}
}

// TestTracingOff: without a tracer nothing is traced, and a partner gets
// the client's traceparent as it came, like any other header.
func TestTracingOff(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	gw := startPartnerGateway(t, etcd, time.Second, payRoute(t, partner.URL))
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	r := partnerDo(t, gw, partnerReq{path: "pay/accounts/a1/charges", token: 7, body: "{}",
		header: http.Header{"Traceparent": {traceparent}}})
	if r.status != http.StatusCreated {
		t.Fatalf("partner call = %s; want 201", r)
	}
	if got := partner.snapshot()[0].Header.Get("Traceparent"); got != traceparent {
		t.Errorf("partner saw traceparent %q; want the client's %q", got, traceparent)
	}
}

// TestTraceS3: a front door's own S3 request (TraceS3) is a client span
// of the request's span, named by its operation, with the bucket and
// the answer's result: Error status for no answer or a 5xx, as the store
// decorators' spans; nothing when the request is not traced.
func TestTraceS3(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		err     error
		result  string
		isError bool
	}{
		{name: "2xx", status: http.StatusOK, result: "ok"},
		{name: "404", status: http.StatusNotFound, result: "not_found"},
		{name: "403", status: http.StatusForbidden, result: "error"},
		{name: "5xx", status: http.StatusServiceUnavailable, result: "error", isError: true},
		{name: "no answer", err: api.ErrUpstreamTimeout, result: "error", isError: true},
	}
	tracer, rec := newTracer(t)
	e := newStackEnv(t)
	store, backend := e.connect(t, tokenstore.Config{RequestTimeout: time.Second})
	gw, err := gateway.New(gateway.Config{Tracer: tracer, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store, backend)
	if err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			door := gw.Edge().Track(edge.Door{Name: "s3"})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				edge.NoteOperation(r.Context(), "ListObjectsV2")
				_, end := edge.TraceS3(r.Context(), "list_objects", "b")
				end(tt.status, tt.err)
			}))
			door.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/b?list-type=2", nil))
			servers, all := serverSpans(t, rec, i+1)
			server := servers[i]
			if server.Name() != "s3:ListObjectsV2" {
				t.Errorf("server span name = %q; want s3:ListObjectsV2", server.Name())
			}
			names, children := testenv.SpanChildren(t, server, all)
			if !slices.Equal(names, []string{"s3 list_objects"}) {
				t.Fatalf("children = %q; want [s3 list_objects]", names)
			}
			testenv.WantSpanAttrs(t, children[0], map[string]string{"bucket": "b", "result": tt.result})
			if got := children[0].Status().Code == codes.Error; got != tt.isError {
				t.Errorf("span status %v; want Error %v", children[0].Status(), tt.isError)
			}
		})
	}

	// Not traced: the function ends nothing, and no span is started.
	before := len(rec.Ended())
	ctx, end := edge.TraceS3(context.Background(), "list_objects", "b")
	end(http.StatusOK, nil)
	if trace.SpanFromContext(ctx).SpanContext().IsValid() {
		t.Error("TraceS3 started a span outside a traced request")
	}
	if n := len(rec.Ended()); n != before {
		t.Errorf("%d spans ended outside a traced request", n-before)
	}
}
