package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

// multipartS3Operations are the operation label values of the S3
// requests of multipart uploads.
var multipartS3Operations = []string{"create_upload", "upload_part", "copy_part", "complete_upload", "abort_upload", "list_parts", "list_uploads"}

// gather reads gw's metrics from its registry rather than GET /metrics,
// which would be a traced request of its own.
func gather(tb testing.TB, gw *gateway.Gateway) map[string]*dto.MetricFamily {
	tb.Helper()
	list, err := gw.Registry().Gather()
	if err != nil {
		tb.Fatalf("gather: %v", err)
	}
	families := make(map[string]*dto.MetricFamily, len(list))
	for _, f := range list {
		families[f.GetName()] = f
	}
	return families
}

// s3Counts returns the S3 requests counted in families, by "operation
// result", for every operation and result that has a series.
func s3Counts(families map[string]*dto.MetricFamily) map[string]float64 {
	counts := map[string]float64{}
	for _, m := range families[s3Requests.name].GetMetric() {
		var op, result string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "operation":
				op = l.GetValue()
			case "result":
				result = l.GetValue()
			}
		}
		counts[op+" "+result] += float64(m.GetHistogram().GetSampleCount())
	}
	return counts
}

// wantS3Counted fails unless the multipart S3 operations were counted
// in the S3 request metric exactly as want says ("operation result":
// count) since before, and no other multipart series moved.
func wantS3Counted(tb testing.TB, before, after map[string]float64, want map[string]float64) {
	tb.Helper()
	seen := map[string]bool{}
	for key, n := range after {
		op, _, _ := strings.Cut(key, " ")
		if !slices.Contains(multipartS3Operations, op) {
			continue
		}
		seen[key] = true
		if got := n - before[key]; got != want[key] {
			tb.Errorf("%s{%s} moved by %v; want %v", s3Requests.name, key, got, want[key])
		}
	}
	for key, n := range want {
		if !seen[key] {
			tb.Errorf("%s{%s} has no series; want it moved by %v", s3Requests.name, key, n)
		}
	}
}

// newTracedMultipartEnv is newMultipartEnv with a tracer whose spans rec
// records.
func newTracedMultipartEnv(t *testing.T, cfg gateway.Config) (*env, *gateway.Gateway, *tracetest.SpanRecorder) {
	t.Helper()
	tracer, rec := newTracer(t)
	cfg.Tracer = tracer
	e, gw := newMultipartEnv(t, cfg)
	return e, gw, rec
}

// TestTracingPutInParts: a REST PUT over the multipart threshold is one
// server span whose children are every round trip of its upload, in
// order: the create's fence check, the upload created in S3 and bound in
// etcd, each part's binding and mark read and the part itself, and the
// completion's binding, observation, fence check, conditional completion
// and unbind. The S3 request metric counts each of its S3 requests by
// operation.
func TestTracingPutInParts(t *testing.T) {
	e, gw, rec := newTracedMultipartEnv(t, smallParts)
	before := s3Counts(gather(t, gw))

	const n = 12 << 20 // parts of 5, 5 and 2 MiB
	if r := e.putStream(t, "big", 7, generated(n, 1), n); r.status != http.StatusCreated {
		t.Fatalf("PUT of 12 MiB = %s; want 201", r)
	}
	servers, all := serverSpans(t, rec, 1)
	server := servers[0]
	if server.Name() != "PUT /v1/objects/{bucket}/*" {
		t.Errorf("server span name = %q; want the route pattern", server.Name())
	}
	// Each part: the binding and the mark before it, the binding again
	// after it (was the upload aborted as stale meanwhile?).
	part := []string{"etcd upload", "etcd high_water_mark", "s3 upload_part", "etcd upload"}
	want := slices.Concat(
		// CreateUpload observes, checks the fence, creates, binds, and
		// writes the mark again after the binding.
		[]string{"s3 observe", "etcd fence_check", "s3 create_upload", "etcd bind_upload", "etcd fence_check"},
		part, part, part,
		[]string{"etcd upload", "s3 observe", "etcd fence_check", "s3 complete_upload", "etcd finish_upload"},
	)
	names, children := testenv.SpanChildren(t, server, all)
	if !slices.Equal(names, want) {
		t.Fatalf("children of a PUT in parts =\n%q;\nwant\n%q", names, want)
	}
	resource := string(api.ObjectResource(e.bucket, "big"))
	for _, c := range children {
		switch {
		case strings.HasPrefix(c.Name(), "s3 "):
			testenv.WantSpanAttrs(t, c, map[string]string{"bucket": e.bucket, "result": "ok"})
		case c.Name() == "etcd fence_check":
			testenv.WantSpanAttrs(t, c, map[string]string{"fencegate.resource": resource, "fencegate.token": "7", "result": "accepted"})
		case c.Name() == "etcd bind_upload":
			testenv.WantSpanAttrs(t, c, map[string]string{"fencegate.resource": resource, "fencegate.token": "7", "result": "ok"})
		case c.Name() == "etcd upload":
			testenv.WantSpanAttrs(t, c, map[string]string{"fencegate.resource": resource, "result": "ok"})
		default:
			testenv.WantSpanAttrs(t, c, map[string]string{"result": "ok"})
		}
		if c.Status().Code == codes.Error {
			t.Errorf("span %q has status %v; want not Error", c.Name(), c.Status())
		}
		if c.StartTime().Before(server.StartTime()) || c.EndTime().After(server.EndTime()) {
			t.Errorf("span %q [%v, %v] is not within its parent's [%v, %v]", c.Name(), c.StartTime(), c.EndTime(), server.StartTime(), server.EndTime())
		}
	}
	wantS3Counted(t, before, s3Counts(gather(t, gw)), map[string]float64{
		"create_upload ok": 1, "upload_part ok": 3, "complete_upload ok": 1,
	})
	if left := e.uploadsLeft(t); len(left) != 0 {
		t.Fatalf("uploads left: %v; want none", left)
	}
}

// doorRequest serves one request of operation op through a front door of
// gw (edge.Edge.Track), as the S3 API serves its multipart operations, and
// returns what f, run with the request's context, returned.
func doorRequest(gw *gateway.Gateway, op string, f func(ctx context.Context) error) error {
	var err error
	door := gw.Edge().Track(edge.Door{Name: "s3"})(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		edge.NoteOperation(r.Context(), op)
		err = f(r.Context())
	}))
	door.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", nil))
	return err
}

// TestTracingMultipartOperations: each of the S3 API's multipart
// operations (the Gateway's exported methods, in a front door's request)
// is a server span whose children are its round trips, with their
// results; a completion whose token went stale shows the stale fence
// check and the abort it caused; a binding that etcd cannot read is an
// error span and an etcd error. The S3 request metric counts each
// operation.
func TestTracingMultipartOperations(t *testing.T) {
	e, gw, rec := newTracedMultipartEnv(t, gateway.Config{})
	p := api.ObjectPath{Bucket: e.bucket, Key: "doc"}
	resource := string(api.ObjectResource(e.bucket, "doc"))
	part := bytes.Repeat([]byte("a"), api.MinPartSize)
	if _, err := e.minio.PutObject(context.Background(), e.bucket, "src", strings.NewReader("0123456789"), 10, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	// A second token store on the same etcd raises the mark without this
	// gateway's cache knowing: only the completion's fence check finds it.
	other, err := tokenstore.New(e.etcd.Client(t), tokenstore.Config{RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	before := s3Counts(gather(t, gw))
	etcdErrorsBefore := sample(gather(t, gw), "fencegate_etcd_errors_total", map[string]string{"operation": "upload"})

	var upload api.UploadBinding
	create := func(token api.Token) func(ctx context.Context) error {
		return func(ctx context.Context) (err error) {
			upload, err = gw.Engine().CreateUpload(ctx, p, token, "", api.ObjectMetadata{})
			return err
		}
	}
	uploadPart := func(ctx context.Context) error {
		_, err := gw.Engine().UploadPart(ctx, api.UploadPartInput{Path: p, UploadID: upload.Capability(), Number: 1, Body: bytes.NewReader(part), Size: int64(len(part))}, 0)
		return err
	}
	type span struct{ name, result string }
	tests := []struct {
		op      string
		run     func(ctx context.Context) error
		wantErr error // nil: none
		want    []span
		// then runs after the request.
		then func(t *testing.T)
	}{
		{op: "CreateMultipartUpload", run: create(8), want: []span{
			{"s3 observe", "ok"}, {"etcd fence_check", "accepted"}, {"s3 create_upload", "ok"}, {"etcd bind_upload", "ok"}, {"etcd fence_check", "accepted"},
		}},
		{op: "UploadPart", run: uploadPart, want: []span{
			{"etcd upload", "ok"}, {"etcd high_water_mark", "ok"}, {"s3 upload_part", "ok"}, {"etcd upload", "ok"},
		}},
		{op: "UploadPartCopy", run: func(ctx context.Context) error {
			_, err := gw.Engine().CopyPart(ctx, api.CopyPartInput{Path: p, UploadID: upload.Capability(), Number: 2, Source: api.ObjectPath{Bucket: e.bucket, Key: "src"}}, 0)
			return err
		}, want: []span{
			{"etcd upload", "ok"}, {"etcd high_water_mark", "ok"}, {"s3 copy_part", "ok"}, {"etcd upload", "ok"},
		}},
		{op: "ListParts", run: func(ctx context.Context) error {
			list, err := gw.Engine().ListParts(ctx, p, upload.Capability(), 0, 0)
			if err == nil && len(list.Parts) != 2 {
				t.Errorf("ListParts = %+v; want two parts", list)
			}
			return err
		}, want: []span{{"etcd upload", "ok"}, {"s3 list_parts", "ok"}}},
		{op: "ListMultipartUploads", run: func(ctx context.Context) error {
			_, err := gw.Engine().ListUploads(ctx, api.ListUploadsInput{Bucket: e.bucket})
			return err
		}, want: []span{{"s3 list_uploads", "ok"}}, then: func(t *testing.T) {
			if err := other.FenceCheck(context.Background(), api.Resource(resource), 9); err != nil {
				t.Fatalf("raising the mark to 9: %v", err)
			}
		}},
		{op: "CompleteMultipartUpload", run: func(ctx context.Context) error {
			_, err := gw.Engine().CompleteUpload(ctx, p, upload.Capability(), 0, []api.Part{{Number: 1, ETag: "x"}})
			return err
		}, wantErr: api.ErrStaleToken, want: []span{
			{"etcd upload", "ok"}, {"s3 observe", "ok"}, {"etcd fence_check", "stale"}, {"etcd finish_upload", "ok"}, {"s3 abort_upload", "ok"},
		}, then: func(t *testing.T) {
			if left := e.uploadsLeft(t); len(left) != 0 {
				t.Fatalf("uploads left: %v; want the stale upload aborted", left)
			}
		}},
		// The binding of the upload aborted as stale is kept a while: a
		// part sent late to it is refused as stale, with no S3 request.
		{op: "UploadPart", run: uploadPart, wantErr: api.ErrStaleToken, want: []span{{"etcd upload", "ok"}}},
		{op: "CreateMultipartUpload", run: create(10), want: []span{
			{"s3 observe", "ok"}, {"etcd fence_check", "accepted"}, {"s3 create_upload", "ok"}, {"etcd bind_upload", "ok"}, {"etcd fence_check", "accepted"},
		}},
		{op: "AbortMultipartUpload", run: func(ctx context.Context) error {
			return gw.Engine().AbortUpload(ctx, p, upload.Capability(), 0)
		}, want: []span{{"etcd upload", "ok"}, {"s3 abort_upload", "ok"}, {"etcd unbind_upload", "ok"}}},
		{op: "AbortMultipartUpload", run: func(ctx context.Context) error {
			return gw.Engine().AbortUpload(ctx, p, upload.Capability(), 0)
		}, wantErr: api.ErrNotFound, want: []span{{"etcd upload", "not_found"}, {"etcd upload", "not_found"}}},
		{op: "CreateMultipartUpload", run: create(11), want: []span{
			{"s3 observe", "ok"}, {"etcd fence_check", "accepted"}, {"s3 create_upload", "ok"}, {"etcd bind_upload", "ok"}, {"etcd fence_check", "accepted"},
		}, then: func(*testing.T) { e.etcd.Stop(t) }},
		{op: "UploadPart", run: uploadPart, wantErr: api.ErrUnavailable, want: []span{{"etcd upload", "error"}}},
	}
	for i, tt := range tests {
		if err := doorRequest(gw, tt.op, tt.run); !errors.Is(err, tt.wantErr) {
			t.Fatalf("request %d, %s = %v; want %v", i, tt.op, err, tt.wantErr)
		}
		servers, all := serverSpans(t, rec, i+1)
		server := servers[i]
		if server.Name() != "s3:"+tt.op {
			t.Errorf("request %d: server span name = %q; want s3:%s", i, server.Name(), tt.op)
		}
		_, children := testenv.SpanChildren(t, server, all)
		var got []span
		for _, c := range children {
			got = append(got, span{c.Name(), testenv.SpanAttrs(c)["result"]})
			if failed := c.Status().Code == codes.Error; failed != (testenv.SpanAttrs(c)["result"] == "error") {
				t.Errorf("request %d, %s: span %q has status %v; want Error only for an error", i, tt.op, c.Name(), c.Status())
			}
			wantSpanSubject(t, c, e.bucket, resource)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("request %d, %s: children = %v; want %v", i, tt.op, got, tt.want)
		}
		if tt.then != nil {
			tt.then(t)
		}
	}

	families := gather(t, gw)
	wantS3Counted(t, before, s3Counts(families), map[string]float64{
		"create_upload ok": 3, "upload_part ok": 1, "copy_part ok": 1, "list_parts ok": 1,
		"list_uploads ok": 1, "abort_upload ok": 2,
	})
	if got := sample(families, "fencegate_etcd_errors_total", map[string]string{"operation": "upload"}) - etcdErrorsBefore; got != 1 {
		t.Errorf("fencegate_etcd_errors_total{operation=upload} moved by %v; want 1 (the binding read with etcd down)", got)
	}
}

// wantSpanSubject fails unless a multipart round trip's span names what
// it is about: an S3 request its bucket, an etcd request that names a
// resource the resource.
func wantSpanSubject(tb testing.TB, s sdktrace.ReadOnlySpan, bucket, resource string) {
	tb.Helper()
	switch {
	case strings.HasPrefix(s.Name(), "s3 "):
		testenv.WantSpanAttrs(tb, s, map[string]string{"bucket": bucket})
	default:
		testenv.WantSpanAttrs(tb, s, map[string]string{"fencegate.resource": resource})
	}
}

// TestMultipartUntraced: without a tracer, the multipart uploads' round
// trips are still counted in the S3 request metric.
func TestMultipartUntraced(t *testing.T) {
	e, gw := newMultipartEnv(t, gateway.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	before := s3Counts(gather(t, gw))
	p := api.ObjectPath{Bucket: e.bucket, Key: "doc"}
	b, err := gw.Engine().CreateUpload(context.Background(), p, 1, "", api.ObjectMetadata{})
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Engine().AbortUpload(context.Background(), p, b.Capability(), 0); err != nil {
		t.Fatal(err)
	}
	wantS3Counted(t, before, s3Counts(gather(t, gw)), map[string]float64{"create_upload ok": 1, "abort_upload ok": 1})
}

// TestTracingCompletionLosesRace: a completion that S3 refuses because a
// newer writer replaced the object after its fence check is a lost race
// in the metrics (complete_upload) and a precondition_failed span; the
// completion observes again, finds the newer token and aborts the upload,
// all under the PUT's span.
func TestTracingCompletionLosesRace(t *testing.T) {
	var e *env
	newer := func() {
		if r := e.put(t, "obj", 6, "bytes of 6"); r.status != http.StatusOK {
			t.Errorf("newer writer's PUT = %s; want 200", r)
		}
	}
	cfg := smallParts
	cfg.TestHooks = &gateway.TestHooks{AfterFenceCheck: onceFor(5, newer)}
	e, gw, rec := newTracedMultipartEnv(t, cfg)
	if r := e.put(t, "obj", 4, "bytes of 4"); r.status != http.StatusCreated {
		t.Fatalf("first PUT = %s; want 201", r)
	}
	racesBefore := sample(gather(t, gw), "fencegate_s3_lost_races_total", map[string]string{"operation": "complete_upload"})

	const n = 9 << 20 // over the threshold: parts of 5 and 4 MiB
	r := e.putStream(t, "obj", 5, generated(n, 4), n)
	wantProblem(t, r, http.StatusConflict, "stale-token")
	// The first PUT, the newer writer's (which ends inside the hook),
	// then the PUT in parts.
	servers, all := serverSpans(t, rec, 3)
	type span struct{ name, result string }
	var got []span
	_, children := testenv.SpanChildren(t, servers[2], all)
	for _, c := range children {
		got = append(got, span{c.Name(), testenv.SpanAttrs(c)["result"]})
	}
	want := []span{
		{"s3 observe", "ok"}, {"etcd fence_check", "accepted"}, {"s3 create_upload", "ok"}, {"etcd bind_upload", "ok"}, {"etcd fence_check", "accepted"},
		{"etcd upload", "ok"}, {"etcd high_water_mark", "ok"}, {"s3 upload_part", "ok"}, {"etcd upload", "ok"},
		{"etcd upload", "ok"}, {"etcd high_water_mark", "ok"}, {"s3 upload_part", "ok"}, {"etcd upload", "ok"},
		{"etcd upload", "ok"}, {"s3 observe", "ok"}, {"etcd fence_check", "accepted"},
		{"s3 complete_upload", "precondition_failed"},
		{"s3 observe", "ok"}, // the newer writer's token 6: stale
		{"etcd finish_upload", "ok"}, {"s3 abort_upload", "ok"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("children of the PUT in parts =\n%v;\nwant\n%v", got, want)
	}
	if got := sample(gather(t, gw), "fencegate_s3_lost_races_total", map[string]string{"operation": "complete_upload"}) - racesBefore; got != 1 {
		t.Errorf("fencegate_s3_lost_races_total{operation=complete_upload} moved by %v; want 1", got)
	}
	if body, token, _ := e.stored(t, "obj"); body != "bytes of 6" || token != "6" {
		t.Errorf("object = %q, token %s; want the newer writer's", body, token)
	}
}
