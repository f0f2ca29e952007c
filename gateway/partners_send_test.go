package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"fencegate/internal/testenv"
)

// droppingPartner is a partner API that answers every request but those to
// paths ending in /drop: it reads those whole, counts them, and closes the
// connection without an answer, as a partner that acted on a request and
// then lost its connection would. It records which connection (the
// client's address) carried each request.
type droppingPartner struct {
	*httptest.Server

	mu       sync.Mutex
	answered map[string]bool     // connections that carried an answered request
	dropped  map[string][]string // path -> the connection of each copy that arrived
}

func newDroppingPartner(tb testing.TB) *droppingPartner {
	tb.Helper()
	p := &droppingPartner{answered: map[string]bool{}, dropped: map[string][]string{}}
	p.Server = httptest.NewServer(p)
	tb.Cleanup(p.Close)
	return p
}

func (p *droppingPartner) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if !strings.HasSuffix(r.URL.Path, "/drop") {
		p.mu.Lock()
		p.answered[r.RemoteAddr] = true
		p.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		return
	}
	p.mu.Lock()
	p.dropped[r.URL.Path] = append(p.dropped[r.URL.Path], r.RemoteAddr)
	p.mu.Unlock()
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

// copies returns the connections that carried each copy of path's
// requests, and whether the first of them had carried an answered request
// before (so the gateway's transport reused it).
func (p *droppingPartner) copies(path string) (conns []string, firstReused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	conns = append([]string(nil), p.dropped[path]...)
	return conns, len(conns) > 0 && p.answered[conns[0]]
}

// TestPartnerSendsAdmittedRequestOnce: one admission, at most one send.
// The partner reads the admitted request and drops the connection without
// answering. On a reused keep-alive connection, net/http's transport would
// send a request it deems replayable (GET, or any method with an
// Idempotency-Key header) again on a new connection; the partner must
// still see one copy, and the client gets the gateway's 502, stored under
// its key (the outcome is unknown), so that a retry is replayed and not
// forwarded.
func TestPartnerSendsAdmittedRequestOnce(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newDroppingPartner(t)
	gw := startPartnerGateway(t, etcd, time.Second, payRoute(t, partner.URL))
	for _, tc := range []struct {
		name   string
		method string
		key    string
		body   string
	}{
		{"POST with Idempotency-Key", http.MethodPost, "k-drop", `{"amount":500}`},
		{"POST with Idempotency-Key and no body", http.MethodPost, "k-drop-empty", ""},
		{"GET", http.MethodGet, "", ""},
		{"GET with Idempotency-Key", http.MethodGet, "k-drop-get", ""},
		{"PUT", http.MethodPut, "", "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The retry needs a reused connection: warm one up with an
			// answered request first. Whether the transport takes it from
			// its pool is up to the transport, so try a few times.
			for attempt := 1; ; attempt++ {
				account := fmt.Sprintf("%s-%d", strings.ReplaceAll(strings.ToLower(tc.name), " ", "-"), attempt)
				warm := partnerDo(t, gw, partnerReq{method: http.MethodGet, path: "pay/accounts/" + account + "/ok", token: 1})
				if warm.status != http.StatusOK {
					t.Fatalf("warm-up = %s; want 200", warm)
				}
				key := ""
				if tc.key != "" {
					key = fmt.Sprintf("%s-%d", tc.key, attempt)
				}
				req := partnerReq{method: tc.method, path: "pay/accounts/" + account + "/drop", token: 1, key: key, body: tc.body}
				r := partnerDo(t, gw, req)
				conns, reused := partner.copies("/base/accounts/" + account + "/drop")
				if !reused && attempt < 10 {
					continue // a fresh connection: the transport never re-sends there
				}
				if !reused {
					t.Fatalf("the request never went on a reused connection in %d attempts", attempt)
				}
				if len(conns) != 1 {
					t.Fatalf("partner got %d copies of one admitted request (connections %v); want 1", len(conns), conns)
				}
				wantProblem(t, r, http.StatusBadGateway, "upstream-error")
				if key != "" {
					again := partnerDo(t, gw, req)
					wantProblem(t, again, http.StatusBadGateway, "upstream-error")
					if !replayed(again) {
						t.Fatalf("retry = %s; want the stored 502 replayed (the partner may have acted)", again)
					}
					if conns, _ := partner.copies("/base/accounts/" + account + "/drop"); len(conns) != 1 {
						t.Fatalf("after the retry the partner got %d copies; want 1", len(conns))
					}
				}
				return
			}
		})
	}
}

// TestPartnerRequestFraming: the body that keeps forwarded requests from
// being re-sent (see TestPartnerSendsAdmittedRequestOnce) leaves GET and
// DELETE without a body as they were, and gives a body its exact length.
func TestPartnerRequestFraming(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	type framing struct {
		length  int64
		chunked bool
		body    string
	}
	var mu sync.Mutex
	got := map[string]framing{}
	partner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[r.Method] = framing{length: r.ContentLength, chunked: len(r.TransferEncoding) > 0, body: string(body)}
		mu.Unlock()
	}))
	t.Cleanup(partner.Close)
	route := payRoute(t, partner.URL)
	route.Methods = append(route.Methods, http.MethodPatch)
	gw := startPartnerGateway(t, etcd, time.Second, route)
	for i, tc := range []struct {
		method, body string
		want         framing
	}{
		{http.MethodGet, "", framing{}},
		{http.MethodDelete, "", framing{}},
		{http.MethodPost, `{"amount":500}`, framing{length: 14, body: `{"amount":500}`}},
		{http.MethodPut, "x", framing{length: 1, body: "x"}},
		// The price: an empty PATCH (or POST, PUT) goes chunked.
		{http.MethodPatch, "", framing{length: -1, chunked: true}},
	} {
		r := partnerDo(t, gw, partnerReq{method: tc.method, path: fmt.Sprintf("pay/accounts/f%d/x", i), token: 1, key: fmt.Sprintf("k-frame-%d", i), body: tc.body})
		if r.status != http.StatusOK {
			t.Fatalf("%s = %s; want 200", tc.method, r)
		}
		mu.Lock()
		f := got[tc.method]
		mu.Unlock()
		if f != tc.want {
			t.Errorf("%s arrived with length %d, chunked %v, body %q; want length %d, chunked %v, body %q", tc.method, f.length, f.chunked, f.body, tc.want.length, tc.want.chunked, tc.want.body)
		}
	}
}
