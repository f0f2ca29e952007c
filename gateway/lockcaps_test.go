package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
	"fencegate/gateway"
	"fencegate/tokenstore"
)

// newCappedLockEnv is newLockEnv with the token store's and the gateway's
// limits of the lock API set by the test.
func newCappedLockEnv(tb testing.TB, storeCfg tokenstore.Config, cfg gateway.Config) *env {
	tb.Helper()
	e := newStackEnv(tb)
	storeCfg.RequestTimeout = 5 * time.Second
	store, backend := e.connect(tb, storeCfg)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	gw, err := gateway.New(cfg, store, backend, gateway.WithLocks(store))
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	tb.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// countKeys counts the etcd keys under prefix.
func countKeys(tb testing.TB, client *clientv3.Client, prefix string) int64 {
	tb.Helper()
	resp, err := client.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		tb.Fatalf("counting %s: %v", prefix, err)
	}
	return resp.Count
}

// wantRetryLater fails unless r is a problem answer of status and slug with
// a Retry-After header.
func wantRetryLater(tb testing.TB, what string, r result, status int, slug string) {
	tb.Helper()
	if r.status != status || r.problem.Type != api.ProblemTypePrefix+slug || !r.problem.Retryable || r.header.Get("Retry-After") == "" {
		tb.Fatalf("%s: %s (Retry-After %q); want %d %s, retryable, with Retry-After", what, r, r.header.Get("Retry-After"), status, slug)
	}
}

// TestSessionsPerIdentityCap: with a cap of 5 sessions per identity, the
// 6th POST /v1/sessions is refused 429 too-many-sessions and creates no
// session (no lease is left behind either); revoking one frees a place.
func TestSessionsPerIdentityCap(t *testing.T) {
	e := newCappedLockEnv(t, tokenstore.Config{MaxSessionsPerIdentity: 5}, gateway.Config{})
	client := e.etcd.Client(t)
	var sessions []api.Session
	for range 5 {
		sessions = append(sessions, e.newSession(t, 30))
	}
	r := call(t, http.MethodPost, e.url+"/v1/sessions", api.SessionRequest{TTL: 30}, nil)
	wantRetryLater(t, "6th POST /v1/sessions", r, http.StatusTooManyRequests, "too-many-sessions")
	if n := countKeys(t, client, "fencegate/sessions/"); n != 5 {
		t.Fatalf("%d session records after the refusal; want 5", n)
	}
	leases, err := client.Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Leases) != 5 {
		t.Fatalf("%d etcd leases after the refusal; want the 5 sessions'", len(leases.Leases))
	}

	if r := call(t, http.MethodDelete, e.url+"/v1/sessions/"+sessions[0].ID.String(), nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("revoke: %s", r)
	}
	e.newSession(t, 30) // the revoked session's place
	r = call(t, http.MethodPost, e.url+"/v1/sessions", api.SessionRequest{TTL: 30}, nil)
	wantRetryLater(t, "POST /v1/sessions at the cap again", r, http.StatusTooManyRequests, "too-many-sessions")
}

// TestLocksPerSessionCap: with a cap of 3 locks per session, counting
// queue places, the 4th acquire is refused 429 too-many-locks and queues
// nothing; acquiring again a lock the session has finds its place even
// at the cap, and releasing one frees a place.
func TestLocksPerSessionCap(t *testing.T) {
	e := newCappedLockEnv(t, tokenstore.Config{MaxLocksPerSession: 3}, gateway.Config{})
	client := e.etcd.Client(t)
	other := e.newSession(t, 30)
	if _, r := e.acquire(t, "c", other.ID, 0); r.status != http.StatusOK {
		t.Fatalf("other acquires c: %s", r)
	}
	s := e.newSession(t, 30)
	a, r := e.acquire(t, "a", s.ID, 0)
	if r.status != http.StatusOK {
		t.Fatalf("acquire a: %s", r)
	}
	b, r := e.acquire(t, "b", s.ID, 0)
	if r.status != http.StatusOK {
		t.Fatalf("acquire b: %s", r)
	}
	// The 3rd: a place in c's queue, behind other.
	waited := make(chan result, 1)
	go func() {
		_, r := e.acquire(t, "c", s.ID, 50)
		waited <- r
	}()
	e.waitLockQueue(t, "c", 2)

	_, r = e.acquire(t, "d", s.ID, 0)
	wantRetryLater(t, "4th acquire", r, http.StatusTooManyRequests, "too-many-locks")
	if n := countKeys(t, client, "fencegate/locks/d/"); n != 0 {
		t.Fatalf("%d keys in d's queue after the refusal; want none", n)
	}
	if st := e.lockState(t, "d"); st.Held || st.QueueLength != 0 {
		t.Fatalf("lock d = %+v after the refusal; want free, nobody queued", st)
	}
	if again, r := e.acquire(t, "a", s.ID, 0); r.status != http.StatusOK || again.Token != a.Token {
		t.Fatalf("acquire a again at the cap: %s; want 200 with token %d", r, a.Token)
	}

	if r := call(t, http.MethodDelete, fmt.Sprintf("%s/v1/locks/b?token=%d", e.url, b.Token), nil, nil); r.status != http.StatusOK {
		t.Fatalf("release b: %s", r)
	}
	if _, r := e.acquire(t, "d", s.ID, 0); r.status != http.StatusOK {
		t.Fatalf("acquire d after releasing b: %s", r)
	}
	// Revoking s, then other (whose key s's waiter watches), wakes the
	// waiter to find its place gone.
	for _, session := range []api.Session{s, other} {
		if r := call(t, http.MethodDelete, e.url+"/v1/sessions/"+session.ID.String(), nil, nil); r.status != http.StatusNoContent {
			t.Fatalf("revoke: %s", r)
		}
	}
	if r := <-waited; r.status != http.StatusConflict || r.problem.Type != api.ProblemTypePrefix+"lock-not-held" {
		t.Fatalf("waiter for c after its session was revoked: %s; want 409 lock-not-held", r)
	}
}

// TestLockWaitersCap: with a cap of 4 waiters, 4 long polls wait, and a
// 5th lock request with a wait is answered 503 too-many-waiters without
// any etcd request, and is not queued; a request with wait 0 for a free
// lock, from another client, is still granted.
func TestLockWaitersCap(t *testing.T) {
	e := newCappedLockEnv(t, tokenstore.Config{}, gateway.Config{MaxLockWaiters: 4})
	client := e.etcd.Client(t)
	holder := e.newSession(t, 30)
	if _, r := e.acquire(t, "busy", holder.ID, 0); r.status != http.StatusOK {
		t.Fatalf("holder: %s", r)
	}
	var waiters []api.Session
	done := make(chan result, 4)
	for range 4 {
		w := e.newSession(t, 30)
		waiters = append(waiters, w)
		go func() {
			_, r := e.acquire(t, "busy", w.ID, 50)
			done <- r
		}()
	}
	e.waitLockQueue(t, "busy", 5)

	fifth := e.newSession(t, 30)
	before := e.etcdCalls.Count()
	_, r := e.acquire(t, "busy", fifth.ID, 50)
	wantRetryLater(t, "5th long poll", r, http.StatusServiceUnavailable, "too-many-waiters")
	if n := e.etcdCalls.Count() - before; n != 0 {
		t.Fatalf("the refused long poll made %d etcd requests; want none", n)
	}
	if n := countKeys(t, client, "fencegate/locks/busy/"+fifth.ID.String()); n != 0 {
		t.Fatalf("the refused session has a place in the queue")
	}

	if _, r := e.acquire(t, "free", e.newSession(t, 30).ID, 0); r.status != http.StatusOK {
		t.Fatalf("acquire of a free lock with wait 0 while 4 wait: %s", r)
	}

	// Revoking the waiters' sessions, then the holder's, wakes every
	// waiter (each watches the key ahead of its own) to find its place
	// gone.
	for _, w := range append(waiters, holder) {
		if r := call(t, http.MethodDelete, e.url+"/v1/sessions/"+w.ID.String(), nil, nil); r.status != http.StatusNoContent {
			t.Fatalf("revoke: %s", r)
		}
	}
	for range waiters {
		if r := <-done; r.status != http.StatusConflict {
			t.Fatalf("waiter after its session was revoked: %s; want 409", r)
		}
	}
	// Their places in the limit are free again: the refused client's
	// long poll is served, and gets the lock, free now.
	if _, r := e.acquire(t, "busy", fifth.ID, 50); r.status != http.StatusOK {
		t.Fatalf("long poll after the waiters left: %s; want 200", r)
	}
}
