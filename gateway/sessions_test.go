package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/gateway"
	"fencegate/partners"
	"fencegate/tokenstore"
)

// heldPartner is a partner API whose first request stays upstream until
// the test lets it go; later requests answer at once. It counts requests
// and the most it had upstream at the same time.
type heldPartner struct {
	*httptest.Server
	arrived chan struct{} // receives once, when the first request arrives
	letGo   func()

	mu          sync.Mutex
	calls       int
	upstream    int
	maxUpstream int
}

func newHeldPartner(tb testing.TB) *heldPartner {
	tb.Helper()
	p := &heldPartner{arrived: make(chan struct{}, 1)}
	release := make(chan struct{})
	p.letGo = sync.OnceFunc(func() { close(release) })
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		p.mu.Lock()
		p.calls++
		first := p.calls == 1
		p.upstream++
		p.maxUpstream = max(p.maxUpstream, p.upstream)
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			p.upstream--
			p.mu.Unlock()
		}()
		if first {
			p.arrived <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"charged":true}`)
	}))
	tb.Cleanup(p.Close)
	tb.Cleanup(p.letGo) // runs before Close
	return p
}

// counts returns the requests the partner got, and the most it had
// upstream at once.
func (p *heldPartner) counts() (calls, maxUpstream int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls, p.maxUpstream
}

// onlyKey reads the one etcd key under prefix, failing unless there is
// exactly one.
func onlyKey(tb testing.TB, client *clientv3.Client, prefix string) (key string, lease int64) {
	tb.Helper()
	resp, err := client.Get(context.Background(), prefix, clientv3.WithPrefix())
	if err != nil {
		tb.Fatalf("reading %s: %v", prefix, err)
	}
	if len(resp.Kvs) != 1 {
		tb.Fatalf("%d keys under %s; want 1", len(resp.Kvs), prefix)
	}
	return string(resp.Kvs[0].Key), resp.Kvs[0].Lease
}

// TestSessionAPIRefusesOtherLeases: the session API acts only on sessions
// that fencegate created, whatever other etcd leases exist. The lease of a
// partner request in flight and the retention lease of completed
// idempotency records are leases too, with guessable ids: for every
// caller (no auth, an identity with a lock grant, an operator), keepalive,
// acquire and revoke with their ids answer 404 session-not-found and leave
// them alone. The in-flight marker stays while its request is upstream, so
// a second request for the resource is refused busy and the partner never
// has two at once; the stored answer stays replayable.
func TestSessionAPIRefusesOtherLeases(t *testing.T) {
	lockerKey, lockerAPIKey := newKey(t, "locker")
	opsKey, opsAPIKey := newKey(t, "ops")
	withAuth := func(string) edge.Auth {
		return edge.Auth{
			Identities: []edge.Identity{
				{Name: "locker", Grants: []edge.Grant{
					{Prefix: "jobs-", Operations: []edge.Operation{edge.OpLock}},
					{Prefix: "partner/", Operations: []edge.Operation{edge.OpWrite}},
				}},
				{Name: "ops", Grants: []edge.Grant{{Operations: []edge.Operation{edge.OpAdmin}}}},
			},
			APIKeys: []edge.APIKey{lockerAPIKey, opsAPIKey},
		}
	}
	withoutAuth := func(string) edge.Auth { return edge.Auth{} }
	for _, caller := range []struct {
		name string
		auth func(string) edge.Auth
		key  string // bearer key; "" sends none
	}{
		{"no auth", withoutAuth, ""},
		{"an identity with a lock grant", withAuth, lockerKey},
		{"an operator", withAuth, opsKey},
	} {
		t.Run(caller.name, func(t *testing.T) {
			partner := newHeldPartner(t)
			route := payRoute(t, partner.URL)
			route.Timeout = time.Minute // the test lets the request go
			route.MaxWait = 100 * time.Millisecond
			a := newAuthEnv(t, caller.auth, func(store *tokenstore.Store) gateway.Option {
				partnerStore, err := tokenstore.NewPartners(store)
				if err != nil {
					t.Fatal(err)
				}
				return gateway.WithPartners([]partners.PartnerRoute{route}, partnerStore, nil)
			})
			a.serve(t)
			t.Cleanup(partner.letGo) // before the gateway's server waits for its requests
			etcd := a.etcd.Client(t)
			header := http.Header{}
			if caller.key != "" {
				header.Set("Authorization", "Bearer "+caller.key)
			}
			charge := partnerReq{path: "pay/accounts/a1/charges", token: 5, key: "order-1", body: `{"amount":5}`, header: header}

			first := make(chan result, 1)
			go func() { first <- partnerDo(t, a.url, charge) }()
			<-partner.arrived
			marker, inFlight := onlyKey(t, etcd, "fencegate/inflight/")
			if inFlight == 0 {
				t.Fatalf("the in-flight marker %s has no lease", marker)
			}
			a.refusedAsNoSession(t, caller.key, inFlight, "the in-flight lease")
			if _, lease := onlyKey(t, etcd, "fencegate/inflight/"); lease != inFlight || !leaseLives(t, etcd, inFlight) {
				t.Fatalf("the in-flight marker is on lease %x (alive %v); want %x, alive", lease, leaseLives(t, etcd, inFlight), inFlight)
			}
			second := partnerDo(t, a.url, partnerReq{path: "pay/accounts/a1/charges", token: 6, header: header})
			if calls, most := partner.counts(); calls != 1 || most != 1 {
				t.Fatalf("while the first request is upstream, a second got %s and the partner %d requests (%d at once); want it refused busy, one request", second, calls, most)
			}
			wantProblem(t, second, http.StatusServiceUnavailable, "resource-busy")

			partner.letGo()
			if r := <-first; r.status != http.StatusCreated {
				t.Fatalf("the held request = %s; want 201", r)
			}
			record, retention := onlyKey(t, etcd, "fencegate/idem/")
			if retention == 0 || retention == inFlight {
				t.Fatalf("the completed record %s is on lease %x; want a retention lease", record, retention)
			}
			a.refusedAsNoSession(t, caller.key, retention, "the retention lease")
			if _, lease := onlyKey(t, etcd, "fencegate/idem/"); lease != retention || !leaseLives(t, etcd, retention) {
				t.Fatalf("the record is on lease %x (alive %v); want %x, alive", lease, leaseLives(t, etcd, retention), retention)
			}
			if r := partnerDo(t, a.url, charge); r.status != http.StatusCreated || !replayed(r) {
				t.Fatalf("the retry of order-1 = %s (replayed %v); want the stored 201 replayed", r, replayed(r))
			}
			if calls, most := partner.counts(); calls != 1 || most != 1 {
				t.Fatalf("the partner got %d requests (%d at once); want 1", calls, most)
			}
		})
	}
}

// refusedAsNoSession checks that keepalive, acquire and revoke with lease,
// which is no session, answer 404 session-not-found, and that the acquire
// queued nothing.
func (a *authEnv) refusedAsNoSession(t *testing.T, key string, lease int64, what string) {
	t.Helper()
	id := api.SessionID(lease)
	for _, q := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/v1/sessions/" + id.String() + "/keepalive", nil},
		{http.MethodPost, "/v1/locks/jobs-nightly", api.LockRequest{Session: id}},
		{http.MethodDelete, "/v1/sessions/" + id.String(), nil},
	} {
		var body io.Reader
		if q.body != nil {
			b, err := json.Marshal(q.body)
			if err != nil {
				t.Fatal(err)
			}
			body = strings.NewReader(string(b))
		}
		req, err := http.NewRequest(q.method, a.url+q.path, body)
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		r := send(t, req)
		if r.status != http.StatusNotFound || r.problem.Type != api.ProblemTypePrefix+"session-not-found" {
			t.Errorf("%s %s with %s: %s; want 404 session-not-found", q.method, q.path, what, r)
		}
	}
	resp, err := a.etcd.Client(t).Get(context.Background(), "fencegate/locks/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Errorf("%d lock queue keys after an acquire with %s; want none", resp.Count, what)
	}
}

// leaseLives reports whether etcd still has lease.
func leaseLives(tb testing.TB, client *clientv3.Client, lease int64) bool {
	tb.Helper()
	resp, err := client.TimeToLive(context.Background(), clientv3.LeaseID(lease))
	if err != nil {
		tb.Fatalf("TimeToLive(%x): %v", lease, err)
	}
	return resp.TTL > 0
}
