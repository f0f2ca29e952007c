package client_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"fencegate/api"
	"fencegate/api/client"
	"fencegate/gateway"
)

// partBody is two parts of api.MinPartSize, the second small.
var partBody = bytes.Repeat([]byte("0123456789abcdef"), (api.MinPartSize+4096)/16)

// uploadsLeft lists the bucket's multipart uploads with minio-go.
func (e *env) uploadsLeft(tb testing.TB) int {
	tb.Helper()
	n := 0
	for u := range e.minio.ListIncompleteUploads(context.Background(), e.bucket, "", true) {
		if u.Err != nil {
			tb.Fatal(u.Err)
		}
		n++
	}
	return n
}

// TestMultipartTicketCompleted: a multipart ticket's parts go straight to
// the store on their tickets, CompleteUpload makes them the object with
// the ticket's token, and PutObjectOnTicket does all of it for a body
// above Client.TicketPartSize, with no part through the gateway.
func TestMultipartTicketCompleted(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	c := &client.Client{BaseURL: e.url}

	tk, err := c.MultipartTicket(ctx, e.bucket, "big", 5, int64(len(partBody)), api.MinPartSize)
	if err != nil || len(tk.Parts) != 2 || tk.UploadID == "" || tk.Token != 5 {
		t.Fatalf("MultipartTicket = %+v, %v; want 2 parts, an upload, token 5", tk, err)
	}
	var parts []api.CompletedPart
	for i, pt := range tk.Parts {
		chunk := partBody[i*api.MinPartSize : min((i+1)*api.MinPartSize, len(partBody))]
		req, err := http.NewRequestWithContext(ctx, pt.Method, pt.URL, bytes.NewReader(chunk))
		if err != nil {
			t.Fatal(err)
		}
		for name, value := range pt.Headers {
			if name != "Content-Length" {
				req.Header.Set(name, value)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("part %d on its ticket = %v, %v; want 200", i+1, resp, err)
		}
		resp.Body.Close()
		parts = append(parts, api.CompletedPart{Number: int32(i + 1), ETag: resp.Header.Get("ETag")})
	}
	res, err := c.CompleteUpload(ctx, e.bucket, "big", 5, tk.UploadID, parts)
	if err != nil || res.Token != 5 || !res.Created || res.ETag == "" {
		t.Fatalf("CompleteUpload = %+v, %v; want token 5, created, an ETag", res, err)
	}
	if body, token, _ := e.stored(t, "big"); body != string(partBody) || token != "5" {
		t.Fatalf("stored %d bytes with token %q; want the %d bytes with token 5", len(body), token, len(partBody))
	}

	h := &hookTransport{}
	c = &client.Client{BaseURL: e.url, HTTPClient: &http.Client{Transport: h}, TicketPartSize: api.MinPartSize}
	res, err = c.PutObjectOnTicket(ctx, e.bucket, "big", 6, bytes.NewReader(partBody[1:]))
	if err != nil || res.Token != 6 || res.Created {
		t.Fatalf("PutObjectOnTicket in parts = %+v, %v; want token 6, replacing", res, err)
	}
	if h.onTicket.Load() != 2 || h.gatewayPuts.Load() != 0 {
		t.Fatalf("%d requests on tickets, %d PUTs through the gateway; want 2 parts on tickets, none through the gateway", h.onTicket.Load(), h.gatewayPuts.Load())
	}
	if body, token, _ := e.stored(t, "big"); body != string(partBody[1:]) || token != "6" {
		t.Fatalf("stored %d bytes with token %q; want the %d bytes with token 6", len(body), token, len(partBody)-1)
	}
	if n := e.uploadsLeft(t); n != 0 {
		t.Fatalf("%d uploads left; want none", n)
	}
}

// TestMultipartTicketFenced: a newer holder's write between the ticket
// and its completion makes the completion stale and keeps the newer
// bytes, with no upload left; an abort removes the upload, and an id that
// names none is api.ErrNotFound.
func TestMultipartTicketFenced(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	gw := &client.Client{BaseURL: e.url}
	h := &hookTransport{before: func(n int64) {
		if n == 2 { // between the parts: the completion comes after
			if _, err := gw.PutObject(ctx, e.bucket, "big", 6, bytes.NewReader([]byte("newer"))); err != nil {
				t.Errorf("newer PUT: %v", err)
			}
		}
	}}
	c := &client.Client{BaseURL: e.url, HTTPClient: &http.Client{Transport: h}, TicketPartSize: api.MinPartSize}
	if _, err := c.PutObjectOnTicket(ctx, e.bucket, "big", 5, bytes.NewReader(partBody)); !errors.Is(err, api.ErrStaleToken) {
		t.Fatalf("PutObjectOnTicket in parts after a newer write = %v; want a stale token", err)
	}
	if body, token, _ := e.stored(t, "big"); body != "newer" || token != "6" {
		t.Fatalf("stored %q with token %q; want the newer bytes with token 6", body, token)
	}
	if n := e.uploadsLeft(t); n != 0 {
		t.Fatalf("%d uploads left after a stale completion; want none", n)
	}

	tk, err := gw.MultipartTicket(ctx, e.bucket, "other", 7, int64(len(partBody)), api.MinPartSize)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gw.CompleteUpload(ctx, e.bucket, "other", 7, "no-such-upload", []api.CompletedPart{{Number: 1, ETag: `"e"`}}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("CompleteUpload of no upload = %v; want not found", err)
	}
	if err := gw.AbortUpload(ctx, e.bucket, "other", 7, tk.UploadID); err != nil {
		t.Fatalf("AbortUpload = %v", err)
	}
	if n := e.uploadsLeft(t); n != 0 {
		t.Fatalf("%d uploads left after the abort; want none", n)
	}
	if err := gw.AbortUpload(ctx, e.bucket, "other", 7, tk.UploadID); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("AbortUpload again = %v; want not found", err)
	}
	if _, err := e.minio.StatObject(ctx, e.bucket, "other", minio.StatObjectOptions{}); err == nil {
		t.Fatal("an aborted upload's object exists")
	}
}

// TestMultipartTicketAtMostParts: a ticket of api.MaxParts parts, an
// answer of megabytes, is read whole, and its upload aborted.
func TestMultipartTicketAtMostParts(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	c := &client.Client{BaseURL: e.url}
	tk, err := c.MultipartTicket(ctx, e.bucket, "big", 5, api.MaxParts*api.MinPartSize, api.MinPartSize)
	if err != nil || len(tk.Parts) != api.MaxParts {
		t.Fatalf("MultipartTicket of %d parts = %v; want every part", api.MaxParts, err)
	}
	if err := c.AbortUpload(ctx, e.bucket, "big", 5, tk.UploadID); err != nil {
		t.Fatalf("AbortUpload = %v", err)
	}
}

// TestMultipartTicketOutlivesItsExpiry: an upload whose parts take longer
// than a ticket's life in all (a gateway whose tickets live 3 s, a client
// that pauses a second before each part) completes, the client asking
// the gateway for its parts' tickets as it goes; minio-go reads back
// every byte with the token.
func TestMultipartTicketOutlivesItsExpiry(t *testing.T) {
	ctx := context.Background()
	e := newEnvWith(t, gateway.Config{TicketExpiry: 3 * time.Second}, nil)
	body := bytes.Repeat([]byte("0123456789abcdef"), (3*api.MinPartSize+1024)/16) // 4 parts
	h := &hookTransport{before: func(int64) { time.Sleep(time.Second) }}
	c := &client.Client{BaseURL: e.url, HTTPClient: &http.Client{Transport: h}, TicketPartSize: api.MinPartSize}
	start := time.Now()
	res, err := c.PutObjectOnTicket(ctx, e.bucket, "big", 5, bytes.NewReader(body))
	if err != nil || res.Token != 5 || !res.Created {
		t.Fatalf("PutObjectOnTicket of 4 slow parts = %+v, %v; want token 5, created", res, err)
	}
	if took := time.Since(start); took < 4*time.Second {
		t.Fatalf("the upload took %v; want longer than the tickets' 3s life", took)
	}
	if got, token, _ := e.stored(t, "big"); got != string(body) || token != "5" {
		t.Fatalf("stored %d bytes with token %q; want the %d bytes with token 5", len(got), token, len(body))
	}
	if n := h.tickets.Load(); n < 2 {
		t.Fatalf("%d ticket requests; want fresh part tickets asked for as the upload went", n)
	}
	if n := e.uploadsLeft(t); n != 0 {
		t.Fatalf("%d uploads left; want none", n)
	}
}
