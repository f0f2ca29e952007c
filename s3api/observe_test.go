package s3api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"fencegate/api"
	"fencegate/gateway"
)

// feed is a subscription to the gateway's event feed (GET /v1/events over
// REST), read by a goroutine of its own: the decisions' data, in order.
type feed chan map[string]any

// subscribeFeed subscribes to d's event feed under prefix with the REST
// API key key, and returns once the gateway confirmed the subscription.
func subscribeFeed(tb testing.TB, d *door, prefix, key string) feed {
	tb.Helper()
	rest := httptest.NewServer(d.gw)
	tb.Cleanup(rest.Close)
	req, err := http.NewRequest(http.MethodGet, rest.URL+"/v1/events?prefix="+prefix, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := rest.Client().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET /v1/events as %s: %d", key, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || sc.Text() != ": subscribed" {
		tb.Fatalf("the stream did not start with : subscribed")
	}
	f := make(feed, 1024)
	go func() {
		defer close(f)
		event := ""
		for sc.Scan() {
			switch line := sc.Text(); {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "decision":
				var m map[string]any
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m) == nil {
					f <- m
				}
			}
		}
	}()
	return f
}

// next returns the next decision, failing if none comes within 10 s (a
// bound on a hang, not a measurement).
func (f feed) next(tb testing.TB) map[string]any {
	tb.Helper()
	select {
	case m, ok := <-f:
		if !ok {
			tb.Fatal("the event stream ended")
		}
		return m
	case <-time.After(10 * time.Second):
		tb.Fatal("no event within 10 s")
	}
	return nil
}

// wantEvent fails unless e has each field of want (numbers as float64)
// and a latency above zero.
func wantEvent(tb testing.TB, e map[string]any, want map[string]any) {
	tb.Helper()
	for k, v := range want {
		if e[k] != v {
			tb.Errorf("event %v: %s = %#v; want %#v", e, k, e[k], v)
		}
	}
	if ms, _ := e["latency_ms"].(float64); ms <= 0 {
		tb.Errorf("event %v: latency_ms = %v; want > 0", e, e["latency_ms"])
	}
}

// TestDoorWritesArePublished: every write accepted through the door
// (PutObject, CopyObject's destination, DeleteObject, each key that
// DeleteObjects deletes, CompleteMultipartUpload) is a write.accepted or
// delete.accepted decision on the event feed, with the fields a REST
// write's has, and a stale one a write.refused; a subscriber that may not
// read the objects sees none of them.
func TestDoorWritesArePublished(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	prefix := "s3/" + d.bucket + "/"
	all := subscribeFeed(t, d, prefix, "rest-writer")
	logsOnly := subscribeFeed(t, d, prefix, "rest-logs") // reads only logs/
	w := d.client(writerKey)

	put, err := d.put(t, w, "k", 5, "five")
	if err != nil {
		t.Fatal(err)
	}
	wantEvent(t, all.next(t), map[string]any{"kind": "write.accepted", "resource": prefix + "k", "token": "5", "hwm": "5",
		"etag": aws.ToString(put.ETag), "status": 200.0, "identity": "writer"})
	put, err = d.put(t, w, "k", 6, "six")
	if err != nil {
		t.Fatal(err)
	}
	wantEvent(t, all.next(t), map[string]any{"kind": "write.accepted", "resource": prefix + "k", "token": "6", "hwm_before": "5", "hwm": "6",
		"etag": aws.ToString(put.ETag), "status": 200.0, "identity": "writer"})

	// A stale write through the door is a write.refused decision, as on
	// REST.
	_, err = d.put(t, w, "k", 4, "four")
	wantAPIError(t, err, http.StatusConflict, "StaleFenceToken")
	refused := all.next(t)
	for k, v := range map[string]any{"kind": "write.refused", "resource": prefix + "k", "token": "4", "hwm": "6",
		"problem": "stale-token", "caught": "cache", "status": 409.0, "identity": "writer"} {
		if refused[k] != v {
			t.Errorf("event %v: %s = %#v; want %#v", refused, k, refused[k], v)
		}
	}

	cp, err := w.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("copy"),
		CopySource: aws.String(d.bucket + "/k"), Metadata: map[string]string{"fence-token": "7"}})
	if err != nil {
		t.Fatalf("CopyObject: %v", err)
	}
	wantEvent(t, all.next(t), map[string]any{"kind": "write.accepted", "resource": prefix + "copy", "token": "7", "hwm": "7",
		"etag": aws.ToString(cp.CopyObjectResult.ETag), "identity": "writer"})

	if _, err := w.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("k")},
		withHeader("X-Amz-Meta-Fence-Token", "8")); err != nil {
		t.Fatalf("DeleteObject: %v", err)
	}
	wantEvent(t, all.next(t), map[string]any{"kind": "delete.accepted", "resource": prefix + "k", "token": "8", "hwm_before": "6", "hwm": "8",
		"status": 204.0, "identity": "writer"})

	del, err := w.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(d.bucket), Delete: &types.Delete{
		Objects: []types.ObjectIdentifier{{Key: aws.String("copy")}, {Key: aws.String("never-was")}},
	}}, withHeader("X-Amz-Meta-Fence-Token", "9"))
	if err != nil || len(del.Errors) != 0 {
		t.Fatalf("DeleteObjects = %+v, %v; want both keys deleted", del, err)
	}
	deleted := map[string]map[string]any{}
	for range 2 {
		e := all.next(t)
		deleted[e["resource"].(string)] = e
	}
	wantEvent(t, deleted[prefix+"copy"], map[string]any{"kind": "delete.accepted", "token": "9", "hwm_before": "7", "hwm": "9", "identity": "writer"})
	// A delete of nothing raises no mark (docs/s3-api.md): its event says so.
	wantEvent(t, deleted[prefix+"never-was"], map[string]any{"kind": "delete.accepted", "token": "9", "identity": "writer"})
	if _, ok := deleted[prefix+"never-was"]["hwm"]; ok {
		t.Errorf("the delete of an absent key has hwm %v; want none (it raised nothing)", deleted[prefix+"never-was"]["hwm"])
	}

	create, err := w.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(d.bucket), Key: aws.String("mp"), Metadata: map[string]string{"fence-token": "10"},
	})
	if err != nil {
		t.Fatalf("CreateMultipartUpload: %v", err)
	}
	p1, err := w.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(d.bucket), Key: aws.String("mp"), UploadId: create.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader([]byte("one part"))})
	if err != nil {
		t.Fatalf("UploadPart: %v", err)
	}
	done, err := w.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(d.bucket), Key: aws.String("mp"), UploadId: create.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p1.ETag, ChecksumCRC32: p1.ChecksumCRC32}}},
	})
	if err != nil {
		t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	wantEvent(t, all.next(t), map[string]any{"kind": "write.accepted", "resource": prefix + "mp", "token": "10", "hwm": "10",
		"etag": aws.ToString(done.ETag), "status": 200.0, "identity": "writer"})

	// The logs identity's subscription: its first decision is the one
	// write it may read, none of the others before it.
	if _, err := d.put(t, w, "logs/x", 1, "log"); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, all.next(t), map[string]any{"kind": "write.accepted", "resource": prefix + "logs/x"})
	wantEvent(t, logsOnly.next(t), map[string]any{"kind": "write.accepted", "resource": prefix + "logs/x", "token": "1"})
}

// TestDoorRequestsCountedAndLogged: every request through the door is in
// fencegate_requests_total, by its S3 operation (route "s3:PutObject"),
// and gets one access log line with its operation, status, bytes,
// duration and identity, and never its signature or credentials.
func TestDoorRequestsCountedAndLogged(t *testing.T) {
	var logs syncBuffer
	d := newDoor(t, doorOptions{gateway: gateway.Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}})
	ctx := context.Background()
	w := d.client(writerKey)
	if _, err := d.put(t, w, "k", 5, "five"); err != nil {
		t.Fatal(err)
	}
	_, err := d.put(t, w, "k", 4, "four")
	wantAPIError(t, err, http.StatusConflict, "StaleFenceToken")
	got, err := w.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, got.Body)
	got.Body.Close()
	d.settle()

	for _, c := range []struct {
		route, status, problem string
		want                   float64
	}{
		{"s3:PutObject", "2xx", "", 1},
		{"s3:PutObject", "4xx", "StaleFenceToken", 1},
		{"s3:GetObject", "2xx", "", 1},
	} {
		if n := requests(t, d.gw, c.route, c.status, c.problem); n != c.want {
			t.Errorf("fencegate_requests_total{route=%q,status_class=%q,problem=%q} = %v; want %v", c.route, c.status, c.problem, n, c.want)
		}
	}

	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == "request" {
			lines = append(lines, m)
		}
	}
	if len(lines) != 3 {
		t.Fatalf("%d access lines; want 3 (one a request):\n%s", len(lines), logs.String())
	}
	for i, want := range []struct {
		operation string
		status    float64
		bytes     bool
	}{{"PutObject", 200, false}, {"PutObject", 409, true}, {"GetObject", 200, true}} {
		l := lines[i]
		if l["api"] != "s3" || l["operation"] != want.operation || l["status"] != want.status || l["identity"] != "writer" || l["method"] == nil || l["duration"] == nil || l["request_id"] == "" {
			t.Errorf("access line %d = %v; want api s3, operation %s, status %v, identity writer, method, duration, request id", i, l, want.operation, want.status)
		}
		if n, _ := l["bytes"].(float64); want.bytes != (n > 0) {
			t.Errorf("access line %d bytes = %v; want > 0: %v", i, l["bytes"], want.bytes)
		}
	}
	out := logs.String()
	for _, secret := range []string{secretOf + writerKey, "Signature=", "AWS4-HMAC-SHA256", "Credential"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds %q:\n%s", secret, out)
		}
	}
}

// requests returns fencegate_requests_total's value for route, status
// class and problem, summed over methods.
func requests(tb testing.TB, gw *gateway.Gateway, route, class, problem string) float64 {
	tb.Helper()
	families, err := gw.Registry().Gather()
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != "fencegate_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] == route && labels["status_class"] == class && labels["problem"] == problem {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestDoorLimitsRequestsPerClient: with MaxRequestsPerClient 2, a third
// request of one identity while two are in flight is refused SlowDown
// (503, Retry-After) before it reaches S3, another identity still gets
// through, and a request whose signature does not verify takes nothing
// from the identity whose access key it names.
func TestDoorLimitsRequestsPerClient(t *testing.T) {
	d := newDoor(t, doorOptions{gateway: gateway.Config{MaxRequestsPerClient: 2}})
	ctx := context.Background()
	w := d.client(writerKey)
	// Two slow PUTs of writer: their bodies arrive only when released.
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open) // a failure below must not leave them hanging
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = w.PutObject(ctx, &s3.PutObjectInput{
				Bucket: aws.String(d.bucket), Key: aws.String("slow"), Body: &gatedBody{gate: release, data: []byte("slow")},
				ContentLength: aws.Int64(4), Metadata: map[string]string{"fence-token": api.Token(10 + i).String()},
			}, func(o *s3.Options) { o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired })
		}()
	}
	waitFor(t, "two PUTs in flight", func() bool { return d.inFlight(t) >= 2 })

	// A forged request naming writer's access key is refused for its
	// signature, not for writer's budget.
	forged := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(d.url), UsePathStyle: true, HTTPClient: d.srv.Client(), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(writerKey, "not-the-secret", "")})
	_, err := forged.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("slow")})
	wantStatus(t, err, http.StatusForbidden)

	before := d.s3.Count()
	_, err = w.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("slow")})
	resp := wantAPIError(t, err, http.StatusServiceUnavailable, "SlowDown")
	if resp.Header.Get("Retry-After") == "" {
		t.Errorf("SlowDown without Retry-After")
	}
	if n := d.s3.Count() - before; n != 0 {
		t.Errorf("the refused request made %d S3 requests; want none", n)
	}
	if _, err := d.put(t, d.client(logsKey), "logs/fine", 1, "x"); err != nil {
		t.Errorf("another identity's PutObject: %v; want it through", err)
	}
	open()
	wg.Wait()
	for i, err := range errs {
		if err != nil && !strings.Contains(err.Error(), "StaleFenceToken") {
			t.Errorf("slow PUT %d: %v", i, err)
		}
	}
	// Their slots are given back.
	if _, err := d.put(t, w, "after", 1, "x"); err != nil {
		t.Errorf("PutObject after the slow ones ended: %v", err)
	}
}

// gatedBody is a request body that sends nothing until gate is closed.
type gatedBody struct {
	gate <-chan struct{}
	data []byte
}

func (b *gatedBody) Read(p []byte) (int, error) {
	<-b.gate
	if len(b.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

// waitFor polls cond until it holds, failing after 10 s (a bound on a
// hang, not a measurement).
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("waited 10 s for %s", what)
		}
	}
}

// inFlight reads fencegate_requests_in_flight.
func (d *door) inFlight(tb testing.TB) float64 {
	tb.Helper()
	families, err := d.gw.Registry().Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "fencegate_requests_in_flight" {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return 0
}
