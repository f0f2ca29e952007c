package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/partners"
)

// TestPartnerPausedGatewayDoesNotSend: a gateway that stalls between a
// request's admission and its upstream call (a GC pause, a stopped
// process, an overloaded host) must not send it once its in-flight marker
// may expire before the call ends: by then another request for the
// resource may be admitted and sent. It answers 503 with nothing sent,
// and drops the request's idempotency record, so that a retry is admitted
// afresh (and fenced again).
func TestPartnerPausedGatewayDoesNotSend(t *testing.T) {
	const etcdTimeout = 200 * time.Millisecond
	// margin is how much longer than the route's timeout an admission's
	// marker lives at least (tokenstore: 2 x the etcd request timeout +
	// 1 s, for the round trips around the call).
	const margin = 2*etcdTimeout + time.Second
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	route := payRoute(t, partner.URL)
	route.Timeout = time.Second

	var mu sync.Mutex
	pauses := map[api.Token]func(){} // by token
	pauseFor := func(token api.Token, f func()) {
		mu.Lock()
		defer mu.Unlock()
		pauses[token] = f
	}
	hooks := &gateway.TestHooks{BeforePartnerCall: func(_ context.Context, _ api.Resource, token api.Token) {
		mu.Lock()
		f := pauses[token]
		mu.Unlock()
		if f != nil {
			f()
		}
	}}
	store, partnerStore := newPartnerStores(t, etcd, etcdTimeout)
	cfg := gateway.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TestHooks: hooks}
	g, err := gateway.New(cfg, store, newMemObjects(), gateway.WithPartners([]partners.PartnerRoute{route}, partnerStore, nil))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	gw := srv.URL

	callsFor := func(account string) []partnerCall {
		var out []partnerCall
		for _, c := range partner.snapshot() {
			if resourceOf(c.Path) == account {
				out = append(out, c)
			}
		}
		return out
	}

	t.Run("paused past the margin", func(t *testing.T) {
		pauseFor(11, func() { time.Sleep(margin + 200*time.Millisecond) })
		req := partnerReq{path: "pay/accounts/p1/charges", token: 11, key: "k-paused"}
		r := partnerDo(t, gw, req)
		wantProblem(t, r, http.StatusServiceUnavailable, "fence-unavailable")
		if calls := callsFor("p1"); len(calls) != 0 {
			t.Fatalf("partner got %d calls; want none: the marker could expire during the call", len(calls))
		}
		pauseFor(11, nil)
		again := partnerDo(t, gw, req)
		if again.status != http.StatusCreated || replayed(again) {
			t.Fatalf("retry = %s (replayed %v); want it forwarded: nothing was sent, so the key is free", again, replayed(again))
		}
		if calls := callsFor("p1"); len(calls) != 1 {
			t.Fatalf("partner got %d calls; want 1", len(calls))
		}
	})

	t.Run("paused until another request went", func(t *testing.T) {
		paused, release := make(chan struct{}), make(chan struct{})
		pauseFor(21, func() {
			close(paused)
			<-release
		})
		type answer struct {
			status int
			body   string
			err    error
		}
		first := make(chan answer, 1)
		go func() {
			req := partnerReq{path: "pay/accounts/p2/charges", token: 21, key: "k-first"}.build(t, context.Background(), gw)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				first <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			first <- answer{resp.StatusCode, string(body), err}
		}()
		<-paused
		// The first request's marker expires with its lease while it is
		// paused; the second waits for that, and is admitted and sent.
		second := partnerDo(t, gw, partnerReq{path: "pay/accounts/p2/charges", token: 22, key: "k-second"})
		if second.status != http.StatusCreated {
			t.Fatalf("second request = %s; want 201", second)
		}
		close(release)
		a := <-first
		if a.err != nil || a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, "fence-unavailable") {
			t.Fatalf("first request after its pause = %d %s, %v; want 503 fence-unavailable", a.status, a.body, a.err)
		}
		calls := callsFor("p2")
		if len(calls) != 1 || calls[0].Token != 22 {
			var tokens []api.Token
			for _, c := range calls {
				tokens = append(tokens, c.Token)
			}
			t.Fatalf("partner got tokens %v; want only 22: token 21's admission had expired", tokens)
		}
		retry := partnerDo(t, gw, partnerReq{path: "pay/accounts/p2/charges", token: 21, key: "k-first"})
		wantProblem(t, retry, http.StatusConflict, "stale-token")
	})
}
