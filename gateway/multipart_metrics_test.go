package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/internal/testenv"
)

// Multipart series the tests look at.
var (
	uploadsCreated   = &series{"fencegate_multipart_uploads_created_total", nil}
	uploadsCompleted = &series{"fencegate_multipart_uploads_completed_total", nil}
	abortedByClient  = &series{"fencegate_multipart_uploads_aborted_total", map[string]string{"reason": "client"}}
	abortedStale     = &series{"fencegate_multipart_uploads_aborted_total", map[string]string{"reason": "stale"}}
	abortedFailed    = &series{"fencegate_multipart_uploads_aborted_total", map[string]string{"reason": "failed"}}
	partsStale       = &series{"fencegate_multipart_parts_refused_stale_total", nil}
)

// multipartSeries are every multipart series, to check that only the
// expected ones move.
var multipartSeries = []*series{uploadsCreated, uploadsCompleted, abortedByClient, abortedStale, abortedFailed, partsStale}

// multipartMoved scrapes e's metrics and reports how much each of the multipart
// series moved since before (nil: since zero).
func (e *env) multipartMoved(tb testing.TB, before map[*series]float64) map[*series]float64 {
	tb.Helper()
	families := e.scrape(tb)
	now := make(map[*series]float64, len(multipartSeries))
	for _, s := range multipartSeries {
		now[s] = sample(families, s.name, s.labels) - before[s]
	}
	return now
}

// wantMoved fails unless exactly the series in want moved, by want's
// amounts, since before.
func (e *env) wantMoved(tb testing.TB, what string, before map[*series]float64, want map[*series]float64) map[*series]float64 {
	tb.Helper()
	moved := e.multipartMoved(tb, before)
	for _, s := range multipartSeries {
		if moved[s] != want[s] {
			tb.Errorf("%s: %s moved by %v; want %v", what, s, moved[s], want[s])
		}
	}
	return e.multipartMoved(tb, nil)
}

// TestMultipartMetrics: /metrics counts the multipart uploads created,
// completed and aborted (by reason) and the parts refused as stale, each
// once, against a real etcd and S3 server.
func TestMultipartMetrics(t *testing.T) {
	e, gw := newMultipartEnv(t, smallParts)
	ctx := context.Background()
	p := api.ObjectPath{Bucket: e.bucket, Key: "doc"}
	part := bytes.Repeat([]byte("a"), api.MinPartSize)
	before := e.wantMoved(t, "at start", nil, nil)

	// A REST PUT over the threshold: one upload created and completed.
	const n = 9 << 20
	if r := e.putStream(t, "doc", 7, generated(n, 1), n); r.status != http.StatusCreated {
		t.Fatalf("PUT of 9 MiB = %s; want 201", r)
	}
	before = e.wantMoved(t, "PUT in parts", before, map[*series]float64{uploadsCreated: 1, uploadsCompleted: 1})

	// Below the threshold: one PUT, no upload.
	if r := e.put(t, "doc", 7, "small"); r.status != http.StatusOK {
		t.Fatalf("small PUT = %s; want 200", r)
	}
	before = e.wantMoved(t, "small PUT", before, nil)

	// A part of an upload whose token another writer passed: refused,
	// and the upload aborted as stale.
	b, err := gw.Engine().CreateUpload(ctx, p, 8, "", api.ObjectMetadata{})
	if err != nil {
		t.Fatal(err)
	}
	if r := e.put(t, "doc", 9, "bytes of 9"); r.status != http.StatusOK {
		t.Fatalf("PUT(9) = %s", r)
	}
	if _, err := gw.Engine().UploadPart(ctx, api.UploadPartInput{Path: p, UploadID: b.Capability(), Number: 1, Body: bytes.NewReader(part), Size: int64(len(part))}, 0); !errors.Is(err, api.ErrStaleToken) {
		t.Fatalf("UploadPart of a stale upload = %v; want stale", err)
	}
	before = e.wantMoved(t, "stale part", before, map[*series]float64{uploadsCreated: 1, partsStale: 1, abortedStale: 1})

	// A client's abort.
	b, err = gw.Engine().CreateUpload(ctx, p, 9, "", api.ObjectMetadata{})
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Engine().AbortUpload(ctx, p, b.Capability(), 0); err != nil {
		t.Fatalf("AbortUpload = %v", err)
	}
	before = e.wantMoved(t, "client abort", before, map[*series]float64{uploadsCreated: 1, abortedByClient: 1})
	if left := e.uploadsLeft(t); len(left) != 0 {
		t.Fatalf("uploads left: %v; want every upload aborted or completed", left)
	}

	// A REST PUT in parts whose client leaves mid-body: aborted as
	// failed, once the handler has seen the body end.
	req, err := http.NewRequest(http.MethodPut, e.objectURL("doc"), io.MultiReader(generated(6<<20, 2), errorReader{}))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = n
	req.Header.Set(api.HeaderFenceToken, "9")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("PUT with a body cut short = %s; want the client's error", resp.Status)
	}
	testenv.WaitUntil(t, 30*time.Second, "the cut upload is counted as aborted", func() bool {
		return e.multipartMoved(t, before)[abortedFailed] != 0
	})
	// (Whether S3 still lists that upload is not checked: the abort
	// can reach the S3 server while it is still taking in the cut part.)
	e.wantMoved(t, "body cut short", before, map[*series]float64{uploadsCreated: 1, abortedFailed: 1})
}

// errorReader fails every read: a client whose body ends in an error.
type errorReader struct{}

func (errorReader) Read([]byte) (int, error) { return 0, fmt.Errorf("the client gave up") }
