package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/events"
	"fencegate/gateway"
	"fencegate/tokenstore"
)

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

// TestEventsLockExpired: client 1 holds a lock and stalls past its
// session's TTL while client 2 waits for the lock. The feed shows
// exactly one lock.expired, with client 1's token and session, and the
// grant to client 2: nothing else comes before client 2's release.
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
}

// TestEventsLockReleasedIsNotExpired: a lock released by its holder is
// lock.released, and when the holder's session then expires, no
// lock.expired follows; a lock whose session is revoked is no
// lock.expired either. The next event after all of that is a later
// grant.
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

	revoked := c.session(t, 30)
	c.acquire(t, "jobs-b", revoked.ID, 0)
	s.nextDecision(t, events.KindLockGranted)
	if r := c.call(t, http.MethodDelete, "/v1/sessions/"+revoked.ID.String(), nil); r.status != http.StatusNoContent {
		t.Fatalf("revoke: %s", r)
	}

	c.waitSessionEnd(t, "jobs-a", released.ID)
	later := c.session(t, 30)
	last := c.acquire(t, "jobs-c", later.ID, 0)
	wantFields(t, s.nextDecision(t, events.KindLockGranted), map[string]any{"resource": "jobs-c", "token": last.Token.String()})
}

// TestEventsLockExpiredAuthorization: with auth, a lock.expired goes
// only to subscribers that may read the lock's name. Alice reads jobs-
// and sees her lock's expiry with her name as its holder; Bob reads only
// other-: the first event he gets is a later grant of other-x.
func TestEventsLockExpiredAuthorization(t *testing.T) {
	aliceKey, aliceAPIKey := newKey(t, "alice")
	bobKey, bobAPIKey := newKey(t, "bob")
	e := newEventsEnv(t, gateway.Config{}, nil, func(string, *tokenstore.Store) gateway.Option {
		return gateway.WithAuth(gateway.Auth{
			Identities: []gateway.Identity{
				{Name: "alice", Grants: []gateway.Grant{
					{Prefix: "", Operations: []gateway.Operation{gateway.OpLock}},
					{Prefix: "jobs-", Operations: []gateway.Operation{gateway.OpRead}},
				}},
				{Name: "bob", Grants: []gateway.Grant{{Prefix: "other-", Operations: []gateway.Operation{gateway.OpRead}}}},
			},
			APIKeys: []gateway.APIKey{aliceAPIKey, bobAPIKey},
		})
	})
	alice := subscribe(t, nil, e.url, "", aliceKey).read()
	bob := subscribe(t, nil, e.url, "", bobKey).read()
	c := lockClient{base: e.url, key: aliceKey}

	stalled := c.session(t, api.MinSessionTTL)
	grant := c.acquire(t, "jobs-x", stalled.ID, 0)
	alice.nextDecision(t, events.KindLockGranted)
	wantFields(t, alice.nextDecision(t, events.KindLockExpired), map[string]any{"resource": "jobs-x", "token": grant.Token.String(), "session": stalled.ID.String(), "holder": "alice"})

	later := c.session(t, 30)
	other := c.acquire(t, "other-x", later.ID, 0)
	wantFields(t, bob.nextDecision(t, events.KindLockGranted), map[string]any{"resource": "other-x", "token": other.Token.String()})
}
