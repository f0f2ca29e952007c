package gateway_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/partners"
	"fencegate/tokenstore"
)

// authEnv is a gateway with authentication on, in front of real etcd and
// a real S3 server (both counted), with the lock API, and its log.
type authEnv struct {
	*env
	gw  *gateway.Gateway
	log *lockedBuffer // the gateway's JSON log, at debug level
}

// newAuthEnv starts etcd, a bucket and a gateway whose Auth auth makes
// for the bucket, with the lock API and the options that extra makes on
// the gateway's token store. The gateway is not served yet: see serve.
func newAuthEnv(tb testing.TB, auth func(bucket string) edge.Auth, extra ...func(*tokenstore.Store) gateway.Option) *authEnv {
	tb.Helper()
	e := newStackEnv(tb)
	store, backend := e.connect(tb, tokenstore.Config{RequestTimeout: 5 * time.Second})
	logs := new(lockedBuffer)
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts := []gateway.Option{gateway.WithAuth(auth(e.bucket)), gateway.WithLocks(store)}
	for _, option := range extra {
		opts = append(opts, option(store))
	}
	gw, err := gateway.New(gateway.Config{Logger: logger}, store, backend, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return &authEnv{env: e, gw: gw, log: logs}
}

// serve serves the gateway over plain HTTP.
func (a *authEnv) serve(tb testing.TB) {
	tb.Helper()
	srv := httptest.NewServer(a.gw)
	tb.Cleanup(srv.Close)
	a.url = srv.URL
}

// newKey returns a fresh random bearer key and its configuration entry.
func newKey(tb testing.TB, identity string) (string, edge.APIKey) {
	tb.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	key := "fgk_" + hex.EncodeToString(b)
	return key, edge.APIKey{SHA256: sha256.Sum256([]byte(key)), Identity: identity}
}

// authRequest is one request of an authorization table.
type authRequest struct {
	name   string
	method string
	path   string // from the gateway's root
	key    string // bearer key; "" sends none
	token  string // X-Fence-Token; "" sends none
	header http.Header
	body   any // string: raw; otherwise JSON; nil: none
	status int
	slug   string // problem type, for refusals
	// unreached: etcd and S3 must see no request at all.
	unreached bool
	// detail must appear in the problem's detail, for refusals.
	detail string
}

// run sends the request through client and checks the answer; for
// refusals, that etcd and S3 saw nothing when unreached is set.
func (q authRequest) run(t *testing.T, a *authEnv, client *http.Client) result {
	t.Helper()
	var body io.Reader
	switch b := q.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		body = strings.NewReader(string(j))
	}
	req, err := http.NewRequest(q.method, a.url+q.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if q.key != "" {
		req.Header.Set("Authorization", "Bearer "+q.key)
	}
	if q.token != "" {
		req.Header.Set(api.HeaderFenceToken, q.token)
	}
	for name, values := range q.header {
		req.Header[name] = values
	}
	etcdBefore, s3Before := a.etcdCalls.Count(), a.s3.Count()
	r := sendWith(t, client, req)
	if r.status != q.status {
		t.Fatalf("%s: %s %s = %s; want %d", q.name, q.method, q.path, r, q.status)
	}
	if q.slug != "" {
		wantProblem(t, r, q.status, q.slug)
		if !strings.Contains(r.problem.Detail, q.detail) {
			t.Errorf("%s: problem detail %q; want it to contain %q", q.name, r.problem.Detail, q.detail)
		}
	}
	if q.status == http.StatusUnauthorized && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("%s: 401 with WWW-Authenticate %q; want Bearer", q.name, r.header.Get("WWW-Authenticate"))
	}
	if q.unreached {
		if n := a.etcdCalls.Count() - etcdBefore; n != 0 {
			t.Errorf("%s: %d etcd requests; want none", q.name, n)
		}
		if n := a.s3.Count() - s3Before; n != 0 {
			t.Errorf("%s: %d S3 requests; want none", q.name, n)
		}
	}
	return r
}

// accessLines returns the gateway's log line of every request: "request",
// or "write refused" for an audited refusal.
func (a *authEnv) accessLines(tb testing.TB) []map[string]any {
	tb.Helper()
	var lines []map[string]any
	for _, line := range a.log.lines(tb) {
		if line["msg"] == "request" || line["msg"] == "write refused" {
			lines = append(lines, line)
		}
	}
	return lines
}

// identityLogged fails unless the access line of the request to path with
// status says identity.
func (a *authEnv) identityLogged(tb testing.TB, method, path string, status int, identity string) {
	tb.Helper()
	for _, l := range a.accessLines(tb) {
		if l["method"] == method && l["path"] == path && l["status"] == float64(status) {
			if l["identity"] != identity {
				tb.Errorf("access line %v: identity %q; want %q", l, l["identity"], identity)
			}
			return
		}
	}
	tb.Errorf("no access line for %s %s %d in\n%s", method, path, status, a.log.String())
}

// TestAuthObjects walks the object routes with no key, an unknown key,
// keys whose grants do not cover the object, and keys whose grants do.
// Refused writes reach neither etcd nor S3, and a forbidden write with a
// high token does not raise the high-water mark: a lower token of an
// allowed writer is still accepted afterwards.
func TestAuthObjects(t *testing.T) {
	writerKey, writerAPIKey := newKey(t, "writer")
	readerKey, readerAPIKey := newKey(t, "reader")
	adminKey, adminAPIKey := newKey(t, "admin")
	unknownKey, _ := newKey(t, "nobody")
	a := newAuthEnv(t, func(bucket string) edge.Auth {
		return edge.Auth{
			Identities: []edge.Identity{
				{Name: "writer", Grants: []edge.Grant{{Prefix: "s3/" + bucket + "/team/", Operations: []edge.Operation{edge.OpRead, edge.OpWrite, edge.OpDelete}}}},
				{Name: "reader", Grants: []edge.Grant{{Prefix: "s3/" + bucket + "/", Operations: []edge.Operation{edge.OpRead}}}},
				{Name: "admin", Grants: []edge.Grant{{Operations: []edge.Operation{edge.OpAdmin}}}},
			},
			APIKeys: []edge.APIKey{writerAPIKey, readerAPIKey, adminAPIKey},
		}
	})
	a.serve(t)
	obj := func(key string) string { return "/v1/objects/" + a.bucket + "/" + key }
	fence := func(key string) string { return "/v1/fences/s3/" + a.bucket + "/" + key }
	team, other := obj("team/report.csv"), obj("other/report.csv")
	steps := []authRequest{
		{name: "write, no key", method: http.MethodPut, path: team, token: "100", body: "x", status: 401, slug: "unauthorized", unreached: true},
		{name: "write, unknown key", method: http.MethodPut, path: team, key: unknownKey, token: "100", body: "x", status: 401, slug: "unauthorized", unreached: true, detail: "unknown API key"},
		{name: "write, wrong prefix", method: http.MethodPut, path: other, key: writerKey, token: "100", body: "x", status: 403, slug: "forbidden", unreached: true,
			detail: fmt.Sprintf(`identity "writer" may not write "s3/%s/other/report.csv"`, a.bucket)},
		{name: "write, read-only grant", method: http.MethodPut, path: team, key: readerKey, token: "100", body: "x", status: 403, slug: "forbidden", unreached: true, detail: `"reader" may not write`},
		{name: "forbidden before the token is parsed", method: http.MethodPut, path: team, key: readerKey, token: "bad", body: "x", status: 403, slug: "forbidden", unreached: true},
		{name: "write, right key, token below the forbidden ones", method: http.MethodPut, path: team, key: writerKey, token: "5", body: "v5", status: 201},
		{name: "forbidden stale write tells no high-water mark", method: http.MethodPut, path: team, key: readerKey, token: "1", body: "x", status: 403, slug: "forbidden", unreached: true},
		{name: "read, no key", method: http.MethodGet, path: team, status: 401, slug: "unauthorized", unreached: true},
		{name: "read, read grant", method: http.MethodGet, path: team, key: readerKey, status: 200},
		{name: "head, writer", method: http.MethodHead, path: team, key: writerKey, status: 200},
		{name: "read, wrong prefix", method: http.MethodGet, path: other, key: writerKey, status: 403, slug: "forbidden", unreached: true},
		{name: "fence, wrong prefix", method: http.MethodGet, path: fence("other/report.csv"), key: writerKey, status: 403, slug: "forbidden", unreached: true},
		{name: "fence, no key", method: http.MethodGet, path: fence("team/report.csv"), status: 401, slug: "unauthorized", unreached: true},
		{name: "fence, read grant", method: http.MethodGet, path: fence("team/report.csv"), key: readerKey, status: 200},
		{name: "delete, read-only grant", method: http.MethodDelete, path: team, key: readerKey, token: "6", status: 403, slug: "forbidden", unreached: true, detail: `"reader" may not delete`},
		{name: "write elsewhere, admin", method: http.MethodPut, path: other, key: adminKey, token: "7", body: "v7", status: 201},
		{name: "delete, right key", method: http.MethodDelete, path: team, key: writerKey, token: "6", status: 204},
		{name: "healthz is open", method: http.MethodGet, path: "/healthz", status: 200},
		{name: "readyz is open", method: http.MethodGet, path: "/readyz", status: 200},
		{name: "unknown route, no key", method: http.MethodGet, path: "/v1/nothing", status: 401, slug: "unauthorized", unreached: true},
		{name: "unknown route, key", method: http.MethodGet, path: "/v1/nothing", key: readerKey, status: 404, slug: "not-found"},
	}
	for _, q := range steps {
		r := q.run(t, a, nil)
		switch q.name {
		case "read, read grant":
			if string(r.body) != "v5" || r.header.Get(api.HeaderFenceToken) != "5" {
				t.Errorf("%s: %q, token %q; want v5, token 5", q.name, r.body, r.header.Get(api.HeaderFenceToken))
			}
		case "fence, read grant":
			var f api.Fence
			if err := json.Unmarshal(r.body, &f); err != nil || f.HighWaterMark != 5 {
				t.Errorf("%s: %s; want high-water mark 5 (the forbidden token 100 raised nothing)", q.name, r.body)
			}
		}
	}
	if body, token, ok := a.stored(t, "other/report.csv"); !ok || body != "v7" || token != "7" {
		t.Errorf("other/report.csv in S3: %q token %q (exists %v); want v7, token 7: the forbidden writes never reached it", body, token, ok)
	}
	if _, _, ok := a.stored(t, "team/report.csv"); ok {
		t.Errorf("team/report.csv still in S3 after the writer deleted it")
	}
	a.identityLogged(t, http.MethodPut, team, 201, "writer")
	a.identityLogged(t, http.MethodPut, other, 201, "admin")
	a.identityLogged(t, http.MethodGet, "/healthz", 200, "")
	logs := a.log.String()
	for _, key := range []string{writerKey, readerKey, adminKey, unknownKey} {
		if strings.Contains(logs, key) {
			t.Fatalf("the log holds a bearer key:\n%s", logs)
		}
	}
}

// TestAuthLocks walks the session and lock routes: sessions need the lock
// operation on some prefix, locks on a prefix of their name.
func TestAuthLocks(t *testing.T) {
	lockerKey, lockerAPIKey := newKey(t, "locker")
	readerKey, readerAPIKey := newKey(t, "reader")
	a := newAuthEnv(t, func(bucket string) edge.Auth {
		return edge.Auth{
			Identities: []edge.Identity{
				{Name: "locker", Grants: []edge.Grant{{Prefix: "jobs-", Operations: []edge.Operation{edge.OpLock}}}},
				{Name: "reader", Grants: []edge.Grant{{Operations: []edge.Operation{edge.OpRead}}}},
			},
			APIKeys: []edge.APIKey{lockerAPIKey, readerAPIKey},
		}
	})
	a.serve(t)
	(authRequest{name: "session, no key", method: http.MethodPost, path: "/v1/sessions", body: api.SessionRequest{TTL: 10}, status: 401, slug: "unauthorized", unreached: true}).run(t, a, nil)
	(authRequest{name: "session, no lock grant", method: http.MethodPost, path: "/v1/sessions", key: readerKey, body: api.SessionRequest{TTL: 10}, status: 403, slug: "forbidden", unreached: true,
		detail: `identity "reader" may not lock any resource`}).run(t, a, nil)
	r := (authRequest{name: "session, lock grant", method: http.MethodPost, path: "/v1/sessions", key: lockerKey, body: api.SessionRequest{TTL: 10}, status: 201}).run(t, a, nil)
	var sess api.Session
	if err := json.Unmarshal(r.body, &sess); err != nil || sess.ID == 0 {
		t.Fatalf("session: %s", r)
	}
	acquire := api.LockRequest{Session: sess.ID, Wait: 1}
	sessionPath := "/v1/sessions/" + sess.ID.String()
	steps := []authRequest{
		{name: "keepalive, no key", method: http.MethodPost, path: sessionPath + "/keepalive", status: 401, slug: "unauthorized", unreached: true},
		{name: "keepalive, no lock grant", method: http.MethodPost, path: sessionPath + "/keepalive", key: readerKey, status: 403, slug: "forbidden", unreached: true},
		{name: "keepalive, lock grant", method: http.MethodPost, path: sessionPath + "/keepalive", key: lockerKey, status: 200},
		{name: "acquire, no key", method: http.MethodPost, path: "/v1/locks/jobs-nightly", body: acquire, status: 401, slug: "unauthorized", unreached: true},
		{name: "acquire, wrong prefix", method: http.MethodPost, path: "/v1/locks/backup", key: lockerKey, body: acquire, status: 403, slug: "forbidden", unreached: true,
			detail: `identity "locker" may not lock "backup"`},
		{name: "acquire, read grant only", method: http.MethodPost, path: "/v1/locks/jobs-nightly", key: readerKey, body: acquire, status: 403, slug: "forbidden", unreached: true},
		{name: "acquire, right key", method: http.MethodPost, path: "/v1/locks/jobs-nightly", key: lockerKey, body: acquire, status: 200},
		{name: "state, wrong prefix", method: http.MethodGet, path: "/v1/locks/backup", key: lockerKey, status: 403, slug: "forbidden", unreached: true},
		{name: "state, right key", method: http.MethodGet, path: "/v1/locks/jobs-nightly", key: lockerKey, status: 200},
		{name: "release, no key", method: http.MethodDelete, path: "/v1/locks/jobs-nightly?token=1", status: 401, slug: "unauthorized", unreached: true},
		{name: "release, read grant only", method: http.MethodDelete, path: "/v1/locks/jobs-nightly?token=1", key: readerKey, status: 403, slug: "forbidden", unreached: true},
		{name: "revoke, no lock grant", method: http.MethodDelete, path: sessionPath, key: readerKey, status: 403, slug: "forbidden", unreached: true},
	}
	var grant api.LockGrant
	for _, q := range steps {
		r := q.run(t, a, nil)
		if q.name == "acquire, right key" {
			if err := json.Unmarshal(r.body, &grant); err != nil || grant.Token == 0 {
				t.Fatalf("grant: %s", r)
			}
		}
	}
	var st api.LockState
	r = (authRequest{name: "state after refused release", method: http.MethodGet, path: "/v1/locks/jobs-nightly?session=" + sess.ID.String(), key: lockerKey, status: 200}).run(t, a, nil)
	if err := json.Unmarshal(r.body, &st); err != nil || st.Holder != grant.Token {
		t.Fatalf("lock state %s; want holder %d: the refused release and revoke changed nothing", r.body, grant.Token)
	}
	release := fmt.Sprintf("/v1/locks/jobs-nightly?token=%d", grant.Token)
	(authRequest{name: "release, right key", method: http.MethodDelete, path: release, key: lockerKey, status: 200}).run(t, a, nil)
	(authRequest{name: "revoke, right key", method: http.MethodDelete, path: sessionPath, key: lockerKey, status: 204}).run(t, a, nil)
	a.identityLogged(t, http.MethodPost, "/v1/locks/jobs-nightly", 200, "locker")
}

// TestAuthSessionOwners: a session belongs to the identity that created
// it. Another identity with a lock grant is refused (403 forbidden) on
// every call that names the session or one of its grants, and the lock
// stays held; so is an identity with admin on a prefix only. The owner's
// calls succeed, and an operator (admin on every resource) may revoke the
// session.
func TestAuthSessionOwners(t *testing.T) {
	aliceKey, aliceAPIKey := newKey(t, "alice")
	bobKey, bobAPIKey := newKey(t, "bob")
	opsKey, opsAPIKey := newKey(t, "ops")
	scopedKey, scopedAPIKey := newKey(t, "jobs-admin")
	a := newAuthEnv(t, func(bucket string) edge.Auth {
		lock := []edge.Grant{{Prefix: "jobs-", Operations: []edge.Operation{edge.OpLock}}}
		return edge.Auth{
			Identities: []edge.Identity{
				{Name: "alice", Grants: lock},
				{Name: "bob", Grants: lock},
				{Name: "ops", Grants: []edge.Grant{{Operations: []edge.Operation{edge.OpAdmin}}}},
				{Name: "jobs-admin", Grants: []edge.Grant{{Prefix: "jobs-", Operations: []edge.Operation{edge.OpAdmin}}}},
			},
			APIKeys: []edge.APIKey{aliceAPIKey, bobAPIKey, opsAPIKey, scopedAPIKey},
		}
	})
	a.serve(t)
	r := (authRequest{name: "alice's session", method: http.MethodPost, path: "/v1/sessions", key: aliceKey, body: api.SessionRequest{TTL: 60}, status: 201}).run(t, a, nil)
	var sess api.Session
	if err := json.Unmarshal(r.body, &sess); err != nil || sess.ID == 0 {
		t.Fatalf("session: %s", r)
	}
	acquire := api.LockRequest{Session: sess.ID}
	r = (authRequest{name: "alice acquires", method: http.MethodPost, path: "/v1/locks/jobs-nightly", key: aliceKey, body: acquire, status: 200}).run(t, a, nil)
	var grant api.LockGrant
	if err := json.Unmarshal(r.body, &grant); err != nil || grant.Token == 0 {
		t.Fatalf("grant: %s", r)
	}
	sessionPath := "/v1/sessions/" + sess.ID.String()
	release := fmt.Sprintf("/v1/locks/jobs-nightly?token=%d", grant.Token)
	const notYours = "the session belongs to another identity"
	for _, q := range []authRequest{
		{name: "bob keeps alice's session alive", method: http.MethodPost, path: sessionPath + "/keepalive", key: bobKey, status: 403, slug: "forbidden", detail: notYours},
		{name: "bob revokes alice's session", method: http.MethodDelete, path: sessionPath, key: bobKey, status: 403, slug: "forbidden", detail: notYours},
		{name: "bob acquires the held lock with alice's session", method: http.MethodPost, path: "/v1/locks/jobs-nightly", key: bobKey, body: acquire, status: 403, slug: "forbidden", detail: notYours},
		{name: "bob acquires another lock with alice's session", method: http.MethodPost, path: "/v1/locks/jobs-other", key: bobKey, body: acquire, status: 403, slug: "forbidden", detail: notYours},
		{name: "bob releases alice's grant", method: http.MethodDelete, path: release, key: bobKey, status: 403, slug: "forbidden", detail: notYours},
		{name: "an admin of a prefix revokes alice's session", method: http.MethodDelete, path: sessionPath, key: scopedKey, status: 403, slug: "forbidden", detail: notYours},
		{name: "an admin of a prefix releases alice's grant", method: http.MethodDelete, path: release, key: scopedKey, status: 403, slug: "forbidden", detail: notYours},
	} {
		q.run(t, a, nil)
	}
	for _, lock := range []struct {
		name   string
		holder api.Token
		queue  int64
	}{{"jobs-nightly", grant.Token, 1}, {"jobs-other", 0, 0}} {
		var st api.LockState
		r := (authRequest{name: "state after refusals", method: http.MethodGet, path: "/v1/locks/" + lock.name + "?session=" + sess.ID.String(), key: aliceKey, status: 200}).run(t, a, nil)
		if err := json.Unmarshal(r.body, &st); err != nil || st.Holder != lock.holder || st.QueueLength != lock.queue {
			t.Fatalf("lock state %s; want holder %d, queue %d: the refused calls changed nothing", r.body, lock.holder, lock.queue)
		}
	}

	(authRequest{name: "alice keeps her session alive", method: http.MethodPost, path: sessionPath + "/keepalive", key: aliceKey, status: 200}).run(t, a, nil)
	r = (authRequest{name: "alice acquires again", method: http.MethodPost, path: "/v1/locks/jobs-nightly", key: aliceKey, body: acquire, status: 200}).run(t, a, nil)
	if !strings.Contains(string(r.body), fmt.Sprintf(`"token":%d`, grant.Token)) {
		t.Fatalf("alice's second acquire: %s; want token %d", r, grant.Token)
	}
	r = (authRequest{name: "alice releases", method: http.MethodDelete, path: release, key: aliceKey, status: 200}).run(t, a, nil)
	if !strings.Contains(string(r.body), `"released":true`) {
		t.Fatalf("alice's release: %s; want released", r)
	}
	(authRequest{name: "alice acquires once more", method: http.MethodPost, path: "/v1/locks/jobs-nightly", key: aliceKey, body: acquire, status: 200}).run(t, a, nil)
	(authRequest{name: "ops keeps alice's session alive", method: http.MethodPost, path: sessionPath + "/keepalive", key: opsKey, status: 200}).run(t, a, nil)
	(authRequest{name: "ops revokes alice's session", method: http.MethodDelete, path: sessionPath, key: opsKey, status: 204}).run(t, a, nil)
	(authRequest{name: "alice's session is gone", method: http.MethodPost, path: sessionPath + "/keepalive", key: aliceKey, status: 404, slug: "session-not-found"}).run(t, a, nil)
	var st api.LockState
	r = (authRequest{name: "state after ops revoked", method: http.MethodGet, path: "/v1/locks/jobs-nightly", key: aliceKey, status: 200}).run(t, a, nil)
	if err := json.Unmarshal(r.body, &st); err != nil || st.Held || st.QueueLength != 0 {
		t.Fatalf("lock state %s; want free after ops revoked alice's session", r.body)
	}
}

// pki is a certificate authority made for one test.
type pki struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(tb testing.TB, name string) *pki {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &pki{cert: cert, key: key, pool: pool}
}

// clientCert issues a client certificate with subject common name cn.
func (ca *pki) clientCert(tb testing.TB, cn string) tls.Certificate {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestAuthClientCertificates serves the gateway over TLS that verifies
// client certificates against a CA of the test (VerifyClientCertIfGiven):
// a certificate of that CA authenticates as the identity its common name
// maps to; one of another CA fails the handshake; a mapped name without a
// verified chain, an unmapped name, or no certificate gets 401.
func TestAuthClientCertificates(t *testing.T) {
	ca, rogue := newCA(t, "fencegate test CA"), newCA(t, "rogue CA")
	a := newAuthEnv(t, func(bucket string) edge.Auth {
		return edge.Auth{
			Identities: []edge.Identity{
				{Name: "batch", Grants: []edge.Grant{{Prefix: "s3/" + bucket + "/batch/", Operations: []edge.Operation{edge.OpWrite, edge.OpRead}}}},
			},
			ClientCerts: []edge.ClientCert{{CommonName: "batch-job", Identity: "batch"}},
		}
	})
	srv := httptest.NewUnstartedServer(a.gw)
	srv.TLS = &tls.Config{ClientCAs: ca.pool, ClientAuth: tls.VerifyClientCertIfGiven}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	t.Cleanup(srv.Close)
	a.url = srv.URL
	clientWith := func(certs ...tls.Certificate) *http.Client {
		tr := srv.Client().Transport.(*http.Transport).Clone()
		tr.TLSClientConfig.Certificates = certs
		tr.DisableKeepAlives = true
		return &http.Client{Transport: tr}
	}
	batch := clientWith(ca.clientCert(t, "batch-job"))
	obj := "/v1/objects/" + a.bucket + "/batch/out.csv"

	(authRequest{name: "certificate of the CA", method: http.MethodPut, path: obj, token: "3", body: "v3", status: 201}).run(t, a, batch)
	a.identityLogged(t, http.MethodPut, obj, 201, "batch")
	(authRequest{name: "certificate, wrong prefix", method: http.MethodPut, path: "/v1/objects/" + a.bucket + "/other", token: "9", body: "x", status: 403, slug: "forbidden", unreached: true,
		detail: `identity "batch" may not write`}).run(t, a, batch)
	(authRequest{name: "no certificate", method: http.MethodPut, path: obj, token: "9", body: "x", status: 401, slug: "unauthorized", unreached: true}).run(t, a, clientWith())
	(authRequest{name: "unmapped name", method: http.MethodPut, path: obj, token: "9", body: "x", status: 401, slug: "unauthorized", unreached: true,
		detail: `"stranger" is not mapped`}).run(t, a, clientWith(ca.clientCert(t, "stranger")))

	// A certificate of another CA, even with a mapped name, never gets
	// through: the handshake fails (with TLS 1.3 the client may learn it
	// only on its first read).
	etcdBefore, s3Before := a.etcdCalls.Count(), a.s3.Count()
	req, err := http.NewRequest(http.MethodPut, a.url+obj, strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(api.HeaderFenceToken, "9")
	resp, err := clientWith(rogue.clientCert(t, "batch-job")).Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("certificate of another CA: %s; want a failed handshake or 401", resp.Status)
		}
	}
	if n, m := a.etcdCalls.Count()-etcdBefore, a.s3.Count()-s3Before; n != 0 || m != 0 {
		t.Errorf("certificate of another CA: %d etcd and %d S3 requests; want none", n, m)
	}
	if body, token, ok := a.stored(t, "batch/out.csv"); !ok || body != "v3" || token != "3" {
		t.Errorf("batch/out.csv in S3: %q token %q; want v3, token 3", body, token)
	}
}

// TestAuthPartners walks a partner route: no key 401, a key whose grants
// cover another resource or only reads 403, and neither reaches etcd or
// the partner; the right key is forwarded (without its Authorization
// header), and its idempotency keys are its own: the same key from
// another identity is another request.
func TestAuthPartners(t *testing.T) {
	payerKey, payerAPIKey := newKey(t, "payer")
	readerKey, readerAPIKey := newKey(t, "reader")
	opsKey, opsAPIKey := newKey(t, "ops")
	partner := newPartnerServer(t, 0)
	a := newAuthEnv(t, func(string) edge.Auth {
		return edge.Auth{
			Identities: []edge.Identity{
				{Name: "payer", Grants: []edge.Grant{{Prefix: "partner/pay/accounts/team-", Operations: []edge.Operation{edge.OpWrite}}}},
				{Name: "reader", Grants: []edge.Grant{{Prefix: "partner/", Operations: []edge.Operation{edge.OpRead}}}},
				{Name: "ops", Grants: []edge.Grant{{Operations: []edge.Operation{edge.OpAdmin}}}},
			},
			APIKeys: []edge.APIKey{payerAPIKey, readerAPIKey, opsAPIKey},
		}
	}, func(store *tokenstore.Store) gateway.Option {
		partnerStore, err := tokenstore.NewPartners(store)
		if err != nil {
			t.Fatal(err)
		}
		return gateway.WithPartners([]partners.PartnerRoute{payRoute(t, partner.URL)}, partnerStore, nil)
	})
	a.serve(t)
	charge := func(account string) string { return "/v1/partners/pay/accounts/" + account + "/charges" }
	steps := []authRequest{
		{name: "no key", method: http.MethodPost, path: charge("team-1"), token: "7", body: "{}", status: 401, slug: "unauthorized", unreached: true},
		{name: "unknown key", method: http.MethodPost, path: charge("team-1"), key: "fgk_unknown", token: "7", body: "{}", status: 401, slug: "unauthorized", unreached: true},
		{name: "wrong prefix", method: http.MethodPost, path: charge("other-1"), key: payerKey, token: "7", body: "{}", status: 403, slug: "forbidden", unreached: true,
			detail: `identity "payer" may not write "partner/pay/accounts/other-1"`},
		{name: "read grant only", method: http.MethodPost, path: charge("team-1"), key: readerKey, token: "100", body: "{}", status: 403, slug: "forbidden", unreached: true, detail: `"reader" may not write`},
		{name: "right key, below the forbidden token", method: http.MethodPost, path: charge("team-1"), key: payerKey, token: "7", body: "{}", status: 201},
	}
	for _, q := range steps {
		before := partner.count()
		q.run(t, a, nil)
		if got := partner.count() - before; q.status >= 400 && got != 0 {
			t.Errorf("%s: the partner got %d requests; want none", q.name, got)
		}
	}
	calls := partner.snapshot()
	if len(calls) != 1 || calls[0].Token != 7 || calls[0].Header.Get("Authorization") != "" {
		t.Fatalf("partner calls %+v; want one, with token 7 and no Authorization header", calls)
	}

	// Idempotency keys are scoped by identity.
	call := func(key string) result {
		return partnerDo(t, a.url, partnerReq{path: "pay/accounts/team-2/charges", token: 8, key: "order-1", body: `{"amount":5}`,
			header: http.Header{"Authorization": {"Bearer " + key}}})
	}
	first, again, other := call(payerKey), call(payerKey), call(opsKey)
	if first.status != 201 || replayed(first) || again.status != 201 || !replayed(again) {
		t.Fatalf("payer's first call %s and retry %s (replayed %v); want 201, then the same 201 replayed", first, again, replayed(again))
	}
	if other.status != 201 || replayed(other) {
		t.Fatalf("ops with payer's idempotency key: %s (replayed %v); want its own call, not payer's answer", other, replayed(other))
	}
	if n := partner.count(); n != 3 {
		t.Fatalf("partner got %d calls; want 3 (the first, payer's order-1, ops's order-1)", n)
	}
	a.identityLogged(t, http.MethodPost, charge("team-1"), 201, "payer")
}

// TestAuthPartnerHeaderResourceBoundToPath: on a route that takes its
// resource from X-Fence-Resource, a caller granted only a1 names a1 in the
// header and a2 in the path. With resource_path the path must carry the
// header's resource, so the request is refused (400) before etcd, and the
// partner is never called for a2; the same caller's request for a1 goes
// through, and one that names a2 in both places is a 403.
func TestAuthPartnerHeaderResourceBoundToPath(t *testing.T) {
	payerKey, payerAPIKey := newKey(t, "payer")
	partner := newPartnerServer(t, 0)
	a := newAuthEnv(t, func(string) edge.Auth {
		return edge.Auth{
			Identities: []edge.Identity{
				{Name: "payer", Grants: []edge.Grant{{Prefix: "partner/pay/a1", Operations: []edge.Operation{edge.OpWrite}}}},
			},
			APIKeys: []edge.APIKey{payerAPIKey},
		}
	}, func(store *tokenstore.Store) gateway.Option {
		partnerStore, err := tokenstore.NewPartners(store)
		if err != nil {
			t.Fatal(err)
		}
		route := payRoute(t, partner.URL)
		route.Resource = partners.ResourceFromHeader
		route.ResourcePath = "accounts/{resource}"
		return gateway.WithPartners([]partners.PartnerRoute{route}, partnerStore, nil)
	})
	a.serve(t)
	resource := func(id string) http.Header { return http.Header{api.HeaderFenceResource: {id}} }
	steps := []authRequest{
		{name: "a1 in the header, a2 in the path", method: http.MethodPost, path: "/v1/partners/pay/accounts/a2/refunds", header: resource("a1"),
			key: payerKey, token: "7", body: "{}", status: 400, slug: "invalid-request", unreached: true, detail: "resource_path"},
		{name: "a1 in the header, no account in the path", method: http.MethodPost, path: "/v1/partners/pay/refunds/a1", header: resource("a1"),
			key: payerKey, token: "7", body: "{}", status: 400, slug: "invalid-request", unreached: true},
		{name: "a1 in the header, a1/x in the path", method: http.MethodPost, path: "/v1/partners/pay/accounts/a1x/refunds", header: resource("a1"),
			key: payerKey, token: "7", body: "{}", status: 400, slug: "invalid-request", unreached: true},
		{name: "a2 in both", method: http.MethodPost, path: "/v1/partners/pay/accounts/a2/refunds", header: resource("a2"),
			key: payerKey, token: "7", body: "{}", status: 403, slug: "forbidden", unreached: true},
		{name: "a1 in both", method: http.MethodPost, path: "/v1/partners/pay/accounts/a1/refunds", header: resource("a1"),
			key: payerKey, token: "7", body: "{}", status: 201},
	}
	for _, q := range steps {
		before := partner.count()
		q.run(t, a, nil)
		if got := partner.count() - before; q.status >= 400 && got != 0 {
			t.Errorf("%s: the partner got %d requests; want none", q.name, got)
		}
	}
	calls := partner.snapshot()
	for _, c := range calls {
		if resourceOf(c.Path) != "a1" {
			t.Errorf("the partner was called at %s for a caller granted only a1", c.Path)
		}
	}
	if len(calls) != 1 || calls[0].Path != "/base/accounts/a1/refunds" {
		t.Fatalf("partner calls %+v; want one, at /base/accounts/a1/refunds", calls)
	}
}

// TestAuthPartnerHeaderRouteUnboundRefused: New refuses a route that
// takes its resource from X-Fence-Resource with neither resource_path nor
// unbound_path while an identity may write only part of the route, and
// says why; unbound_path says the path is unbound on purpose, and then
// the path is what the client sends (a1 in the header reaches a2's path,
// which is what unbound_path accepts). A grant of the whole route loads.
func TestAuthPartnerHeaderRouteUnboundRefused(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	store, partnerStore := newPartnerStores(t, etcd, 5*time.Second)
	partner := newPartnerServer(t, 0)
	payerKey, payerAPIKey := newKey(t, "payer")
	auth := func(prefix string) edge.Auth {
		return edge.Auth{
			Identities: []edge.Identity{{Name: "payer", Grants: []edge.Grant{{Prefix: prefix, Operations: []edge.Operation{edge.OpWrite}}}}},
			APIKeys:    []edge.APIKey{payerAPIKey},
		}
	}
	route := func(unbound bool) partners.PartnerRoute {
		r := payRoute(t, partner.URL)
		r.Resource, r.UnboundPath = partners.ResourceFromHeader, unbound
		return r
	}
	newGateway := func(a edge.Auth, rt partners.PartnerRoute) (*gateway.Gateway, error) {
		return gateway.New(gateway.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store, newMemObjects(),
			gateway.WithAuth(a), gateway.WithPartners([]partners.PartnerRoute{rt}, partnerStore, nil))
	}
	for _, tc := range []struct {
		name    string
		grant   string
		unbound bool
		want    string // in New's error; "" means it starts
	}{
		{"grant of one account, unbound by omission", "partner/pay/a1", false,
			`partners[0].resource: "header" without resource_path, and identity "payer" may write only part of the route (grant "partner/pay/a1"): it could name a resource it may write in X-Fence-Resource and act on another in the path`},
		{"grant of one account, unbound_path", "partner/pay/a1", true, ""},
		{"grant of the whole route, unbound by omission", "partner/pay/", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newGateway(auth(tc.grant), route(tc.unbound))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New = %v; want it to start", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("New = %v; want an error containing %q", err, tc.want)
			}
		})
	}

	gw, err := newGateway(auth("partner/pay/a1"), route(true))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	r := partnerDo(t, srv.URL, partnerReq{path: "pay/accounts/a2/notes", token: 3, body: "{}",
		header: http.Header{"Authorization": {"Bearer " + payerKey}, api.HeaderFenceResource: {"a1"}}})
	if r.status != http.StatusCreated {
		t.Fatalf("a1 in the header, a2 in the path, on an unbound_path route = %s; want 201 (the path is not bound)", r)
	}
	if calls := partner.snapshot(); len(calls) != 1 || calls[0].Path != "/base/accounts/a2/notes" {
		t.Fatalf("partner calls %+v; want one, at /base/accounts/a2/notes", calls)
	}
}
