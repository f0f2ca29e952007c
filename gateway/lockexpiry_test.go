package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/events"
	"fencegate/gateway"
	"fencegate/rest"
	"fencegate/tokenstore"
)

// The store is the lock expiries' source that WithLocks looks for: a
// change of either signature must not silently turn the feed's lock
// expiries off.
var _ rest.LockExpiries = (*tokenstore.Store)(nil)

// lockClient calls the lock API of the gateway at base, with key as its
// bearer credential ("" sends none).
type lockClient struct {
	base, key string
}

func (c lockClient) call(tb testing.TB, method, path string, body any) result {
	tb.Helper()
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			tb.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(b))
	if err != nil {
		tb.Fatal(err)
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	return send(tb, req)
}

// session creates a session of ttl seconds that nobody keeps alive.
func (c lockClient) session(tb testing.TB, ttl int64) api.Session {
	tb.Helper()
	r := c.call(tb, http.MethodPost, "/v1/sessions", api.SessionRequest{TTL: ttl})
	var sess api.Session
	if err := json.Unmarshal(r.body, &sess); err != nil || r.status != http.StatusCreated {
		tb.Fatalf("create session: %s", r)
	}
	return sess
}

// acquire takes lock name with session, waiting at most wait seconds.
func (c lockClient) acquire(tb testing.TB, name string, session api.SessionID, wait float64) api.LockGrant {
	tb.Helper()
	r := c.call(tb, http.MethodPost, "/v1/locks/"+name, api.LockRequest{Session: session, Wait: wait})
	var grant api.LockGrant
	if err := json.Unmarshal(r.body, &grant); err != nil || r.status != http.StatusOK {
		tb.Fatalf("acquire %s: %s", name, r)
	}
	return grant
}

// waitSessionEnd waits until session is gone (its lease expired), as the
// lock state read that names it says: 404 session-not-found. It fails
// after a minute (a bound on a hang, not a measurement).
func (c lockClient) waitSessionEnd(tb testing.TB, lock string, session api.SessionID) {
	tb.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		r := c.call(tb, http.MethodGet, fmt.Sprintf("/v1/locks/%s?session=%s", lock, session), nil)
		if r.status == http.StatusNotFound {
			return
		}
		if r.status != http.StatusOK {
			tb.Fatalf("lock state of %s with session %s: %s", lock, session, r)
		}
	}
	tb.Fatalf("session %s still lives after a minute without keepalive", session)
}

// fenceExpiry takes lock name through c with a session that it lets
// expire, and returns the grant: its lock.expired comes from the same
// watch, in etcd's order, as any lock.expired of an earlier revision, so
// a test that sees it next on a stream has seen that none came before.
func (c lockClient) fenceExpiry(tb testing.TB, name string) api.LockGrant {
	tb.Helper()
	return c.acquire(tb, name, c.session(tb, api.MinSessionTTL).ID, 0)
}

// TestEventsLockExpired: client 1 holds a lock and stalls past its
// session's TTL while client 2 waits for the lock. The feed shows
// exactly one lock.expired, with client 1's token and session, and the
// grant to client 2: nothing else comes before client 2's release, nor
// before a later expiry (fenceExpiry).
func TestEventsLockExpired(t *testing.T) {
	e := newEventsEnv(t, gateway.Config{}, nil)
	s := subscribe(t, nil, e.url, "jobs-", "").read()
	c := lockClient{base: e.url}
	stalled := c.session(t, api.MinSessionTTL) // never kept alive
	first := c.acquire(t, "jobs-nightly", stalled.ID, 0)
	wantFields(t, s.nextDecision(t, events.KindLockGranted), map[string]any{"token": first.Token.String(), "session": stalled.ID.String()})

	waiting := c.session(t, 30)
	second := c.acquire(t, "jobs-nightly", waiting.ID, api.MaxLockWait.Seconds()) // granted once the first session expires
	if second.Token <= first.Token {
		t.Fatalf("second grant's token %d; want above the first's, %d", second.Token, first.Token)
	}
	// The expiry and the second grant are published by different
	// goroutines: either may come first.
	var expired, granted map[string]any
	for range 2 {
		m := s.next(t)
		d := m.decision(t)
		switch d["kind"] {
		case events.KindLockExpired:
			if expired != nil {
				t.Fatalf("a second lock.expired: %v", d)
			}
			expired = d
		case events.KindLockGranted:
			granted = d
		default:
			t.Fatalf("got %s %s; want lock.expired and lock.granted", m.event, m.data)
		}
	}
	if expired == nil || granted == nil {
		t.Fatalf("got expired %v, granted %v; want one of each", expired, granted)
	}
	wantFields(t, expired, map[string]any{"resource": "jobs-nightly", "token": first.Token.String(), "session": stalled.ID.String()}, "status", "identity", "holder")
	wantFields(t, granted, map[string]any{"resource": "jobs-nightly", "token": second.Token.String(), "session": waiting.ID.String()})

	if r := c.call(t, http.MethodDelete, fmt.Sprintf("/v1/locks/jobs-nightly?token=%d", second.Token), nil); r.status != http.StatusOK {
		t.Fatalf("release: %s", r)
	}
	wantFields(t, s.nextDecision(t, events.KindLockReleased), map[string]any{"token": second.Token.String()})
	fence := c.fenceExpiry(t, "jobs-fence")
	s.nextDecision(t, events.KindLockGranted)
	wantFields(t, s.nextDecision(t, events.KindLockExpired), map[string]any{"resource": "jobs-fence", "token": fence.Token.String()})
}

// revoke ends session through c: DELETE /v1/sessions/{id}, 204.
func (c lockClient) revoke(tb testing.TB, session api.SessionID) {
	tb.Helper()
	if r := c.call(tb, http.MethodDelete, "/v1/sessions/"+session.String(), nil); r.status != http.StatusNoContent {
		tb.Fatalf("revoke session %s: %s", session, r)
	}
}

// TestEventsLockReleasedIsNotExpired: a lock released by its holder is
// lock.released, and when the holder's session then expires, no
// lock.expired follows: the next events are a later grant and its expiry
// (fenceExpiry). A lock whose session is then revoked is lock.revoked,
// not lock.expired, with the grant's token and session and no identity
// (no request of the holder's lost it), and nothing follows it but a
// later grant and its expiry.
func TestEventsLockReleasedIsNotExpired(t *testing.T) {
	e := newEventsEnv(t, gateway.Config{}, nil)
	s := subscribe(t, nil, e.url, "jobs-", "").read()
	c := lockClient{base: e.url}

	released := c.session(t, api.MinSessionTTL)
	grant := c.acquire(t, "jobs-a", released.ID, 0)
	s.nextDecision(t, events.KindLockGranted)
	if r := c.call(t, http.MethodDelete, fmt.Sprintf("/v1/locks/jobs-a?token=%d", grant.Token), nil); r.status != http.StatusOK {
		t.Fatalf("release: %s", r)
	}
	wantFields(t, s.nextDecision(t, events.KindLockReleased), map[string]any{"token": grant.Token.String()})

	c.waitSessionEnd(t, "jobs-a", released.ID)
	fence := c.fenceExpiry(t, "jobs-c")
	wantFields(t, s.nextDecision(t, events.KindLockGranted), map[string]any{"resource": "jobs-c", "token": fence.Token.String()})
	wantFields(t, s.nextDecision(t, events.KindLockExpired), map[string]any{"resource": "jobs-c", "token": fence.Token.String()})

	// The expiry just seen says that the watch runs: the revoke is after
	// the revision it started from.
	revoked := c.session(t, 30)
	grant = c.acquire(t, "jobs-b", revoked.ID, 0)
	s.nextDecision(t, events.KindLockGranted)
	c.revoke(t, revoked.ID)
	wantFields(t, s.nextDecision(t, events.KindLockRevoked), map[string]any{"resource": "jobs-b", "token": grant.Token.String(), "session": revoked.ID.String()}, "status", "identity", "holder", "waiters")
	fence = c.fenceExpiry(t, "jobs-d")
	s.nextDecision(t, events.KindLockGranted)
	wantFields(t, s.nextDecision(t, events.KindLockExpired), map[string]any{"resource": "jobs-d", "token": fence.Token.String()})
}

// TestEventsLockExpiredAuthorization: with auth, a lock.expired or
// lock.revoked goes only to subscribers that may read the lock's name.
// Alice reads jobs- and sees her lock's expiry, then her lock's revoke,
// with her name as its holder; Bob reads only other-: the first event he
// gets is a later grant of other-x, without its token and session.
func TestEventsLockExpiredAuthorization(t *testing.T) {
	aliceKey, aliceAPIKey := newKey(t, "alice")
	bobKey, bobAPIKey := newKey(t, "bob")
	e := newEventsEnv(t, gateway.Config{}, nil, func(string, *tokenstore.Store) gateway.Option {
		return gateway.WithAuth(edge.Auth{
			Identities: []edge.Identity{
				{Name: "alice", Grants: []edge.Grant{
					{Prefix: "", Operations: []edge.Operation{edge.OpLock}},
					{Prefix: "jobs-", Operations: []edge.Operation{edge.OpRead}},
				}},
				{Name: "bob", Grants: []edge.Grant{{Prefix: "other-", Operations: []edge.Operation{edge.OpRead}}}},
			},
			APIKeys: []edge.APIKey{aliceAPIKey, bobAPIKey},
		})
	})
	alice := subscribe(t, nil, e.url, "", aliceKey).read()
	bob := subscribe(t, nil, e.url, "", bobKey).read()
	c := lockClient{base: e.url, key: aliceKey}

	stalled := c.session(t, api.MinSessionTTL)
	grant := c.acquire(t, "jobs-x", stalled.ID, 0)
	alice.nextDecision(t, events.KindLockGranted)
	wantFields(t, alice.nextDecision(t, events.KindLockExpired), map[string]any{"resource": "jobs-x", "token": grant.Token.String(), "session": stalled.ID.String(), "holder": "alice"})

	revoked := c.session(t, 30)
	grant = c.acquire(t, "jobs-y", revoked.ID, 0)
	alice.nextDecision(t, events.KindLockGranted)
	c.revoke(t, revoked.ID)
	wantFields(t, alice.nextDecision(t, events.KindLockRevoked), map[string]any{"resource": "jobs-y", "token": grant.Token.String(), "session": revoked.ID.String(), "holder": "alice"}, "identity")

	// Bob may read other- but not lock it: he sees the grant without
	// its token and session, as the lock API would show it to him.
	later := c.session(t, 30)
	c.acquire(t, "other-x", later.ID, 0)
	wantFields(t, bob.nextDecision(t, events.KindLockGranted), map[string]any{"resource": "other-x", "holder": "alice"}, "token", "session")
}

// newEventsGatewaySharing starts another gateway with the lock API on
// e's etcd and bucket, served over HTTP, and returns its URL.
func newEventsGatewaySharing(tb testing.TB, e *env) string {
	tb.Helper()
	e2 := &env{etcd: e.etcd, bucket: e.bucket, minio: e.minio}
	store, backend := e2.connect(tb, tokenstore.Config{RequestTimeout: 5 * time.Second})
	gw, err := gateway.New(gateway.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store, backend, gateway.WithLocks(store))
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	tb.Cleanup(srv.Close)
	return srv.URL
}

// TestEventsLockExpiredOnEachGateway: two gateways share etcd, each with
// a subscriber. A lock granted through the first and lost to its
// session's expiry is one lock.expired on each gateway's feed; a lock
// granted through the first and released through the second is none on
// either. The next event on each is a later expiry (fenceExpiry).
func TestEventsLockExpiredOnEachGateway(t *testing.T) {
	e := newEventsEnv(t, gateway.Config{}, nil)
	url2 := newEventsGatewaySharing(t, e.env)
	s1 := subscribe(t, nil, e.url, "jobs-", "").read()
	s2 := subscribe(t, nil, url2, "jobs-", "").read()
	c1, c2 := lockClient{base: e.url}, lockClient{base: url2}

	releasedSession := c1.session(t, api.MinSessionTTL)
	released := c1.acquire(t, "jobs-released", releasedSession.ID, 0)
	s1.nextDecision(t, events.KindLockGranted)
	if r := c2.call(t, http.MethodDelete, fmt.Sprintf("/v1/locks/jobs-released?token=%d", released.Token), nil); r.status != http.StatusOK {
		t.Fatalf("release through the other gateway: %s", r)
	}
	wantFields(t, s2.nextDecision(t, events.KindLockReleased), map[string]any{"token": released.Token.String()})

	stalled := c1.session(t, api.MinSessionTTL)
	grant := c1.acquire(t, "jobs-stalled", stalled.ID, 0)
	s1.nextDecision(t, events.KindLockGranted)
	want := map[string]any{"resource": "jobs-stalled", "token": grant.Token.String(), "session": stalled.ID.String()}
	wantFields(t, s1.nextDecision(t, events.KindLockExpired), want)
	wantFields(t, s2.nextDecision(t, events.KindLockExpired), want)

	c1.waitSessionEnd(t, "jobs-released", releasedSession.ID)
	fence := c2.fenceExpiry(t, "jobs-fence")
	s2.nextDecision(t, events.KindLockGranted)
	for _, s := range []*stream{s1, s2} {
		wantFields(t, s.nextDecision(t, events.KindLockExpired), map[string]any{"resource": "jobs-fence", "token": fence.Token.String()})
	}
}

// TestEventsLockRevokedOnEachGateway: two gateways share etcd, each with
// a subscriber. A session that holds a lock, revoked through the first
// gateway (DELETE /v1/sessions/{id}), is one lock.revoked on each
// gateway's feed, the second's included, which served neither the grant
// nor the revoke. The next event on each is a later expiry (fenceExpiry).
func TestEventsLockRevokedOnEachGateway(t *testing.T) {
	e := newEventsEnv(t, gateway.Config{}, nil)
	url2 := newEventsGatewaySharing(t, e.env)
	s1 := subscribe(t, nil, e.url, "jobs-", "").read()
	s2 := subscribe(t, nil, url2, "jobs-", "").read()
	c1 := lockClient{base: e.url}

	// An expiry seen on both feeds says that both watches run: the
	// revoke is after the revisions they started from.
	ready := c1.fenceExpiry(t, "jobs-ready")
	s1.nextDecision(t, events.KindLockGranted)
	for _, s := range []*stream{s1, s2} {
		wantFields(t, s.nextDecision(t, events.KindLockExpired), map[string]any{"resource": "jobs-ready", "token": ready.Token.String()})
	}

	held := c1.session(t, 30)
	grant := c1.acquire(t, "jobs-revoked", held.ID, 0)
	s1.nextDecision(t, events.KindLockGranted)
	c1.revoke(t, held.ID)
	want := map[string]any{"resource": "jobs-revoked", "token": grant.Token.String(), "session": held.ID.String()}
	for _, s := range []*stream{s1, s2} {
		wantFields(t, s.nextDecision(t, events.KindLockRevoked), want, "status", "identity", "holder", "waiters")
	}

	fence := c1.fenceExpiry(t, "jobs-fence")
	s1.nextDecision(t, events.KindLockGranted)
	for _, s := range []*stream{s1, s2} {
		wantFields(t, s.nextDecision(t, events.KindLockExpired), map[string]any{"resource": "jobs-fence", "token": fence.Token.String()})
	}
}
