package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/events"
	"fencegate/gateway"
	"fencegate/tokenstore"
)

// TestEventsLockTokensOnlyToSessionOwner: a lock event's token and
// session go to the subscribers that GET /v1/locks/{name}?session=<id>
// shows the holder's token to, and to no other. Alice, who may lock
// jobs-, holds jobs-nightly with her session; the operator (admin on
// every resource) may read any session's state; Bob may lock jobs- too,
// but not with Alice's session; the reader may only read jobs-. The
// lock API shows the token to Alice and the operator and refuses the
// others (403); the feed shows the grant, its release and the revoke of
// a later grant's session to all four, with token and session for Alice
// and the operator only.
func TestEventsLockTokensOnlyToSessionOwner(t *testing.T) {
	keys := map[string]string{}
	var apiKeys []edge.APIKey
	for _, name := range []string{"alice", "bob", "reader", "operator"} {
		key, apiKey := newKey(t, name)
		keys[name] = key
		apiKeys = append(apiKeys, apiKey)
	}
	lockRead := []edge.Operation{edge.OpLock, edge.OpRead}
	e := newEventsEnv(t, gateway.Config{}, nil, func(string, *tokenstore.Store) gateway.Option {
		return gateway.WithAuth(edge.Auth{
			Identities: []edge.Identity{
				{Name: "alice", Grants: []edge.Grant{{Prefix: "jobs-", Operations: lockRead}}},
				{Name: "bob", Grants: []edge.Grant{{Prefix: "jobs-", Operations: lockRead}}},
				{Name: "reader", Grants: []edge.Grant{{Prefix: "jobs-", Operations: []edge.Operation{edge.OpRead}}}},
				{Name: "operator", Grants: []edge.Grant{{Prefix: "", Operations: []edge.Operation{edge.OpAdmin}}}},
			},
			APIKeys: apiKeys,
		})
	})
	sees := map[string]bool{"alice": true, "operator": true, "bob": false, "reader": false}
	streams := map[string]*stream{}
	for name := range sees {
		streams[name] = subscribe(t, nil, e.url, "jobs-", keys[name]).read()
	}
	alice := lockClient{base: e.url, key: keys["alice"]}
	session := alice.session(t, 30)
	grant := alice.acquire(t, "jobs-nightly", session.ID, 0)

	// The lock API's rule, which the feed must follow.
	for name, want := range sees {
		r := lockClient{base: e.url, key: keys[name]}.call(t, http.MethodGet, fmt.Sprintf("/v1/locks/jobs-nightly?session=%s", session.ID), nil)
		var state api.LockState
		_ = json.Unmarshal(r.body, &state)
		if got := r.status == http.StatusOK && state.Holder == grant.Token; got != want {
			t.Errorf("GET /v1/locks/jobs-nightly?session= as %s: %s; shows the token: %v, want %v", name, r, got, want)
		}
	}

	if r := alice.call(t, http.MethodDelete, fmt.Sprintf("/v1/locks/jobs-nightly?token=%d", grant.Token), nil); r.status != http.StatusOK {
		t.Fatalf("release: %s", r)
	}
	later := alice.session(t, 30)
	revoked := alice.acquire(t, "jobs-weekly", later.ID, 0)
	alice.revoke(t, later.ID)

	wants := []struct {
		kind, resource string
		token          api.Token
		session        api.SessionID
	}{
		{events.KindLockGranted, "jobs-nightly", grant.Token, session.ID},
		{events.KindLockReleased, "jobs-nightly", grant.Token, 0},
		{events.KindLockGranted, "jobs-weekly", revoked.Token, later.ID},
		{events.KindLockRevoked, "jobs-weekly", revoked.Token, later.ID},
	}
	for name, stream := range streams {
		// A grant's event goes out once its waiters are read, after the
		// decision (publishLock): a revoke right after it may come
		// first. The four are taken in the order they come.
		got := map[string]map[string]any{}
		for range wants {
			d := stream.nextDecision(t, "")
			got[fmt.Sprint(d["kind"], " ", d["resource"])] = d
		}
		for _, want := range wants {
			d, ok := got[want.kind+" "+want.resource]
			if !ok {
				t.Errorf("%s got no %s of %s; got %v", name, want.kind, want.resource, got)
				continue
			}
			if d["holder"] != "alice" {
				t.Errorf("%s got %v; want %s of %s held by alice", name, d, want.kind, want.resource)
			}
			if !sees[name] {
				wantFields(t, d, nil, "token", "session")
				continue
			}
			fields := map[string]any{"token": want.token.String()}
			if want.session != 0 {
				fields["session"] = want.session.String()
			}
			wantFields(t, d, fields)
		}
	}
}
