package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/partners"
	"fencegate/tokenstore"
)

// partnerServer is a partner API on httptest that records every request
// it gets and measures how many overlap, per resource (the path segment
// after "accounts") and in all. Paths ending in /slow, /fail, /redirect,
// /big and /huge answer differently (see ServeHTTP).
type partnerServer struct {
	*httptest.Server
	delay time.Duration
	// arrived receives the path of each request on arrival (the first
	// 1024 requests).
	arrived chan string

	mu         sync.Mutex
	redirectTo string // where /redirect points; set with redirect
	calls      []partnerCall
	inFlight   map[string]int
	maxPerRes  map[string]int
	total      int
	maxTotal   int
	slowCancel chan struct{}
}

// partnerCall is one request as the partner saw it.
type partnerCall struct {
	Method, Path, Query, Host string
	Header                    http.Header
	Body                      string
	Token                     api.Token
}

func newPartnerServer(tb testing.TB, delay time.Duration) *partnerServer {
	tb.Helper()
	p := &partnerServer{delay: delay, arrived: make(chan string, 1024), inFlight: map[string]int{}, maxPerRes: map[string]int{}, slowCancel: make(chan struct{})}
	p.Server = httptest.NewServer(p)
	tb.Cleanup(func() {
		close(p.slowCancel)
		p.Close()
	})
	return p
}

// resourceOf is the segment after "accounts" in the path, or "".
func resourceOf(path string) string {
	segs := strings.Split(path, "/")
	if i := slices.Index(segs, "accounts"); i >= 0 && i+1 < len(segs) {
		return segs[i+1]
	}
	return ""
}

func (p *partnerServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	token, _ := api.ParseToken(r.Header.Get(api.HeaderFenceToken))
	res := resourceOf(r.URL.Path)
	p.mu.Lock()
	n := len(p.calls) + 1
	p.calls = append(p.calls, partnerCall{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Host: r.Host, Header: r.Header.Clone(), Body: string(body), Token: token})
	p.inFlight[res]++
	p.maxPerRes[res] = max(p.maxPerRes[res], p.inFlight[res])
	p.total++
	p.maxTotal = max(p.maxTotal, p.total)
	redirectTo := p.redirectTo
	p.mu.Unlock()
	select {
	case p.arrived <- r.URL.Path:
	default:
	}
	defer func() {
		p.mu.Lock()
		p.inFlight[res]--
		p.total--
		p.mu.Unlock()
	}()
	switch {
	case strings.HasSuffix(r.URL.Path, "/slow"):
		select {
		case <-time.After(2 * time.Second):
		case <-p.slowCancel:
		}
	case p.delay > 0:
		time.Sleep(p.delay)
	}
	switch {
	case strings.HasSuffix(r.URL.Path, "/fail"):
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "partner failed on call %d", n)
	case strings.HasSuffix(r.URL.Path, "/redirect"):
		http.Redirect(w, r, redirectTo, http.StatusFound)
	case strings.HasSuffix(r.URL.Path, "/huge"):
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Location", fmt.Sprintf("/reports/r_%d", n))
		w.Write(hugeAnswer(n))
	case strings.HasSuffix(r.URL.Path, "/big"):
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(bytes.Repeat([]byte("x"), 4<<10))
	default:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/charges/ch_%d", n))
		w.Header().Set("X-Partner-Call", strconv.Itoa(n))
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"call": n, "path": r.URL.Path, "token": token})
	}
}

// hugeAnswer is the body of the n-th call's answer to /huge: 64 KiB,
// different for every call.
func hugeAnswer(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < 64<<10; i++ {
		fmt.Fprintf(&b, "call %d line %d\n", n, i)
	}
	return b.Bytes()[:64<<10]
}

func (p *partnerServer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls)
}

func (p *partnerServer) snapshot() []partnerCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// payRoute is the route most tests use: "pay" to partner's /base, the
// resource from the path's accounts/{account}.
func payRoute(tb testing.TB, upstream string) partners.PartnerRoute {
	tb.Helper()
	u, err := url.Parse(upstream + "/base")
	if err != nil {
		tb.Fatal(err)
	}
	return partners.PartnerRoute{
		Name:     "pay",
		Upstream: u,
		Methods:  []string{"GET", "POST", "PUT", "DELETE"},
		Resource: "accounts/{account}",
		Timeout:  5 * time.Second,
		MaxWait:  30 * time.Second,
	}
}

// startPartnerGateway starts a gateway with its own etcd client, token
// store and partner admissions on etcd, serving routes, and returns its
// URL. Two calls on one etcd are two gateway instances.
func startPartnerGateway(tb testing.TB, etcd *testenv.Etcd, etcdTimeout time.Duration, routes ...partners.PartnerRoute) string {
	tb.Helper()
	return startPartnerGatewayWith(tb, etcd, etcdTimeout, gateway.Config{}, routes...)
}

// startPartnerGatewayWith is startPartnerGateway with cfg (its Logger
// is set).
func startPartnerGatewayWith(tb testing.TB, etcd *testenv.Etcd, etcdTimeout time.Duration, cfg gateway.Config, routes ...partners.PartnerRoute) string {
	tb.Helper()
	store, partnerStore := newPartnerStores(tb, etcd, etcdTimeout)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	gw, err := gateway.New(cfg, store, newMemObjects(), gateway.WithPartners(routes, partnerStore, nil))
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	tb.Cleanup(srv.Close)
	return srv.URL
}

// newPartnerStores returns a token store on its own client of etcd, with
// requests bounded by etcdTimeout, and the partner admissions on it.
func newPartnerStores(tb testing.TB, etcd *testenv.Etcd, etcdTimeout time.Duration) (*tokenstore.Store, *tokenstore.Partners) {
	tb.Helper()
	store, err := tokenstore.New(etcd.Client(tb), tokenstore.Config{RequestTimeout: etcdTimeout})
	if err != nil {
		tb.Fatal(err)
	}
	partnerStore, err := tokenstore.NewPartners(store)
	if err != nil {
		tb.Fatal(err)
	}
	return store, partnerStore
}

// partnerReq is one request to a partner route.
type partnerReq struct {
	method string // "" means POST
	path   string // below /v1/partners/, with an optional query
	token  api.Token
	key    string
	body   string
	header http.Header
}

func (p partnerReq) build(tb testing.TB, ctx context.Context, gatewayURL string) *http.Request {
	tb.Helper()
	method := p.method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, gatewayURL+"/v1/partners/"+p.path, strings.NewReader(p.body))
	if err != nil {
		tb.Fatal(err)
	}
	for name, values := range p.header {
		req.Header[name] = values
	}
	if p.token != 0 {
		req.Header.Set(api.HeaderFenceToken, p.token.String())
	}
	if p.key != "" {
		req.Header.Set(api.HeaderIdempotencyKey, p.key)
	}
	return req
}

func partnerDo(tb testing.TB, gatewayURL string, p partnerReq) result {
	tb.Helper()
	return send(tb, p.build(tb, context.Background(), gatewayURL))
}

func replayed(r result) bool { return r.header.Get(api.HeaderIdempotentReplayed) == "true" }

func TestPartnerForwards(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	route := payRoute(t, partner.URL)
	route.StripHeaders = []string{"X-Internal"}
	route.AddHeaders = http.Header{"X-Api-Key": {"sk_test_1"}}
	gw := startPartnerGateway(t, etcd, time.Second, route)

	r := partnerDo(t, gw, partnerReq{
		path:  "pay/accounts/a1/charges?amount=5&note=a%2Fb",
		token: 7,
		key:   "order-1",
		body:  `{"amount":5}`,
		header: http.Header{
			"Content-Type":     {"application/json"},
			"Authorization":    {"Bearer gateway-key"},
			"Cookie":           {"session=1"},
			"X-Internal":       {"secret"},
			"X-Fence-Resource": {"other"},
			"X-Forwarded-Host": {"evil.example"},
			"X-Custom":         {"kept"},
		},
	})
	if r.status != http.StatusCreated || r.header.Get("Location") != "/charges/ch_1" || r.header.Get("X-Partner-Call") != "1" || replayed(r) {
		t.Fatalf("first call = %s %v; want the partner's 201 with its headers, not replayed", r, r.header)
	}
	calls := partner.snapshot()
	if len(calls) != 1 {
		t.Fatalf("partner got %d calls; want 1", len(calls))
	}
	c := calls[0]
	upstream, _ := url.Parse(partner.URL)
	checks := []struct {
		what      string
		got, want string
	}{
		{"method", c.Method, "POST"},
		{"path", c.Path, "/base/accounts/a1/charges"},
		{"query", c.Query, "amount=5&note=a%2Fb"},
		{"Host", c.Host, upstream.Host},
		{"body", c.Body, `{"amount":5}`},
		{"X-Fence-Token", c.Header.Get(api.HeaderFenceToken), "7"},
		{"Content-Type", c.Header.Get("Content-Type"), "application/json"},
		{"X-Custom", c.Header.Get("X-Custom"), "kept"},
		{"X-Api-Key (added)", c.Header.Get("X-Api-Key"), "sk_test_1"},
		{"Authorization", c.Header.Get("Authorization"), ""},
		{"Cookie", c.Header.Get("Cookie"), ""},
		{"X-Internal (stripped)", c.Header.Get("X-Internal"), ""},
		{"X-Fence-Resource", c.Header.Get("X-Fence-Resource"), ""},
		{"X-Forwarded-Host", c.Header.Get("X-Forwarded-Host"), ""},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("partner saw %s %q; want %q", ch.what, ch.got, ch.want)
		}
	}
	// The partner gets a key derived from the scope and the client's key:
	// stable across attempts, never the client's raw key.
	if k := c.Header.Get(api.HeaderIdempotencyKey); !strings.HasPrefix(k, "fg-") || strings.Contains(k, "order-1") {
		t.Errorf("partner saw Idempotency-Key %q; want a derived fg-... key", k)
	}

	// The retry is replayed from etcd: status, body and stored headers;
	// the partner is not called again.
	again := partnerDo(t, gw, partnerReq{path: "pay/accounts/a1/charges?amount=5&note=a%2Fb", token: 7, key: "order-1", body: `{"amount":5}`,
		header: http.Header{"Content-Type": {"application/json"}, "X-Custom": {"kept"}, "Cookie": {"session=2"}}})
	if !replayed(again) || again.status != r.status || !bytes.Equal(again.body, r.body) || again.header.Get("Location") != "/charges/ch_1" {
		t.Fatalf("retry = %s %v; want the stored 201 replayed", again, again.header)
	}
	if again.header.Get("X-Partner-Call") != "" {
		t.Errorf("replay carries X-Partner-Call; only Content-Type and the stored headers are kept")
	}
	if n := partner.count(); n != 1 {
		t.Fatalf("partner got %d calls after the retry; want 1", n)
	}
}

// TestPartnerIdempotencyAcrossTwoGateways: 20 clients send the same
// request with the same key at once, spread over two gateway instances on
// one etcd, retrying while they get 409 in flight. The partner sees
// exactly one request, and every client ends with its stored answer.
func TestPartnerIdempotencyAcrossTwoGateways(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 300*time.Millisecond)
	route := payRoute(t, partner.URL)
	gateways := []string{
		startPartnerGateway(t, etcd, time.Second, route),
		startPartnerGateway(t, etcd, time.Second, route),
	}
	const clients = 20
	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		inFlight atomic.Int64
		finals   = make([]result, clients)
	)
	for i := range clients {
		wg.Go(func() {
			<-start
			for attempt := 0; ; attempt++ {
				r := partnerDo(t, gateways[i%2], partnerReq{path: "pay/accounts/a1/charges", token: 3, key: "order-42", body: `{"amount":42}`})
				if r.status == http.StatusConflict && r.problem.Type == api.ProblemTypePrefix+"idempotency-in-flight" && attempt < 500 {
					inFlight.Add(1)
					time.Sleep(20 * time.Millisecond)
					continue
				}
				finals[i] = r
				return
			}
		})
	}
	close(start)
	wg.Wait()
	if n := partner.count(); n != 1 {
		t.Fatalf("partner got %d requests for one idempotency key; want exactly 1", n)
	}
	var fresh int
	for i, r := range finals {
		if r.status != http.StatusCreated || !bytes.Equal(r.body, finals[0].body) {
			t.Errorf("client %d ended with %s; want the one stored 201 %s", i, r, finals[0].body)
		}
		if !replayed(r) {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d clients got a fresh (not replayed) answer; want exactly 1", fresh)
	}
	t.Logf("%d answers of 409 idempotency-in-flight while the first request was upstream", inFlight.Load())
}

func TestPartnerIdempotencyMismatch(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	pay := payRoute(t, partner.URL)
	mail := payRoute(t, partner.URL)
	mail.Name = "mail"
	gw := startPartnerGateway(t, etcd, time.Second, pay, mail)

	first := partnerReq{path: "pay/accounts/a1/charges", token: 5, key: "k1", body: `{"amount":5}`, header: http.Header{"Content-Type": {"application/json"}}}
	if r := partnerDo(t, gw, first); r.status != http.StatusCreated {
		t.Fatalf("first = %s; want 201", r)
	}
	for _, tc := range []struct {
		name   string
		change func(*partnerReq)
	}{
		{"other body", func(p *partnerReq) { p.body = `{"amount":6}` }},
		{"other token", func(p *partnerReq) { p.token = 6 }},
		{"other path", func(p *partnerReq) { p.path = "pay/accounts/a1/refunds" }},
		{"other query", func(p *partnerReq) { p.path += "?x=1" }},
		{"other method", func(p *partnerReq) { p.method = http.MethodPut }},
		{"a forwarded header more", func(p *partnerReq) { p.header = http.Header{"Content-Type": {"application/json"}, "X-Custom": {"b"}} }},
		{"a forwarded header's value", func(p *partnerReq) { p.header = http.Header{"Content-Type": {"text/plain"}} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := first
			tc.change(&req)
			wantProblem(t, partnerDo(t, gw, req), http.StatusUnprocessableEntity, "idempotency-mismatch")
		})
	}
	// Headers that are not forwarded, or that name the attempt rather
	// than the request (trace context, the request id), may differ.
	for name, header := range map[string]http.Header{
		"headers never forwarded": {"Content-Type": {"application/json"}, "Cookie": {"a=1"}, "X-Forwarded-For": {"192.0.2.1"}, "X_Fence_Token": {"9"}},
		"another attempt's trace context and request id": {"Content-Type": {"application/json"}, "Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
			"Tracestate": {"a=b"}, "Baggage": {"k=v"}, "X-Request-Id": {"attempt-2"}},
	} {
		retry := first
		retry.header = header
		if r := partnerDo(t, gw, retry); r.status != http.StatusCreated || !replayed(r) {
			t.Errorf("retry with %s = %s; want the stored 201 replayed", name, r)
		}
	}
	if n := partner.count(); n != 1 {
		t.Fatalf("partner got %d calls; want 1 (a mismatched key is never forwarded)", n)
	}
	// Keys are scoped per route: the same key on another route is new.
	other := first
	other.path = "mail/accounts/a1/charges"
	if r := partnerDo(t, gw, other); r.status != http.StatusCreated || replayed(r) {
		t.Fatalf("same key on another route = %s; want forwarded", r)
	}
	if n := partner.count(); n != 2 {
		t.Fatalf("partner got %d calls; want 2", n)
	}
}

// TestPartnerSerializesOneResource sends 10 requests for one resource at
// once, with tokens 1 to 10, through two gateways, to a partner that takes
// 200 ms: the partner never has two of them at a time, and sees their
// tokens in non-decreasing order. Requests for different resources do
// overlap.
func TestPartnerSerializesOneResource(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 200*time.Millisecond)
	route := payRoute(t, partner.URL)
	gateways := []string{
		startPartnerGateway(t, etcd, time.Second, route),
		startPartnerGateway(t, etcd, time.Second, route),
	}
	var wg sync.WaitGroup
	answers := make([]result, 10)
	// Token 1 goes first; once it is upstream, tokens 2 to 10 come at
	// once and wait for it.
	wg.Go(func() {
		answers[0] = partnerDo(t, gateways[0], partnerReq{path: "pay/accounts/a1/charges", token: 1})
	})
	<-partner.arrived
	start := make(chan struct{})
	for i := 1; i < len(answers); i++ {
		wg.Go(func() {
			<-start
			answers[i] = partnerDo(t, gateways[i%2], partnerReq{path: "pay/accounts/a1/charges", token: api.Token(i + 1)})
		})
	}
	close(start)
	wg.Wait()
	var accepted int
	for i, r := range answers {
		switch {
		case r.status == http.StatusCreated:
			accepted++
		case r.status == http.StatusConflict && r.problem.Type == api.ProblemTypePrefix+"stale-token":
			// became stale while it waited for the resource
		default:
			t.Errorf("token %d: %s; want 201, or 409 stale-token", i+1, r)
		}
	}
	if answers[0].status != http.StatusCreated || answers[9].status != http.StatusCreated {
		t.Errorf("token 1 (first) = %s, token 10 (the largest) = %s; want both forwarded", answers[0], answers[9])
	}
	calls := partner.snapshot()
	if len(calls) != accepted {
		t.Errorf("partner got %d calls, gateways answered 201 %d times", len(calls), accepted)
	}
	var seen []api.Token
	for _, c := range calls {
		seen = append(seen, c.Token)
	}
	if !slices.IsSorted(seen) {
		t.Errorf("partner saw tokens %v; want non-decreasing", seen)
	}
	partner.mu.Lock()
	overlap := partner.maxPerRes["a1"]
	partner.mu.Unlock()
	if overlap != 1 {
		t.Errorf("partner had %d requests for one resource at once; want 1", overlap)
	}
	t.Logf("partner saw tokens %v", seen)

	// Different resources are not serialized with each other.
	start = make(chan struct{})
	for i := range 5 {
		wg.Go(func() {
			<-start
			r := partnerDo(t, gateways[i%2], partnerReq{path: fmt.Sprintf("pay/accounts/b%d/charges", i), token: 1})
			if r.status != http.StatusCreated {
				t.Errorf("resource b%d: %s", i, r)
			}
		})
	}
	close(start)
	wg.Wait()
	partner.mu.Lock()
	total := partner.maxTotal
	partner.mu.Unlock()
	if total < 2 {
		t.Errorf("partner never had two requests for different resources at once (max %d); want overlap", total)
	}
}

func TestPartnerStaleTokenNotForwarded(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	route := payRoute(t, partner.URL)
	gw1 := startPartnerGateway(t, etcd, time.Second, route)
	gw2 := startPartnerGateway(t, etcd, time.Second, route)
	if r := partnerDo(t, gw1, partnerReq{path: "pay/accounts/a1/charges", token: 5}); r.status != http.StatusCreated {
		t.Fatalf("token 5 = %s; want 201", r)
	}
	// gw1 refuses from its cache, gw2 (which never saw a1) from etcd.
	for _, gw := range []string{gw1, gw2} {
		r := partnerDo(t, gw, partnerReq{path: "pay/accounts/a1/charges", token: 4, key: "new-key"})
		wantProblem(t, r, http.StatusConflict, "stale-token")
		if r.problem.HighWaterMark != 5 {
			t.Errorf("stale answer names high-water mark %d; want 5", r.problem.HighWaterMark)
		}
	}
	if n := partner.count(); n != 1 {
		t.Fatalf("partner got %d calls; want 1 (stale tokens are not forwarded)", n)
	}
}

func TestPartnerEtcdDownFailsClosed(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	gw := startPartnerGateway(t, etcd, 500*time.Millisecond, payRoute(t, partner.URL))
	if r := partnerDo(t, gw, partnerReq{path: "pay/accounts/a1/charges", token: 5}); r.status != http.StatusCreated {
		t.Fatalf("with etcd up = %s; want 201", r)
	}
	etcd.Stop(t)
	for _, req := range []partnerReq{
		{path: "pay/accounts/a1/charges", token: 6},
		{path: "pay/accounts/a2/charges", token: 6, key: "k"},
	} {
		r := partnerDo(t, gw, req)
		wantProblem(t, r, http.StatusServiceUnavailable, "fence-unavailable")
		if r.header.Get("Retry-After") == "" {
			t.Errorf("503 without Retry-After")
		}
	}
	if n := partner.count(); n != 1 {
		t.Fatalf("partner got %d calls; want 1 (nothing forwarded with etcd down)", n)
	}
}

// rawRequest sends request bytes as they are, for request targets that
// Go's client would not send, and reads the answer.
func rawRequest(tb testing.TB, gatewayURL, request string) *http.Response {
	tb.Helper()
	u, _ := url.Parse(gatewayURL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, request); err != nil {
		tb.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		tb.Fatalf("%q: %v", request, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestPartnerSSRF sends requests that try to make the gateway call
// another host, or leave the route's base path. A second server stands
// for that other host: it must never be called.
func TestPartnerSSRF(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	evil := newPartnerServer(t, 0)
	partner := newPartnerServer(t, 0)
	partner.mu.Lock()
	partner.redirectTo = evil.URL + "/stolen"
	partner.mu.Unlock()
	gw := startPartnerGateway(t, etcd, time.Second, payRoute(t, partner.URL))
	evilHost := strings.TrimPrefix(evil.URL, "http://")
	gwHost := strings.TrimPrefix(gw, "http://")
	partnerHost := strings.TrimPrefix(partner.URL, "http://")

	get := func(target, host string, extra ...string) string {
		return "GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\nX-Fence-Token: 1\r\n" + strings.Join(extra, "") + "Connection: close\r\n\r\n"
	}
	cases := []struct {
		name    string
		request string
		status  int
		// forwardedPath is what the partner must see when forwarded.
		forwardedPath string
	}{
		{"absolute-form target", get("http://"+evilHost+"/v1/partners/pay/accounts/a1/x", evilHost), 400, ""},
		{"absolute-form target, gateway host", get("http://"+gwHost+"/v1/partners/pay/accounts/a1/x", gwHost), 400, ""},
		{"dot-dot", get("/v1/partners/pay/accounts/a1/../../../x", gwHost), 400, ""},
		{"encoded dot-dot", get("/v1/partners/pay/accounts/a1/%2e%2e/%2E%2E/x", gwHost), 400, ""},
		{"encoded slash", get("/v1/partners/pay/accounts/a1%2F..%2F..%2Fx", gwHost), 400, ""},
		{"encoded backslash", get("/v1/partners/pay/accounts/a1/%5c..%5cx", gwHost), 400, ""},
		{"double encoding", get("/v1/partners/pay/accounts/a1/%252e%252e/x", gwHost), 400, ""},
		{"empty segment (scheme-relative)", get("/v1/partners/pay//"+evilHost+"/x", gwHost), 400, ""},
		{"control character", get("/v1/partners/pay/accounts/a1/%0d%0aHost:"+evilHost, gwHost), 400, ""},
		{"Host header names another host", get("/v1/partners/pay/accounts/a1/x", evilHost, "X-Forwarded-Host: "+evilHost+"\r\nForwarded: host="+evilHost+"\r\n"), 201, "/base/accounts/a1/x"},
		{"URL in the query", get("/v1/partners/pay/accounts/a1/x?next=http://"+evilHost+"/&u=@"+evilHost, gwHost), 201, "/base/accounts/a1/x"},
		{"userinfo-like segment", get("/v1/partners/pay/accounts/a1/@"+evilHost, gwHost), 201, "/base/accounts/a1/@" + evilHost},
		{"redirect to another host is not followed", get("/v1/partners/pay/accounts/a1/redirect", gwHost), 302, "/base/accounts/a1/redirect"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := partner.count()
			resp := rawRequest(t, gw, tc.request)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d; want %d", resp.StatusCode, tc.status)
			}
			calls := partner.snapshot()[before:]
			if tc.forwardedPath == "" {
				if len(calls) != 0 {
					t.Fatalf("partner was called: %+v", calls)
				}
				return
			}
			if len(calls) != 1 || calls[0].Path != tc.forwardedPath || calls[0].Host != partnerHost {
				t.Fatalf("partner saw %+v; want one call to %s with Host %s", calls, tc.forwardedPath, partnerHost)
			}
			for _, h := range []string{"X-Forwarded-Host", "Forwarded"} {
				if v := calls[0].Header.Get(h); v != "" {
					t.Errorf("partner saw %s: %q", h, v)
				}
			}
		})
	}
	if n := evil.count(); n != 0 {
		t.Fatalf("the other host got %d requests; want 0", n)
	}
}

func TestPartnerUpstreamFailures(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	slow := payRoute(t, partner.URL)
	slow.Name = "slow"
	slow.Timeout = 300 * time.Millisecond
	// A port nobody listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := payRoute(t, "http://"+l.Addr().String())
	down.Name = "down"
	l.Close()
	gw := startPartnerGateway(t, etcd, time.Second, payRoute(t, partner.URL), slow, down)

	t.Run("connect error is 502 and drops the key", func(t *testing.T) {
		req := partnerReq{path: "down/accounts/a1/x", token: 1, key: "k-down"}
		for i := range 2 {
			r := partnerDo(t, gw, req)
			wantProblem(t, r, http.StatusBadGateway, "upstream-error")
			if replayed(r) {
				t.Fatalf("attempt %d replayed; nothing reached the partner, so the key must be free again", i+1)
			}
		}
	})
	t.Run("timeout is 504 and stored", func(t *testing.T) {
		req := partnerReq{path: "slow/accounts/a1/slow", token: 1, key: "k-slow"}
		before := partner.count()
		r := partnerDo(t, gw, req)
		wantProblem(t, r, http.StatusGatewayTimeout, "upstream-timeout")
		again := partnerDo(t, gw, req)
		wantProblem(t, again, http.StatusGatewayTimeout, "upstream-timeout")
		if !replayed(again) {
			t.Fatalf("retry after a timeout = %s; want the stored 504 replayed (the outcome is unknown)", again)
		}
		if n := partner.count() - before; n != 1 {
			t.Fatalf("partner got %d calls; want 1", n)
		}
	})
	t.Run("5xx passes through and is stored", func(t *testing.T) {
		req := partnerReq{path: "pay/accounts/a1/fail", token: 1, key: "k-fail"}
		before := partner.count()
		r := partnerDo(t, gw, req)
		again := partnerDo(t, gw, req)
		if r.status != 500 || !strings.HasPrefix(string(r.body), "partner failed") || again.status != 500 || !bytes.Equal(again.body, r.body) || !replayed(again) {
			t.Fatalf("answers %s then %s; want the partner's 500, then it replayed", r, again)
		}
		if n := partner.count() - before; n != 1 {
			t.Fatalf("partner got %d calls; want 1", n)
		}
	})
}

// TestPartnerClientDisconnects: the client goes away while its request is
// upstream. The call goes on, its answer is stored, and a retry with the
// same key gets it without a second call.
func TestPartnerClientDisconnects(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 500*time.Millisecond)
	gw := startPartnerGateway(t, etcd, time.Second, payRoute(t, partner.URL))
	req := partnerReq{path: "pay/accounts/a1/charges", token: 1, key: "k-gone"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req.build(t, ctx, gw))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-partner.arrived
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("client = %v; want cancelled", err)
	}
	for attempt := 0; ; attempt++ {
		r := partnerDo(t, gw, req)
		if r.status == http.StatusConflict && attempt < 1000 {
			time.Sleep(20 * time.Millisecond) // still upstream
			continue
		}
		if r.status != http.StatusCreated || !replayed(r) {
			t.Fatalf("retry = %s; want the stored 201 replayed", r)
		}
		break
	}
	if n := partner.count(); n != 1 {
		t.Fatalf("partner got %d calls; want 1", n)
	}
}

func TestPartnerLargeAnswerNotStored(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	route := payRoute(t, partner.URL)
	route.MaxStoredResponseBytes = 1 << 10
	gw := startPartnerGateway(t, etcd, time.Second, route)
	req := partnerReq{method: "GET", path: "pay/accounts/a1/big", token: 1, key: "k-big"}
	if r := partnerDo(t, gw, req); r.status != 200 || len(r.body) != 4<<10 {
		t.Fatalf("first = %d with %d bytes; want 200 with the whole 4 KiB", r.status, len(r.body))
	}
	r := partnerDo(t, gw, req)
	if r.status != 200 || len(r.body) != 0 || !replayed(r) || r.header.Get(api.HeaderIdempotentBodyOmitted) != "true" || r.header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("replay = %d, %d bytes, %v; want 200 without the body, marked omitted", r.status, len(r.body), r.header)
	}
	if n := partner.count(); n != 1 {
		t.Fatalf("partner got %d calls; want 1", n)
	}
}

// TestPartnerBadRequests: requests refused before anything is forwarded.
func TestPartnerBadRequests(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	strict := payRoute(t, partner.URL)
	strict.Name = "strict"
	strict.RequireIdempotencyKey = true
	strict.MaxBodyBytes = 10
	byHeader := payRoute(t, partner.URL)
	byHeader.Name = "mail"
	byHeader.Resource = "header"
	gw := startPartnerGateway(t, etcd, time.Second, payRoute(t, partner.URL), strict, byHeader)
	cases := []struct {
		name   string
		req    partnerReq
		status int
		slug   string
	}{
		{"unknown route", partnerReq{path: "nope/accounts/a1", token: 1}, 404, "not-found"},
		{"method not allowed", partnerReq{method: "PATCH", path: "pay/accounts/a1", token: 1}, 405, "method-not-allowed"},
		{"missing token", partnerReq{path: "pay/accounts/a1"}, 428, "missing-token"},
		{"malformed token", partnerReq{path: "pay/accounts/a1", header: http.Header{"X-Fence-Token": {"01"}}}, 400, "malformed-token"},
		{"path shorter than the template", partnerReq{path: "pay/accounts", token: 1}, 400, "invalid-request"},
		{"path not matching the template", partnerReq{path: "pay/users/a1", token: 1}, 400, "invalid-request"},
		{"missing required key", partnerReq{path: "strict/accounts/a1", token: 1}, 400, "missing-idempotency-key"},
		{"malformed key", partnerReq{path: "pay/accounts/a1", token: 1, header: http.Header{"Idempotency-Key": {"a\tb"}}}, 400, "malformed-idempotency-key"},
		{"two keys", partnerReq{path: "pay/accounts/a1", token: 1, header: http.Header{"Idempotency-Key": {"a", "b"}}}, 400, "malformed-idempotency-key"},
		{"body too large", partnerReq{path: "strict/accounts/a1", token: 1, key: "k", body: "01234567890"}, 413, "body-too-large"},
		{"no X-Fence-Resource", partnerReq{path: "mail/send", token: 1}, 400, "invalid-request"},
		{"X-Fence-Resource with ..", partnerReq{path: "mail/send", token: 1, header: http.Header{"X-Fence-Resource": {"a/../b"}}}, 400, "invalid-request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := partnerDo(t, gw, tc.req)
			wantProblem(t, r, tc.status, tc.slug)
			if tc.status == 405 && r.header.Get("Allow") != "GET, POST, PUT, DELETE" {
				t.Errorf("Allow = %q", r.header.Get("Allow"))
			}
		})
	}
	if n := partner.count(); n != 0 {
		t.Fatalf("partner got %d calls; want 0", n)
	}
	// The header route forwards with a resource from the header.
	r := partnerDo(t, gw, partnerReq{path: "mail/send", token: 1, header: http.Header{"X-Fence-Resource": {"user/u1"}}})
	if r.status != 201 {
		t.Fatalf("mail with X-Fence-Resource = %s; want 201", r)
	}
}

func TestPartnerRouteValidation(t *testing.T) {
	good := func() partners.PartnerRoute {
		u, _ := url.Parse("https://api.example.com/v1")
		return partners.PartnerRoute{Name: "pay", Upstream: u, Methods: []string{"POST"}, Resource: "accounts/{account}"}
	}
	parse := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	cases := []struct {
		name   string
		change func(*partners.PartnerRoute)
		want   string // in the error; "" means valid
	}{
		{"valid", func(*partners.PartnerRoute) {}, ""},
		{"header resource", func(r *partners.PartnerRoute) { r.Resource = "header" }, ""},
		{"bad name", func(r *partners.PartnerRoute) { r.Name = "Pay" }, "name"},
		{"name with slash", func(r *partners.PartnerRoute) { r.Name = "a/b" }, "name"},
		{"no upstream", func(r *partners.PartnerRoute) { r.Upstream = nil }, "upstream"},
		{"ftp upstream", func(r *partners.PartnerRoute) { r.Upstream = parse("ftp://x/") }, "scheme"},
		{"upstream with user", func(r *partners.PartnerRoute) { r.Upstream = parse("https://u:p@x/") }, "user info"},
		{"upstream with query", func(r *partners.PartnerRoute) { r.Upstream = parse("https://x/?a=1") }, "query"},
		{"upstream with fragment", func(r *partners.PartnerRoute) { r.Upstream = parse("https://x/#f") }, "fragment"},
		{"relative upstream", func(r *partners.PartnerRoute) { r.Upstream = parse("/x") }, "scheme"},
		{"no methods", func(r *partners.PartnerRoute) { r.Methods = nil }, "methods"},
		{"lower-case method", func(r *partners.PartnerRoute) { r.Methods = []string{"post"} }, "methods"},
		{"every method", func(r *partners.PartnerRoute) {
			r.Methods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
		}, ""},
		{"a method the router does not serve", func(r *partners.PartnerRoute) { r.Methods = []string{"POST", "QUERY"} }, `methods[1]: unknown method "QUERY"`},
		{"TRACE", func(r *partners.PartnerRoute) { r.Methods = []string{"TRACE"} }, `methods[0]: unknown method "TRACE"`},
		{"CONNECT", func(r *partners.PartnerRoute) { r.Methods = []string{"CONNECT"} }, `methods[0]: unknown method "CONNECT"`},
		{"no variable", func(r *partners.PartnerRoute) { r.Resource = "accounts" }, "no {variable}"},
		{"empty resource", func(r *partners.PartnerRoute) { r.Resource = "" }, "resource"},
		{"dot-dot template", func(r *partners.PartnerRoute) { r.Resource = "../{a}" }, "resource"},
		{"negative timeout", func(r *partners.PartnerRoute) { r.Timeout = -1 }, "timeout: negative duration"},
		{"negative idempotency TTL", func(r *partners.PartnerRoute) { r.IdempotencyTTL = -time.Second }, "idempotency_ttl: negative duration -1s"},
		{"negative body limit", func(r *partners.PartnerRoute) { r.MaxBodyBytes = -1 }, "max_body_bytes: negative limit -1"},
		{"stored too large", func(r *partners.PartnerRoute) { r.MaxStoredResponseBytes = 2 << 20 }, "max_stored_response_bytes"},
		{"adds X-Fence-Token", func(r *partners.PartnerRoute) { r.AddHeaders = http.Header{"X-Fence-Token": {"1"}} }, "add_headers"},
		{"bad strip header", func(r *partners.PartnerRoute) { r.StripHeaders = []string{"a b"} }, "strip_headers"},
		{"header resource bound to the path", func(r *partners.PartnerRoute) { r.Resource, r.ResourcePath = "header", "v2/accounts/{resource}/x" }, ""},
		{"resource_path with a template resource", func(r *partners.PartnerRoute) { r.ResourcePath = "accounts/{resource}" }, `resource_path: only with resource "header"`},
		{"resource_path without {resource}", func(r *partners.PartnerRoute) { r.Resource, r.ResourcePath = "header", "accounts" }, "resource_path"},
		{"resource_path with another variable", func(r *partners.PartnerRoute) { r.Resource, r.ResourcePath = "header", "accounts/{account}" }, "the only variable is {resource}"},
		{"resource_path with {resource} twice", func(r *partners.PartnerRoute) { r.Resource, r.ResourcePath = "header", "{resource}/{resource}" }, "exactly once"},
		{"header resource unbound on purpose", func(r *partners.PartnerRoute) { r.Resource, r.UnboundPath = "header", true }, ""},
		{"unbound_path with a template resource", func(r *partners.PartnerRoute) { r.UnboundPath = true }, `unbound_path: only with resource "header"`},
		{"unbound_path with resource_path", func(r *partners.PartnerRoute) {
			r.Resource, r.ResourcePath, r.UnboundPath = "header", "accounts/{resource}", true
		}, "unbound_path: set resource_path or unbound_path, not both"},
		{"resource_path with a dot-dot", func(r *partners.PartnerRoute) { r.Resource, r.ResourcePath = "header", "../{resource}" }, "resource_path"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			route := good()
			tc.change(&route)
			_, err := gateway.New(gateway.Config{}, newMemFences(), newMemObjects(), gateway.WithPartners([]partners.PartnerRoute{route}, nopPartners{}, nil))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New = %v; want valid", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("New = %v; want an error about %q", err, tc.want)
			}
		})
	}
	t.Run("duplicate names", func(t *testing.T) {
		_, err := gateway.New(gateway.Config{}, newMemFences(), newMemObjects(), gateway.WithPartners([]partners.PartnerRoute{good(), good()}, nopPartners{}, nil))
		if err == nil || !strings.Contains(err.Error(), "twice") {
			t.Fatalf("New with a name used twice = %v; want an error", err)
		}
	})
}

// nopPartners is a PartnerStore for tests that never send a request.
type nopPartners struct{}

func (nopPartners) CachedHighWaterMark(api.Resource) (api.Token, bool) { return 0, false }
func (nopPartners) AdmitPartner(context.Context, api.PartnerAdmission) (api.Admission, error) {
	return api.Admission{}, errors.New("nopPartners: not for requests")
}

var _ partners.PartnerStore = (*tokenstore.Partners)(nil)

// TestPartnerBusyResource: while a request for a resource is upstream, a
// second one for it waits at most the route's max_wait and gets 503
// resource-busy with Retry-After, without reaching the partner; one for
// another resource is not held up.
func TestPartnerBusyResource(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	route := payRoute(t, partner.URL)
	route.MaxWait = 100 * time.Millisecond
	gw := startPartnerGateway(t, etcd, time.Second, route)
	first := make(chan result, 1)
	go func() { first <- partnerDo(t, gw, partnerReq{path: "pay/accounts/a1/slow", token: 1}) }()
	<-partner.arrived
	r := partnerDo(t, gw, partnerReq{path: "pay/accounts/a1/charges", token: 2, key: "k-busy"})
	wantProblem(t, r, http.StatusServiceUnavailable, "resource-busy")
	if r.header.Get("Retry-After") == "" {
		t.Errorf("503 resource-busy without Retry-After")
	}
	if other := partnerDo(t, gw, partnerReq{path: "pay/accounts/a2/charges", token: 2}); other.status != http.StatusCreated {
		t.Errorf("another resource while a1 is busy = %s; want 201", other)
	}
	if got := <-first; got.status != http.StatusCreated {
		t.Fatalf("the slow request = %s; want 201", got)
	}
	if n := partner.count(); n != 2 {
		t.Fatalf("partner got %d calls; want 2 (the busy request is not forwarded)", n)
	}
	// The busy refusal left no record: the key may be used now.
	if r := partnerDo(t, gw, partnerReq{path: "pay/accounts/a1/charges", token: 2, key: "k-busy"}); r.status != http.StatusCreated || replayed(r) {
		t.Fatalf("the busy request's key afterwards = %s; want forwarded", r)
	}
}
