package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"fencegate/api"
	"fencegate/api/client"
)

// hookTransport runs before on each request that is sent on a ticket
// (its URL has a signature), then sends it; it counts the gateway's object
// PUTs and ticket requests.
type hookTransport struct {
	before            func(n int64)
	onTicket, tickets atomic.Int64
	gatewayPuts       atomic.Int64
}

func (h *hookTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	switch {
	case strings.Contains(r.URL.RawQuery, "X-Amz-Signature"):
		if n := h.onTicket.Add(1); h.before != nil {
			h.before(n)
		}
	case strings.HasPrefix(r.URL.Path, "/v1/tickets/"):
		h.tickets.Add(1)
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/objects/"):
		h.gatewayPuts.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestPutObjectOnTicket: above the threshold PutObject sends the bytes to
// the store on a ticket (no PUT through the gateway), below it through
// the gateway; a store that refuses a ticket's write because the object
// changed (412) is asked again on a new ticket, which lands, or, when a
// newer holder wrote, is refused as stale.
func TestPutObjectOnTicket(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	h := &hookTransport{}
	c := &client.Client{BaseURL: e.url, HTTPClient: &http.Client{Transport: h}, TicketThreshold: 8}

	res, err := c.PutObject(ctx, e.bucket, "big", 5, strings.NewReader("over the threshold"))
	if err != nil || res.Token != 5 || !res.Created || res.ETag == "" {
		t.Fatalf("PutObject above the threshold = %+v, %v; want token 5, created, an ETag", res, err)
	}
	if h.onTicket.Load() != 1 || h.gatewayPuts.Load() != 0 {
		t.Fatalf("%d writes on tickets, %d through the gateway; want 1, 0", h.onTicket.Load(), h.gatewayPuts.Load())
	}
	if body, token, _ := e.stored(t, "big"); body != "over the threshold" || token != "5" {
		t.Fatalf("stored %q with token %q; want the body with token 5", body, token)
	}

	if _, err := c.PutObject(ctx, e.bucket, "small", 5, strings.NewReader("small")); err != nil || h.gatewayPuts.Load() != 1 {
		t.Fatalf("PutObject below the threshold = %v, %d PUTs through the gateway; want nil, 1", err, h.gatewayPuts.Load())
	}

	// Another write of the same holder lands between the first ticket and
	// its write: the store answers 412, and a new ticket writes.
	gw := &client.Client{BaseURL: e.url}
	h.onTicket.Store(0)
	h.tickets.Store(0)
	h.before = func(n int64) {
		if n == 1 {
			if _, err := gw.PutObject(ctx, e.bucket, "big", 5, strings.NewReader("between")); err != nil {
				t.Errorf("PUT between ticket and write: %v", err)
			}
		}
	}
	res, err = c.PutObject(ctx, e.bucket, "big", 5, strings.NewReader("after a lost race"))
	if err != nil || res.Created || h.tickets.Load() != 2 {
		t.Fatalf("PutObject after a 412 = %+v, %v with %d tickets; want a replacing write on the second ticket", res, err, h.tickets.Load())
	}
	if body, token, _ := e.stored(t, "big"); body != "after a lost race" || token != "5" {
		t.Fatalf("stored %q with token %q; want the retried body with token 5", body, token)
	}

	// A newer holder writes between: the new ticket is refused as stale,
	// and the newer bytes stay.
	h.onTicket.Store(0)
	h.before = func(n int64) {
		if n == 1 {
			if _, err := gw.PutObject(ctx, e.bucket, "big", 6, strings.NewReader("newer")); err != nil {
				t.Errorf("newer PUT: %v", err)
			}
		}
	}
	if _, err := c.PutObject(ctx, e.bucket, "big", 5, strings.NewReader("stale holder's bytes")); !errors.Is(err, api.ErrStaleToken) {
		t.Fatalf("PutObject after a newer write = %v; want a stale token", err)
	}
	if body, token, _ := e.stored(t, "big"); body != "newer" || token != "6" {
		t.Fatalf("stored %q with token %q; want the newer bytes with token 6", body, token)
	}
}
