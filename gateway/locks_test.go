package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/gateway"
	"fencegate/rest"
	"fencegate/tokenstore"
)

// tokenstore.Store is the gateway's lock service.
var _ rest.LockService = (*tokenstore.Store)(nil)

// newLockEnv starts etcd, a bucket, and a gateway with the lock API whose
// token store applies the policies that policies makes for the bucket.
func newLockEnv(tb testing.TB, policies func(bucket string) []tokenstore.Policy) *env {
	tb.Helper()
	e := newStackEnv(tb)
	var ps []tokenstore.Policy
	if policies != nil {
		ps = policies(e.bucket)
	}
	store, backend := e.connect(tb, tokenstore.Config{RequestTimeout: 5 * time.Second, Policies: ps})
	gw, err := gateway.New(gateway.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store, backend, gateway.WithLocks(store))
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	tb.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// call sends a JSON request (body nil: none) and decodes a 2xx JSON
// answer into out, when out is not nil.
func call(tb testing.TB, method, url string, body any, out any) result {
	tb.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			tb.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		tb.Fatal(err)
	}
	r := send(tb, req)
	if out != nil && r.status < 300 {
		if err := json.Unmarshal(r.body, out); err != nil {
			tb.Fatalf("%s %s: answer %q: %v", method, url, r.body, err)
		}
	}
	return r
}

func (e *env) newSession(tb testing.TB, ttl int64) api.Session {
	tb.Helper()
	var s api.Session
	if r := call(tb, http.MethodPost, e.url+"/v1/sessions", api.SessionRequest{TTL: ttl}, &s); r.status != http.StatusCreated {
		tb.Fatalf("POST /v1/sessions: %s", r)
	}
	return s
}

func (e *env) acquire(tb testing.TB, name string, session api.SessionID, wait float64) (api.LockGrant, result) {
	tb.Helper()
	var g api.LockGrant
	r := call(tb, http.MethodPost, e.url+"/v1/locks/"+name, api.LockRequest{Session: session, Wait: wait}, &g)
	return g, r
}

func (e *env) lockState(tb testing.TB, name string) api.LockState {
	tb.Helper()
	return e.lockStateWith(tb, name, 0)
}

// lockStateWith reads lock name's state naming session (0: none), which
// shows the holder's token when session holds the lock.
func (e *env) lockStateWith(tb testing.TB, name string, session api.SessionID) api.LockState {
	tb.Helper()
	target := e.url + "/v1/locks/" + name
	if session != 0 {
		target += "?session=" + session.String()
	}
	var st api.LockState
	if r := call(tb, http.MethodGet, target, nil, &st); r.status != http.StatusOK {
		tb.Fatalf("GET %s: %s", target, r)
	}
	return st
}

// waitLockQueue polls GET /v1/locks/{name} until the queue has n keys.
func (e *env) waitLockQueue(tb testing.TB, name string, n int64) api.LockState {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := e.lockState(tb, name)
		if st.QueueLength == n {
			return st
		}
		if time.Now().After(deadline) {
			tb.Fatalf("lock %s: %+v after 30s; want queue length %d", name, st, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLockAPI(t *testing.T) {
	e := newLockEnv(t, nil)
	first := e.newSession(t, 10)
	if first.TTL < 10 || first.ID == 0 {
		t.Fatalf("session = %+v; want ttl >= 10", first)
	}
	var kept api.Session
	if r := call(t, http.MethodPost, e.url+"/v1/sessions/"+first.ID.String()+"/keepalive", nil, &kept); r.status != http.StatusOK || kept.ID != first.ID || kept.TTL < 10 {
		t.Fatalf("keepalive: %s", r)
	}
	if def := e.newSession(t, 0); def.TTL < api.DefaultSessionTTL {
		t.Fatalf("session with ttl 0 = %+v; want the default %d", def, api.DefaultSessionTTL)
	}

	grant, r := e.acquire(t, "job", first.ID, 5)
	if r.status != http.StatusOK || grant.Name != "job" || grant.Session != first.ID || grant.Token == 0 {
		t.Fatalf("acquire: %s", r)
	}
	if st := e.lockStateWith(t, "job", first.ID); st.Holder != grant.Token || !st.Held || st.QueueLength != 1 || st.Name != "job" {
		t.Fatalf("lock state = %+v; want holder %d, queue 1", st, grant.Token)
	}
	if again, r := e.acquire(t, "job", first.ID, 0); r.status != http.StatusOK || again.Token != grant.Token {
		t.Fatalf("acquire again with the same session: %s; want token %d", r, grant.Token)
	}

	second := e.newSession(t, 10)
	_, r = e.acquire(t, "job", second.ID, 0)
	wantProblem(t, r, http.StatusConflict, "lock-timeout")
	if !r.problem.Retryable {
		t.Errorf("lock-timeout problem not retryable: %s", r)
	}
	_, r = e.acquire(t, "job", second.ID, 0.2)
	wantProblem(t, r, http.StatusConflict, "lock-timeout")
	if st := e.lockState(t, "job"); st.QueueLength != 1 {
		t.Fatalf("lock state after timed-out waits = %+v; want the holder alone", st)
	}

	release := e.url + "/v1/locks/job?token=" + grant.Token.String()
	var rel api.LockRelease
	if r := call(t, http.MethodDelete, release, nil, &rel); r.status != http.StatusOK || !rel.Released || rel.Token != grant.Token {
		t.Fatalf("release: %s", r)
	}
	next, r := e.acquire(t, "job", second.ID, 5)
	if r.status != http.StatusOK || next.Token <= grant.Token {
		t.Fatalf("acquire after release: %s; want a token above %d", r, grant.Token)
	}
	if r := call(t, http.MethodDelete, release, nil, &rel); r.status != http.StatusOK || rel.Released {
		t.Fatalf("retried release: %s; want released false", r)
	}
	if st := e.lockStateWith(t, "job", second.ID); st.Holder != next.Token {
		t.Fatalf("a retried release touched the new holder: %+v", st)
	}

	if r := call(t, http.MethodDelete, e.url+"/v1/sessions/"+second.ID.String(), nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("revoke: %s", r)
	}
	if st := e.lockState(t, "job"); st.Held || st.QueueLength != 0 {
		t.Fatalf("lock state after revoking the holder's session = %+v; want free", st)
	}
	r = call(t, http.MethodDelete, e.url+"/v1/sessions/"+second.ID.String(), nil, nil)
	wantProblem(t, r, http.StatusNotFound, "session-not-found")
	r = call(t, http.MethodPost, e.url+"/v1/sessions/"+second.ID.String()+"/keepalive", nil, nil)
	wantProblem(t, r, http.StatusNotFound, "session-not-found")
	_, r = e.acquire(t, "job", second.ID, 0)
	wantProblem(t, r, http.StatusNotFound, "session-not-found")
}

// TestLockAPILongPoll: a waiter's request is answered when the holder
// releases, with a larger token.
func TestLockAPILongPoll(t *testing.T) {
	e := newLockEnv(t, nil)
	holder, r := e.acquire(t, "job", e.newSession(t, 30).ID, 0)
	if r.status != http.StatusOK {
		t.Fatalf("acquire: %s", r)
	}
	waiter := e.newSession(t, 30)
	done := make(chan api.LockGrant, 1)
	go func() {
		var g api.LockGrant
		body, _ := json.Marshal(api.LockRequest{Session: waiter.ID, Wait: 50})
		resp, err := http.Post(e.url+"/v1/locks/job", "application/json", bytes.NewReader(body))
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&g)
			resp.Body.Close()
		}
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		done <- g
	}()
	e.waitLockQueue(t, "job", 2)
	select {
	case g := <-done:
		t.Fatalf("waiter answered %+v while the lock is held", g)
	case <-time.After(200 * time.Millisecond):
	}
	call(t, http.MethodDelete, fmt.Sprintf("%s/v1/locks/job?token=%d", e.url, holder.Token), nil, nil)
	if g := <-done; g.Token <= holder.Token || g.Session != waiter.ID {
		t.Fatalf("waiter's grant %+v; want a token above %d for session %s", g, holder.Token, waiter.ID)
	}
}

func TestLockAPIBadRequests(t *testing.T) {
	e := newLockEnv(t, nil)
	session := e.newSession(t, 10).ID.String()
	tests := []struct {
		name, method, path, body string
		status                   int
		slug                     string
	}{
		{"ttl too large", "POST", "/v1/sessions", `{"ttl": 3601}`, 400, "invalid-request"},
		{"negative ttl", "POST", "/v1/sessions", `{"ttl": -1}`, 400, "invalid-request"},
		{"ttl not a number", "POST", "/v1/sessions", `{"ttl": "10"}`, 400, "invalid-request"},
		{"unknown field", "POST", "/v1/sessions", `{"tll": 10}`, 400, "invalid-request"},
		{"trailing data", "POST", "/v1/sessions", `{"ttl": 10} {}`, 400, "invalid-request"},
		// Members are matched as documented, once each: encoding/json
		// alone would take "TTL", the long s of "\u017fession" for the
		// s of "session", and the last of two.
		{"member in upper case", "POST", "/v1/sessions", `{"TTL": 10}`, 400, "invalid-request"},
		{"member twice", "POST", "/v1/sessions", `{"ttl": 10, "ttl": 3600}`, 400, "invalid-request"},
		{"member twice, two cases", "POST", "/v1/sessions", `{"ttl": 10, "Ttl": 3600}`, 400, "invalid-request"},
		{"acquire session twice", "POST", "/v1/locks/job", `{"session": "` + session + `", "session": "7fffffffffffffff"}`, 400, "invalid-request"},
		{"acquire long s", "POST", "/v1/locks/job", `{"\u017fession": "` + session + `"}`, 400, "invalid-request"},
		{"huge body", "POST", "/v1/sessions", `{"ttl": 10` + strings.Repeat(" ", 5000) + `}`, 413, "body-too-large"},
		{"keepalive bad id", "POST", "/v1/sessions/XYZ/keepalive", "", 400, "invalid-request"},
		{"keepalive leading zero", "POST", "/v1/sessions/0" + session + "/keepalive", "", 400, "invalid-request"},
		{"keepalive unknown", "POST", "/v1/sessions/7fffffffffffffff/keepalive", "", 404, "session-not-found"},
		{"revoke bad id", "DELETE", "/v1/sessions/-1", "", 400, "invalid-request"},
		{"acquire no body", "POST", "/v1/locks/job", "", 400, "invalid-request"},
		{"acquire no session", "POST", "/v1/locks/job", `{"wait": 1}`, 400, "invalid-request"},
		{"acquire bad session", "POST", "/v1/locks/job", `{"session": "0x12"}`, 400, "invalid-request"},
		{"acquire numeric session", "POST", "/v1/locks/job", `{"session": 12}`, 400, "invalid-request"},
		{"acquire wait too long", "POST", "/v1/locks/job", `{"session": "` + session + `", "wait": 61}`, 400, "invalid-request"},
		{"acquire negative wait", "POST", "/v1/locks/job", `{"session": "` + session + `", "wait": -1}`, 400, "invalid-request"},
		{"acquire bad name", "POST", "/v1/locks/a%2Fb", `{"session": "` + session + `"}`, 400, "invalid-request"},
		{"acquire dot dot", "POST", "/v1/locks/..", `{"session": "` + session + `"}`, 400, "invalid-request"},
		{"acquire unknown session", "POST", "/v1/locks/job", `{"session": "7fffffffffffffff"}`, 404, "session-not-found"},
		{"release no token", "DELETE", "/v1/locks/job", "", 400, "invalid-request"},
		{"release bad token", "DELETE", "/v1/locks/job?token=abc", "", 400, "malformed-token"},
		{"release two tokens", "DELETE", "/v1/locks/job?token=1&token=2", "", 400, "malformed-token"},
		{"release token zero", "DELETE", "/v1/locks/job?token=0", "", 400, "malformed-token"},
		{"state bad name", "GET", "/v1/locks/a%20b", "", 400, "invalid-request"},
		{"state long name", "GET", "/v1/locks/" + strings.Repeat("x", api.MaxLockNameBytes+1), "", 400, "invalid-request"},
		{"wrong method", "PUT", "/v1/locks/job", "", 405, "method-not-allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, e.url+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			wantProblem(t, send(t, req), tt.status, tt.slug)
		})
	}
	if st := e.lockState(t, "job"); st.QueueLength != 0 {
		t.Fatalf("bad requests left %+v", st)
	}
}

// TestHeldPolicyRefusesExpiredSession: under "held", a writer whose session
// expired is refused with 409 lock-not-held although nobody else acquired;
// nothing reaches S3, and the object keeps the holder's earlier write.
func TestHeldPolicyRefusesExpiredSession(t *testing.T) {
	e := newLockEnv(t, func(bucket string) []tokenstore.Policy {
		return []tokenstore.Policy{{Prefix: api.Resource("s3/" + bucket + "/"), Check: tokenstore.CheckHeld, Lock: "report"}}
	})
	grant, r := e.acquire(t, "report", e.newSession(t, 1).ID, 0) // never kept alive
	if r.status != http.StatusOK {
		t.Fatalf("acquire: %s", r)
	}
	if r := e.put(t, "report.csv", grant.Token, "while held"); r.status != http.StatusCreated {
		t.Fatalf("write while held: %s", r)
	}
	e.waitLockQueue(t, "report", 0) // the session expired; nobody acquired
	puts := e.s3.CountMethod(http.MethodPut)
	r = e.put(t, "report.csv", grant.Token, "after expiry")
	wantProblem(t, r, http.StatusConflict, "lock-not-held")
	if got := e.s3.CountMethod(http.MethodPut); got != puts {
		t.Errorf("%d PUTs reached S3 for a refused write", got-puts)
	}
	if body, token, _ := e.stored(t, "report.csv"); body != "while held" || token != grant.Token.String() {
		t.Fatalf("S3 holds %q with token %q; want the write made while held", body, token)
	}
	wantProblem(t, e.delete(t, "report.csv", grant.Token), http.StatusConflict, "lock-not-held")
	// A token from elsewhere (an etcd revision the lock never granted)
	// is refused too.
	wantProblem(t, e.put(t, "report.csv", grant.Token+1, "stranger"), http.StatusConflict, "lock-not-held")
}

// TestPlausiblePolicyRefusesFutureToken: under "plausible", etcd's current
// revision + 1000 is refused with 400 implausible-token, raising nothing;
// without the check that one write would lock the object out for ever.
func TestPlausiblePolicyRefusesFutureToken(t *testing.T) {
	e := newLockEnv(t, func(bucket string) []tokenstore.Policy {
		return []tokenstore.Policy{{Prefix: api.Resource("s3/" + bucket + "/"), Check: tokenstore.CheckPlausible}}
	})
	resp, err := e.etcd.Client(t).Put(context.Background(), "unrelated", "x")
	if err != nil {
		t.Fatal(err)
	}
	future := api.Token(resp.Header.Revision + 1000)
	r := e.put(t, "k", future, "forged")
	wantProblem(t, r, http.StatusBadRequest, "implausible-token")
	if e.s3.CountMethod(http.MethodPut) != 0 {
		t.Error("a PUT reached S3 for an implausible token")
	}
	var fence api.Fence
	if r := call(t, http.MethodGet, e.url+"/v1/fences/s3/"+e.bucket+"/k", nil, &fence); r.status != 200 || fence.HighWaterMark != 0 {
		t.Fatalf("fence after refusal: %s; want 0", r)
	}
	if r := e.put(t, "k", api.Token(resp.Header.Revision), "real"); r.status != http.StatusCreated {
		t.Fatalf("write with the current revision: %s", r)
	}
}

// TestTokenChecksAddNoEtcdRoundTrip counts etcd requests per accepted write
// through the gateway, in buckets under none, plausible and held: one each
// (the fence-check transaction).
func TestTokenChecksAddNoEtcdRoundTrip(t *testing.T) {
	e := newLockEnv(t, func(bucket string) []tokenstore.Policy {
		return []tokenstore.Policy{
			{Prefix: api.Resource("s3/" + bucket + "/plausible/"), Check: tokenstore.CheckPlausible},
			{Prefix: api.Resource("s3/" + bucket + "/held/"), Check: tokenstore.CheckHeld, Lock: "writer"},
		}
	})
	grant, r := e.acquire(t, "writer", e.newSession(t, 60).ID, 0)
	if r.status != http.StatusOK {
		t.Fatalf("acquire: %s", r)
	}
	const writes = 10
	for _, dir := range []string{"none", "plausible", "held"} {
		before := e.etcdCalls.Count()
		for i := range writes {
			if r := e.put(t, dir+"/k", grant.Token, fmt.Sprint(i)); r.status >= 300 {
				t.Fatalf("%s write %d: %s", dir, i, r)
			}
		}
		got := e.etcdCalls.Count() - before
		t.Logf("%s: %d etcd requests for %d accepted writes", dir, got, writes)
		if got != writes {
			t.Errorf("%s: %d etcd requests for %d accepted writes; want %d", dir, got, writes, writes)
		}
	}
}

// TestRandomLockValueIsNotAToken: the random value of a Redis SET NX lock
// (or Redlock) cannot be ordered, and the gateway refuses it as a malformed
// token.
func TestRandomLockValueIsNotAToken(t *testing.T) {
	e := newLockEnv(t, nil)
	for _, v := range []string{"7f3c9a1e-5d2b-4c8f-9e1a-2b3c4d5e6f70", "my-process:8d1f03", "f81d4fae7dec11d0a76500a0c91e6bf6"} {
		r := do(t, http.MethodPut, e.objectURL("k"), []string{v}, []byte("x"))
		wantProblem(t, r, http.StatusBadRequest, "malformed-token")
	}
	if e.s3.Count() != 0 {
		t.Errorf("%d requests reached S3", e.s3.Count())
	}
}

// TestLockAPIFailsClosed: with etcd stopped, the lock API answers 503
// fence-unavailable with Retry-After, never a grant.
func TestLockAPIFailsClosed(t *testing.T) {
	e := newLockEnv(t, nil)
	session := e.newSession(t, 30)
	e.etcd.Stop(t)
	_, r := e.acquire(t, "job", session.ID, 1)
	wantProblem(t, r, http.StatusServiceUnavailable, "fence-unavailable")
	if r.header.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After: %v", r.header)
	}
	r = call(t, http.MethodPost, e.url+"/v1/sessions", api.SessionRequest{TTL: 5}, nil)
	wantProblem(t, r, http.StatusServiceUnavailable, "fence-unavailable")
}

// TestLockAPIServesInArrivalOrder queues 30 acquirers over HTTP long polls,
// one after another: the grants come in arrival order with increasing
// tokens, and each release wakes exactly one waiter (29 wake-ups).
func TestLockAPIServesInArrivalOrder(t *testing.T) {
	e := newLockEnv(t, nil)
	const n = 30
	before := e.store.LockStats().Wakeups
	grants := make(chan int, n) // arrival index, in grant order
	tokens := make([]api.Token, n)
	done := make(chan struct{})
	allQueued := make(chan struct{})
	for i := range n {
		session := e.newSession(t, 60).ID
		go func() {
			defer func() { done <- struct{}{} }()
			body, _ := json.Marshal(api.LockRequest{Session: session, Wait: 50})
			resp, err := http.Post(e.url+"/v1/locks/job", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Errorf("acquirer %d: %v", i, err)
				return
			}
			var g api.LockGrant
			err = json.NewDecoder(resp.Body).Decode(&g)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("acquirer %d: %s, %v", i, resp.Status, err)
				return
			}
			tokens[i] = g.Token
			grants <- i
			if i == 0 {
				<-allQueued // hold until everyone is queued
			}
			req, _ := http.NewRequest(http.MethodDelete, fmt.Sprintf("%s/v1/locks/job?token=%d", e.url, g.Token), nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		e.waitLockQueue(t, "job", int64(i+1))
	}
	close(allQueued)
	for range n {
		<-done
	}
	close(grants)
	want := 0
	for i := range grants {
		if i != want {
			t.Fatalf("grant %d went to acquirer %d; want arrival order", want, i)
		}
		if i > 0 && tokens[i] <= tokens[i-1] {
			t.Fatalf("token %d after %d; want increasing", tokens[i], tokens[i-1])
		}
		want++
	}
	if got := e.store.LockStats().Wakeups - before; got != n-1 {
		t.Fatalf("%d wake-ups for %d grants; want %d", got, n, n-1)
	}
}

// TestLockStateHidesHolderToken: GET /v1/locks/{name} says whether the
// lock is held and how long its queue is, but the holder's token, all that
// a write behind a held token check needs, goes only to a request that
// names the holder's session (?session=<id>) and may use it: its owner, or
// an operator, who could get the token back by acquiring with it anyway.
// Another identity naming that session is refused, as for every session
// call; a session that does not hold the lock gets no token.
func TestLockStateHidesHolderToken(t *testing.T) {
	aliceKey, aliceAPIKey := newKey(t, "alice")
	bobKey, bobAPIKey := newKey(t, "bob")
	opsKey, opsAPIKey := newKey(t, "ops")
	a := newAuthEnv(t, func(string) edge.Auth {
		lock := []edge.Grant{{Prefix: "jobs-", Operations: []edge.Operation{edge.OpLock}}}
		return edge.Auth{
			Identities: []edge.Identity{
				{Name: "alice", Grants: lock},
				{Name: "bob", Grants: lock},
				{Name: "ops", Grants: []edge.Grant{{Operations: []edge.Operation{edge.OpAdmin}}}},
			},
			APIKeys: []edge.APIKey{aliceAPIKey, bobAPIKey, opsAPIKey},
		}
	})
	a.serve(t)
	newSession := func(key string) api.SessionID {
		r := (authRequest{name: "session", method: http.MethodPost, path: "/v1/sessions", key: key, body: api.SessionRequest{TTL: 60}, status: 201}).run(t, a, nil)
		var s api.Session
		if err := json.Unmarshal(r.body, &s); err != nil || s.ID == 0 {
			t.Fatalf("session: %s", r)
		}
		return s.ID
	}
	holding, idle := newSession(aliceKey), newSession(aliceKey)
	r := (authRequest{name: "alice acquires", method: http.MethodPost, path: "/v1/locks/jobs-nightly", key: aliceKey, body: api.LockRequest{Session: holding}, status: 200}).run(t, a, nil)
	var grant api.LockGrant
	if err := json.Unmarshal(r.body, &grant); err != nil || grant.Token == 0 {
		t.Fatalf("grant: %s", r)
	}
	const path = "/v1/locks/jobs-nightly"
	withSession := func(id api.SessionID) string { return path + "?session=" + id.String() }
	for _, q := range []struct {
		name, key, path string
		holder          api.Token // 0: the answer has no holder token
	}{
		{"bob, no session", bobKey, path, 0},
		{"alice, no session", aliceKey, path, 0},
		{"alice, a session that does not hold it", aliceKey, withSession(idle), 0},
		{"alice, the holder's session", aliceKey, withSession(holding), grant.Token},
		{"an operator, the holder's session", opsKey, withSession(holding), grant.Token},
	} {
		r := (authRequest{name: q.name, method: http.MethodGet, path: q.path, key: q.key, status: 200}).run(t, a, nil)
		var answer map[string]any
		if err := json.Unmarshal(r.body, &answer); err != nil {
			t.Fatalf("%s: %s: %v", q.name, r, err)
		}
		holder, shown := answer["holder"]
		switch {
		case q.holder == 0 && shown:
			t.Errorf("%s: GET %s = %s; want no holder token", q.name, q.path, r.body)
		case q.holder != 0 && (!shown || holder != float64(q.holder)):
			t.Errorf("%s: GET %s = %s; want holder %d", q.name, q.path, r.body, q.holder)
		case answer["held"] != true || answer["queue_length"] != float64(1):
			t.Errorf("%s: GET %s = %s; want held, queue length 1", q.name, q.path, r.body)
		}
	}
	for _, q := range []authRequest{
		{name: "bob, alice's session", method: http.MethodGet, path: withSession(holding), key: bobKey, status: 403, slug: "forbidden", detail: "the session belongs to another identity"},
		{name: "alice, no such session", method: http.MethodGet, path: withSession(0x7eadbeef), key: aliceKey, status: 404, slug: "session-not-found"},
		{name: "alice, a malformed session", method: http.MethodGet, path: path + "?session=00x", key: aliceKey, status: 400, slug: "invalid-request", unreached: true},
	} {
		q.run(t, a, nil)
	}
	(authRequest{name: "alice releases", method: http.MethodDelete, path: fmt.Sprintf("%s?token=%d", path, grant.Token), key: aliceKey, status: 200}).run(t, a, nil)
	r = (authRequest{name: "state when free", method: http.MethodGet, path: withSession(holding), key: aliceKey, status: 200}).run(t, a, nil)
	if got := string(r.body); got != `{"name":"jobs-nightly","held":false,"queue_length":0}`+"\n" {
		t.Errorf("GET %s when free = %s; want held false, queue empty, no holder", withSession(holding), got)
	}
}
