package s3api_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"fencegate/api"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

// tracedDoor is a door whose gateway traces every request into rec.
func tracedDoor(tb testing.TB) (*door, *tracetest.SpanRecorder) {
	tb.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tb.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return newDoor(tb, doorOptions{gateway: gateway.Config{Tracer: tp.Tracer("fencegate-test")}}), rec
}

// serverSpan waits for the server span of the request whose id is
// requestID (the door ends it once the answer is written) and returns it
// with every span ended by then.
func serverSpan(tb testing.TB, rec *tracetest.SpanRecorder, requestID string) (sdktrace.ReadOnlySpan, []sdktrace.ReadOnlySpan) {
	tb.Helper()
	if requestID == "" {
		tb.Fatal("the answer has no X-Amz-Request-Id")
	}
	var server sdktrace.ReadOnlySpan
	var all []sdktrace.ReadOnlySpan
	testenv.WaitUntil(tb, 5*time.Second, "the server span of request "+requestID+" has ended", func() bool {
		all = rec.Ended()
		for _, s := range all {
			if s.SpanKind() == trace.SpanKindServer && testenv.SpanAttrs(s)["fencegate.request_id"] == requestID {
				server = s
				return true
			}
		}
		return false
	})
	return server, all
}

// A client's trace, as its W3C traceparent names it.
const (
	clientTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID      = "00f067aa0ba902b7"
	clientTraceparent = "00-" + clientTraceID + "-" + clientSpanID + "-01"
)

// TestTracingPutObject: a PutObject through the door gets a server span
// that continues the client's traceparent, named by the door's route
// (s3:PutObject, as its metrics label it), with the request's outcome,
// and the fence check in etcd and the S3 requests as its children.
func TestTracingPutObject(t *testing.T) {
	d, rec := tracedDoor(t)
	out, err := d.put(t, d.client(writerKey, withHeader("traceparent", clientTraceparent)), "traced", 7, "hello")
	if err != nil {
		t.Fatal(err)
	}
	server, all := serverSpan(t, rec, requestIDOf(t, out.ResultMetadata))
	if server.Name() != "s3:PutObject" {
		t.Errorf("server span name = %q; want s3:PutObject", server.Name())
	}
	if got := server.SpanContext().TraceID().String(); got != clientTraceID {
		t.Errorf("server span's trace = %s; want the client's %s", got, clientTraceID)
	}
	if got := server.Parent().SpanID().String(); !server.Parent().IsRemote() || got != clientSpanID {
		t.Errorf("server span's parent = %s (remote %v); want the client's span %s", got, server.Parent().IsRemote(), clientSpanID)
	}
	if server.Status().Code == codes.Error {
		t.Errorf("server span status = %v; want not Error for a 200", server.Status())
	}
	resource := string(api.ObjectResource(d.bucket, "traced"))
	testenv.WantSpanAttrs(t, server, map[string]string{
		"http.request.method":       "PUT",
		"http.route":                "s3:PutObject",
		"http.response.status_code": "200",
		"fencegate.resource":        resource,
		"fencegate.token":           "7",
		"fencegate.problem":         "",
	})
	names, children := testenv.SpanChildren(t, server, all)
	if want := []string{"s3 observe", "etcd fence_check", "s3 put"}; !slices.Equal(names, want) {
		t.Fatalf("PutObject's children = %q; want %q", names, want)
	}
	testenv.WantSpanAttrs(t, children[1], map[string]string{"result": "accepted", "fencegate.resource": resource, "fencegate.token": "7"})
	testenv.WantSpanAttrs(t, children[2], map[string]string{"result": "ok", "bucket": d.bucket})
	if _, token, ok := d.stored(t, "traced"); !ok || token != "7" {
		t.Fatalf("stored token = %q (present %v); want 7", token, ok)
	}
}

// TestTracingStalePutObject: a PutObject whose token etcd finds stale
// gets a span with 409 and the problem, and the fence check that refused
// it as a child; nothing is written to S3.
func TestTracingStalePutObject(t *testing.T) {
	d, rec := tracedDoor(t)
	resource := api.ObjectResource(d.bucket, "stale")
	// Raised in etcd by another store, as by another gateway: this one's
	// cache does not know, so its fence check is what refuses.
	other, err := tokenstore.New(d.etcd.Client(t), tokenstore.Config{RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.FenceCheck(context.Background(), resource, 9); err != nil {
		t.Fatal(err)
	}
	_, err = d.put(t, d.client(writerKey), "stale", 3, "old")
	resp := wantAPIError(t, err, http.StatusConflict, "StaleFenceToken")
	server, all := serverSpan(t, rec, resp.Header.Get("X-Amz-Request-Id"))
	if server.Name() != "s3:PutObject" {
		t.Errorf("server span name = %q; want s3:PutObject", server.Name())
	}
	testenv.WantSpanAttrs(t, server, map[string]string{
		"http.route":                "s3:PutObject",
		"http.response.status_code": "409",
		"fencegate.problem":         "StaleFenceToken",
		"fencegate.resource":        string(resource),
		"fencegate.token":           "3",
	})
	names, children := testenv.SpanChildren(t, server, all)
	if want := []string{"s3 observe", "etcd fence_check"}; !slices.Equal(names, want) {
		t.Fatalf("stale PutObject's children = %q; want %q", names, want)
	}
	testenv.WantSpanAttrs(t, children[1], map[string]string{"result": "stale"})
	if _, _, ok := d.stored(t, "stale"); ok {
		t.Fatal("the stale write reached S3")
	}

	// Refused again, now from the gateway's cache: no round trip, and the
	// span still names what was refused.
	_, err = d.put(t, d.client(writerKey), "stale", 4, "old")
	resp = wantAPIError(t, err, http.StatusConflict, "StaleFenceToken")
	server, all = serverSpan(t, rec, resp.Header.Get("X-Amz-Request-Id"))
	testenv.WantSpanAttrs(t, server, map[string]string{
		"http.response.status_code": "409",
		"fencegate.problem":         "StaleFenceToken",
		"fencegate.resource":        string(resource),
		"fencegate.token":           "4",
	})
	if names, _ := testenv.SpanChildren(t, server, all); len(names) != 0 {
		t.Fatalf("a refusal from the cache has children %q; want none", names)
	}
}

// TestTracingUnauthenticated: a request whose signature does not verify
// gets a span with 403 and its problem, and no children: nothing reached
// etcd or S3.
func TestTracingUnauthenticated(t *testing.T) {
	d, rec := tracedDoor(t)
	bad := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(d.url), UsePathStyle: true, HTTPClient: d.srv.Client(),
		Credentials:      credentials.NewStaticCredentialsProvider(writerKey, "not-the-secret", ""),
		RetryMaxAttempts: 1,
	})
	before := d.s3.Count()
	_, err := d.put(t, bad, "forged", 5, "x")
	resp := wantAPIError(t, err, http.StatusForbidden, "SignatureDoesNotMatch")
	server, all := serverSpan(t, rec, resp.Header.Get("X-Amz-Request-Id"))
	if server.Name() != "s3:PutObject" {
		t.Errorf("server span name = %q; want s3:PutObject", server.Name())
	}
	testenv.WantSpanAttrs(t, server, map[string]string{
		"http.response.status_code": "403",
		"fencegate.problem":         "SignatureDoesNotMatch",
	})
	if names, _ := testenv.SpanChildren(t, server, all); len(names) != 0 {
		t.Fatalf("an unauthenticated request's span has children %q; want none", names)
	}
	if n := d.s3.Count() - before; n != 0 {
		t.Fatalf("%d S3 requests for a forged write; want none", n)
	}
	if hwm := d.mark(t, "forged"); hwm != 0 {
		t.Fatalf("mark = %s after a forged write; want none", hwm)
	}
}

// TestTracingDeleteObjects: each key of a DeleteObjects is fenced by a
// worker of its own; their round trips are children of the request's
// span all the same.
func TestTracingDeleteObjects(t *testing.T) {
	d, rec := tracedDoor(t)
	w := d.client(writerKey)
	keys := []string{"a", "b", "c"}
	var objects []types.ObjectIdentifier
	for _, k := range keys {
		if _, err := d.put(t, w, k, 2, k); err != nil {
			t.Fatal(err)
		}
		objects = append(objects, types.ObjectIdentifier{Key: aws.String(k)})
	}
	out, err := w.DeleteObjects(context.Background(), &s3.DeleteObjectsInput{
		Bucket: aws.String(d.bucket),
		Delete: &types.Delete{Objects: objects},
	}, withHeader(headerFenceTokenMeta, "3"))
	if err != nil || len(out.Deleted) != len(keys) || len(out.Errors) != 0 {
		t.Fatalf("DeleteObjects = %+v, %v; want %d deleted", out, err, len(keys))
	}
	server, all := serverSpan(t, rec, requestIDOf(t, out.ResultMetadata))
	if server.Name() != "s3:DeleteObjects" {
		t.Errorf("server span name = %q; want s3:DeleteObjects", server.Name())
	}
	testenv.WantSpanAttrs(t, server, map[string]string{"http.route": "s3:DeleteObjects", "http.response.status_code": "200"})
	names, children := testenv.SpanChildren(t, server, all)
	checked := map[string]bool{}
	for i, n := range names {
		if n == "etcd fence_check" {
			checked[testenv.SpanAttrs(children[i])["fencegate.resource"]] = true
		}
	}
	for _, k := range keys {
		if !checked[string(api.ObjectResource(d.bucket, k))] {
			t.Errorf("no fence check of %s among DeleteObjects' children %q", k, names)
		}
	}
	if n := strings.Count(strings.Join(names, ","), "s3 delete"); n != len(keys) {
		t.Errorf("DeleteObjects' children %q hold %d S3 deletes; want %d", names, n, len(keys))
	}
}

// headerFenceTokenMeta carries a request's token as the object's user
// metadata.
const headerFenceTokenMeta = "X-Amz-Meta-Fence-Token"

// requestIDOf returns the request id of an SDK call's answer.
func requestIDOf(tb testing.TB, md middleware.Metadata) string {
	tb.Helper()
	id, _ := awsmiddleware.GetRequestIDMetadata(md)
	return id
}

// TestTracingBucketReads: the door's bucket reads, which it sends to S3
// itself (Deps.Buckets), are client spans of the request's span too,
// with the bucket and the store's answer as their result.
func TestTracingBucketReads(t *testing.T) {
	d, rec := tracedDoor(t)
	ctx := context.Background()
	w := d.client(writerKey)
	if _, err := d.put(t, w, "listed", 1, "x"); err != nil {
		t.Fatal(err)
	}
	list, err := w.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(d.bucket)})
	if err != nil || len(list.Contents) != 1 {
		t.Fatalf("ListObjectsV2 = %v, %v; want one key", list, err)
	}
	buckets, err := w.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatal(err)
	}
	absent := d.bucket + "-absent"
	_, headErr := w.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(absent)})
	var notFound *types.NotFound
	if !errors.As(headErr, &notFound) {
		t.Fatalf("HeadBucket of an absent bucket: %v; want NotFound", headErr)
	}
	var respErr *smithyhttp.ResponseError
	errors.As(headErr, &respErr)

	for _, tc := range []struct {
		requestID, route, status, child, bucket, result string
	}{
		{requestIDOf(t, list.ResultMetadata), "s3:ListObjectsV2", "200", "s3 list_objects", d.bucket, "ok"},
		{requestIDOf(t, buckets.ResultMetadata), "s3:ListBuckets", "200", "s3 list_buckets", "", "ok"},
		{respErr.Response.Header.Get("X-Amz-Request-Id"), "s3:HeadBucket", "404", "s3 head_bucket", absent, "not_found"},
	} {
		server, all := serverSpan(t, rec, tc.requestID)
		if server.Name() != tc.route {
			t.Errorf("server span name = %q; want %s", server.Name(), tc.route)
		}
		testenv.WantSpanAttrs(t, server, map[string]string{"http.route": tc.route, "http.response.status_code": tc.status})
		names, children := testenv.SpanChildren(t, server, all)
		if !slices.Equal(names, []string{tc.child}) {
			t.Errorf("%s's children = %q; want [%s]", tc.route, names, tc.child)
			continue
		}
		testenv.WantSpanAttrs(t, children[0], map[string]string{"bucket": tc.bucket, "result": tc.result})
	}
}
