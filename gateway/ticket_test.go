package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"fencegate/api"
	"fencegate/backends/s3"
	"fencegate/events"
	"fencegate/fence"
	"fencegate/gateway"
	"fencegate/tokenstore"
)

// Tickets (POST /v1/tickets) against real etcd and versitygw: the gateway
// fences, the client sends the bytes to the store itself, and what landed
// is read back with minio-go, never with the client that wrote it.

// ticket asks e's gateway for a ticket to write key with token, with the
// JSON body given.
func (e *env) ticket(tb testing.TB, key string, token api.Token, body string) result {
	tb.Helper()
	var tokens []string
	if token != 0 {
		tokens = []string{token.String()}
	}
	return do(tb, http.MethodPost, e.url+"/v1/tickets/"+e.bucket+"/"+key, tokens, []byte(body))
}

// issued asks for a ticket that must be issued (201), and returns it.
func (e *env) issued(tb testing.TB, key string, token api.Token, body string) fence.IssuedTicket {
	tb.Helper()
	r := e.ticket(tb, key, token, body)
	if r.status != http.StatusCreated {
		tb.Fatalf("POST ticket %s with token %d = %s; want 201", key, token, r)
	}
	var t fence.IssuedTicket
	if err := json.Unmarshal(r.body, &t); err != nil {
		tb.Fatalf("ticket %q: %v", r.body, err)
	}
	return t
}

// useTicket sends body on t as a client does, straight to the store,
// after change (nil: none) had its way with the request, and returns the
// store's status.
func useTicket(tb testing.TB, t api.Ticket, body string, change func(*http.Request)) int {
	tb.Helper()
	req := ticketRequest(tb, t, []byte(body))
	if change != nil {
		change(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s on ticket: %v", t.Method, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// newTicketEnv is newEnv with object k written with token 4 when
// existing, so that a ticket's condition is If-Match rather than
// If-None-Match: *.
func newTicketEnv(tb testing.TB, existing bool) *env {
	tb.Helper()
	e := newEnv(tb, gateway.Config{})
	if existing {
		if r := e.put(tb, "k", 4, "old"); r.status != http.StatusCreated {
			tb.Fatalf("PUT = %s", r)
		}
	}
	return e
}

// ticketRequest is the request that t says to send, with body.
func ticketRequest(tb testing.TB, t api.Ticket, body []byte) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(t.Method, t.URL, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	for name, value := range t.Headers {
		if name != "Content-Length" { // net/http sends the body's
			req.Header.Set(name, value)
		}
	}
	return req
}

// wantStored fails unless the store holds body with token at key.
func (e *env) wantStored(tb testing.TB, key, body string, token api.Token) {
	tb.Helper()
	got, gotToken, ok := e.stored(tb, key)
	if !ok || got != body || gotToken != token.String() {
		tb.Fatalf("stored %s = %q, token %q, %v; want %q, token %d", key, got, gotToken, ok, body, token)
	}
}

// TestTicketFreshWritesWithToken: a fresh ticket lands, the object
// records the ticket's token, content type and metadata; the event feed's
// history has ticket.issued and no write.accepted for it.
func TestTicketFreshWritesWithToken(t *testing.T) {
	for _, existing := range []bool{false, true} {
		t.Run(fmt.Sprintf("existing=%v", existing), func(t *testing.T) {
			e := newTicketEnv(t, existing)
			tk := e.issued(t, "k", 5, `{"size":5,"content_type":"text/csv","metadata":{"owner":"team-a"}}`)
			if tk.Token != 5 || (tk.ReplacesETag != "") != existing {
				t.Fatalf("ticket = %+v; want token 5, replaces_etag set %v", tk, existing)
			}
			if status := useTicket(t, tk.Ticket, "hello", nil); status != http.StatusOK {
				t.Fatalf("PUT on a fresh ticket = %d; want 200", status)
			}
			e.wantStored(t, "k", "hello", 5)
			info, err := e.minio.StatObject(context.Background(), e.bucket, "k", minio.StatObjectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if info.ContentType != "text/csv" || info.UserMetadata["Owner"] != "team-a" {
				t.Errorf("stored content type %q, metadata %v; want text/csv, owner team-a", info.ContentType, info.UserMetadata)
			}
			if mark := e.mark(t, "k"); mark != 5 {
				t.Errorf("mark after the ticket = %d; want 5 (the fence check raised it)", mark)
			}
		})
	}
}

// mark reads key's high-water mark through the gateway.
func (e *env) mark(tb testing.TB, key string) api.Token {
	tb.Helper()
	r := do(tb, http.MethodGet, e.url+"/v1/fences/s3/"+e.bucket+"/"+key, nil, nil)
	var f struct {
		HighWaterMark api.Token `json:"high_water_mark"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &f) != nil {
		tb.Fatalf("GET fence = %s", r)
	}
	return f.HighWaterMark
}

// TestTicketRefusedAsPut: every refusal of a PUT is a ticket's, and
// nothing is issued: a stale token (409, whether the cache, the object or
// etcd catches it), no token (428), a body that is not the ticket's JSON
// (400), a size over the limit (413), a GCS bucket (501).
func TestTicketRefusedAsPut(t *testing.T) {
	e := newEnv(t, gateway.Config{BufferBytes: 4, MaxBodyBytes: 10})
	if r := e.put(t, "k", 7, "seven"); r.status != http.StatusCreated {
		t.Fatalf("PUT = %s", r)
	}
	e2 := newEnvSharing(t, e) // knows no mark: etcd or the object refuses
	tests := []struct {
		name   string
		env    *env
		token  api.Token
		body   string
		status int
		slug   string
	}{
		{"stale, cached mark", e, 5, `{"size":5}`, 409, "stale-token"},
		{"stale, not cached", e2, 6, `{"size":5}`, 409, "stale-token"},
		{"no token", e, 0, `{"size":5}`, 428, "missing-token"},
		{"no size", e, 8, `{"content_type":"text/csv"}`, 400, "invalid-request"},
		{"unknown member", e, 8, `{"size":5,"sise":5}`, 400, "invalid-request"},
		{"not JSON", e, 8, `size=5`, 400, "invalid-request"},
		{"empty object", e, 8, `{"size":0}`, 400, "invalid-request"},
		{"metadata name", e, 8, `{"size":5,"metadata":{"Owner":"a"}}`, 400, "invalid-request"},
		{"fence-token metadata", e, 8, `{"size":5,"metadata":{"fence-token":"9"}}`, 400, "invalid-request"},
		{"over the limit", e, 8, `{"size":11}`, 413, "body-too-large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantProblem(t, tt.env.ticket(t, "k", tt.token, tt.body), tt.status, tt.slug)
			e.wantStored(t, "k", "seven", 7)
			if mark := e.mark(t, "k"); mark != 7 {
				t.Errorf("mark after a refused ticket = %d; want 7, raised by nothing refused", mark)
			}
		})
	}
	t.Run("gcs bucket", func(t *testing.T) {
		g := newEnvOn(t, api.StoreGCS, gateway.Config{})
		g.resetStoreCounts()
		wantProblem(t, g.ticket(t, "k", 5, `{"size":5}`), 501, "not-implemented")
		if n := g.storeRequests(); n != 0 {
			t.Errorf("a GCS ticket sent %d requests to the stores; want none", n)
		}
		r := do(t, http.MethodGet, g.url+"/v1/fences/gcs/"+g.bucket+"/k", nil, nil)
		if !bytes.Contains(r.body, []byte(`"high_water_mark":0`)) {
			t.Errorf("mark after a GCS ticket = %s; want none raised", r)
		}
	})
}

// TestTicketAfterNewerWriteRefused: a writer that pauses between its
// ticket and its upload, while a newer holder writes through the gateway,
// is refused by the store (412), and the newer bytes stay.
func TestTicketAfterNewerWriteRefused(t *testing.T) {
	for _, existing := range []bool{false, true} {
		t.Run(fmt.Sprintf("existing=%v", existing), func(t *testing.T) {
			e := newTicketEnv(t, existing)
			tk := e.issued(t, "k", 5, `{"size":5}`)
			if r := e.put(t, "k", 6, "newer"); r.status/100 != 2 {
				t.Fatalf("newer holder's PUT = %s", r)
			}
			if status := useTicket(t, tk.Ticket, "stale", nil); status != http.StatusPreconditionFailed {
				t.Fatalf("PUT on a ticket after a newer write = %d; want 412", status)
			}
			e.wantStored(t, "k", "newer", 6)
		})
	}
}

// TestTicketExpiredRefused: the store refuses a ticket past its expiry
// (403), and nothing is stored.
func TestTicketExpiredRefused(t *testing.T) {
	e := newEnv(t, gateway.Config{TicketExpiry: time.Second})
	tk := e.issued(t, "k", 5, `{"size":5}`)
	if d := time.Until(tk.ExpiresAt); d > 2*time.Second {
		t.Fatalf("ticket expires in %v; want at most the 1s configured", d)
	}
	time.Sleep(time.Until(tk.ExpiresAt) + 1500*time.Millisecond)
	if status := useTicket(t, tk.Ticket, "late!", nil); status != http.StatusForbidden {
		t.Fatalf("PUT on an expired ticket = %d; want 403", status)
	}
	if _, _, ok := e.stored(t, "k"); ok {
		t.Fatal("an expired ticket stored the object")
	}
}

// TestTicketUsedTwiceRefused: a ticket's second use, after its first
// changed the object, is refused (412), and the first use's bytes stay.
func TestTicketUsedTwiceRefused(t *testing.T) {
	for _, existing := range []bool{false, true} {
		t.Run(fmt.Sprintf("existing=%v", existing), func(t *testing.T) {
			e := newTicketEnv(t, existing)
			tk := e.issued(t, "k", 5, `{"size":5}`)
			if status := useTicket(t, tk.Ticket, "first", nil); status != http.StatusOK {
				t.Fatalf("first use = %d; want 200", status)
			}
			if status := useTicket(t, tk.Ticket, "again", nil); status != http.StatusPreconditionFailed {
				t.Fatalf("second use = %d; want 412", status)
			}
			e.wantStored(t, "k", "first", 5)
		})
	}
}

// TestTicketChangedRequestRefused: a client that changes or adds a
// header of its ticket is refused by the store, and nothing is stored.
func TestTicketChangedRequestRefused(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	tests := []struct {
		name   string
		change func(*http.Request)
	}{
		{"token raised", func(r *http.Request) { r.Header.Set("X-Amz-Meta-Fence-Token", "99") }},
		{"content type", func(r *http.Request) { r.Header.Set("Content-Type", "text/html") }},
		{"metadata", func(r *http.Request) { r.Header.Set("X-Amz-Meta-Owner", "mallory") }},
		{"condition dropped", func(r *http.Request) { r.Header.Del("If-None-Match") }},
		{"condition changed", func(r *http.Request) { r.Header.Del("If-None-Match"); r.Header.Set("If-Match", `"abc"`) }},
		{"metadata added", func(r *http.Request) { r.Header.Set("X-Amz-Meta-Extra", "1") }},
		{"acl added", func(r *http.Request) { r.Header.Set("X-Amz-Acl", "public-read") }},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("k%d", i)
			tk := e.issued(t, key, 5, `{"size":5,"content_type":"text/csv","metadata":{"owner":"team-a"}}`)
			if status := useTicket(t, tk.Ticket, "bytes", tt.change); status != http.StatusForbidden {
				t.Fatalf("PUT on a changed ticket = %d; want 403", status)
			}
			if _, _, ok := e.stored(t, key); ok {
				t.Fatal("a changed ticket stored the object")
			}
		})
	}
}

// TestTicketWriteNotHiddenByETagCache: a gateway write after a ticket's
// write is not fooled by the ETag cache, which knew the version the
// gateway wrote before the ticket: with one write attempt, a write that
// took its observation from that entry would lose to the ticket's
// version (409 concurrent-modification) instead of replacing it.
func TestTicketWriteNotHiddenByETagCache(t *testing.T) {
	e := newEnv(t, gateway.Config{WriteAttempts: 1})
	if r := e.put(t, "k", 4, "gateway"); r.status != http.StatusCreated {
		t.Fatalf("PUT = %s", r)
	}
	tk := e.issued(t, "k", 5, `{"size":6}`)
	if status := useTicket(t, tk.Ticket, "ticket", nil); status != http.StatusOK {
		t.Fatalf("PUT on the ticket = %d; want 200", status)
	}
	r := e.put(t, "k", 5, "after")
	if r.status != http.StatusOK {
		t.Fatalf("gateway PUT after the ticket's write = %s; want 200", r)
	}
	e.wantStored(t, "k", "after", 5)
}

// partsOf uploads body in the parts of tk, each on its ticket, and returns
// the parts to complete.
func partsOf(tb testing.TB, tk fence.IssuedTicket, body []byte, partSize int) []api.Part {
	tb.Helper()
	var parts []api.Part
	for i, pt := range tk.Parts {
		chunk := body[i*partSize : min((i+1)*partSize, len(body))]
		resp, err := http.DefaultClient.Do(ticketRequest(tb, pt, chunk))
		if err != nil {
			tb.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			tb.Fatalf("part %d on its ticket = %d; want 200", i+1, resp.StatusCode)
		}
		parts = append(parts, api.Part{Number: int32(i + 1), ETag: resp.Header.Get("ETag")})
	}
	return parts
}

// TestTicketMultipart: a multipart ticket's parts go to the store, and
// its upload completes through the engine's fenced completion with the
// ticket's token; once a newer holder wrote, the completion is refused
// (409) and the newer bytes stay.
func TestTicketMultipart(t *testing.T) {
	const partSize = api.MinPartSize
	body := bytes.Repeat([]byte("0123456789abcdef"), (partSize+1024)/16)
	for _, stale := range []bool{false, true} {
		t.Run(fmt.Sprintf("stale=%v", stale), func(t *testing.T) {
			e, gw := newMultipartEnv(t, gateway.Config{})
			tk := e.issued(t, "big", 5, fmt.Sprintf(`{"size":%d,"part_size":%d}`, len(body), partSize))
			if len(tk.Parts) != 2 || tk.UploadID == "" || tk.URL != "" {
				t.Fatalf("multipart ticket = %d parts, upload %q, url %q; want 2 parts, an upload, no url", len(tk.Parts), tk.UploadID, tk.URL)
			}
			if stale {
				if r := e.put(t, "big", 6, "newer"); r.status/100 != 2 {
					t.Fatalf("newer holder's PUT = %s", r)
				}
			}
			parts := partsOf(t, tk, body, partSize)
			path := api.ObjectPath{Store: api.StoreS3, Bucket: e.bucket, Key: "big"}
			res, err := gw.Engine().CompleteUpload(context.Background(), path, tk.UploadID, 0, parts)
			if stale {
				if !errors.Is(err, api.ErrStaleToken) {
					t.Fatalf("completion after a newer write = %+v, %v; want a stale token", res, err)
				}
				e.wantStored(t, "big", "newer", 6)
				return
			}
			if err != nil || res.Token != 5 {
				t.Fatalf("completion = %+v, %v; want token 5", res, err)
			}
			e.wantStored(t, "big", string(body), 5)
		})
	}
}

// TestTicketEvents: the event feed has ticket.issued, with the mark the
// fence check raised and status 201, and nothing pretending that the
// ticket's write happened: the next decision is the gateway's own write.
// A stale ticket is a write.refused, as a stale PUT is.
func TestTicketEvents(t *testing.T) {
	e := newEventsEnv(t, gateway.Config{}, nil, func(string, *tokenstore.Store) gateway.Option {
		signer, err := s3.New(context.Background(), s3.Config{Endpoint: sharedS3.Endpoint(), AccessKeyID: sharedS3.AccessKey,
			SecretAccessKey: sharedS3.SecretKey, UsePathStyle: true})
		if err != nil {
			t.Fatal(err)
		}
		return gateway.WithTickets(signer)
	})
	prefix := "s3/" + e.bucket + "/"
	s := subscribe(t, nil, e.url, prefix, "").read()
	tk := e.issued(t, "k", 5, `{"size":5}`)
	d := s.nextDecision(t, events.KindTicketIssued)
	wantFields(t, d, map[string]any{"resource": prefix + "k", "token": "5", "hwm": "5", "status": 201.0}, "etag", "problem")
	if status := useTicket(t, tk.Ticket, "five!", nil); status != http.StatusOK {
		t.Fatalf("PUT on the ticket = %d; want 200", status)
	}
	if r := e.put(t, "k", 6, "six"); r.status != http.StatusOK {
		t.Fatalf("PUT 6 = %s", r)
	}
	wantFields(t, s.nextDecision(t, events.KindWriteAccepted), map[string]any{"token": "6", "status": 200.0})
	wantProblem(t, e.ticket(t, "k", 5, `{"size":5}`), http.StatusConflict, "stale-token")
	wantFields(t, s.nextDecision(t, events.KindWriteRefused), map[string]any{"resource": prefix + "k", "token": "5", "hwm": "6", "problem": "stale-token", "status": 409.0})
}

// TestTicketPausedPastANewerFenceCheck: a ticket's writer that pauses
// past a newer holder's fence check, with no write of the newer holder's
// yet, still lands (the case of a gateway writer paused between its
// fence check and its write, linearizable before the newer write); the
// newer holder's write, conditional on the version it observed, then
// loses to it and retries from a fresh observation, and its bytes are
// the object's in the end. A newer holder's ticket issued meanwhile is
// refused by the store once the older one has landed.
func TestTicketPausedPastANewerFenceCheck(t *testing.T) {
	var (
		older api.Ticket
		used  atomic.Int64
	)
	hooks := &gateway.TestHooks{AfterFenceCheck: func(_ context.Context, _ api.Resource, token api.Token) {
		if token == 7 && used.Add(1) == 1 {
			if status := useTicket(t, older, "older", nil); status != http.StatusOK {
				t.Errorf("the older ticket after a newer fence check = %d; want 200", status)
			}
		}
	}}
	e := newEnv(t, gateway.Config{TestHooks: hooks})
	older = e.issued(t, "k", 5, `{"size":5}`).Ticket
	newer := e.issued(t, "k", 6, `{"size":5}`)
	if r := e.put(t, "k", 7, "newest"); r.status/100 != 2 {
		t.Fatalf("PUT 7 whose fence check the older ticket's write followed = %s; want it to land after a retry", r)
	}
	if used.Load() < 2 {
		t.Fatalf("the newest PUT checked its fence %d times; want a retry after losing to the older ticket's write", used.Load())
	}
	e.wantStored(t, "k", "newest", 7)
	if status := useTicket(t, newer.Ticket, "newer", nil); status != http.StatusPreconditionFailed {
		t.Fatalf("ticket 6 after the object changed = %d; want 412", status)
	}
	e.wantStored(t, "k", "newest", 7)
}
