package main

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
	"fencegate/backends/s3"
	"fencegate/gateway"
	"fencegate/internal/config"
	"fencegate/internal/testenv"
	"fencegate/partners"
	"fencegate/retention"
	"fencegate/tokenstore"
)

// TestGatewayServesLockAPI: the gateway that serve and dev build mounts the
// lock API, and its token store applies the token checks.
func TestGatewayServesLockAPI(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	var checks config.TokenChecks
	if err := checks.Set("reports=held:writer"); err != nil {
		t.Fatal(err)
	}
	gw, err := newGateway(t.Context(), slog.New(slog.NewTextHandler(io.Discard, nil)), etcd.Client(t),
		tokenstore.Config{Prefix: "test/", Policies: checks},
		s3.Config{Endpoint: "http://127.0.0.1:1", Region: "us-east-1", AccessKeyID: "a", SecretAccessKey: "b", UsePathStyle: true},
		gateway.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/sessions", "application/json", strings.NewReader(`{"ttl": 5}`))
	if err != nil {
		t.Fatal(err)
	}
	var sess api.Session
	if err := json.NewDecoder(resp.Body).Decode(&sess); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/sessions: %s, %v", resp.Status, err)
	}
	resp.Body.Close()
	resp, err = http.Post(srv.URL+"/v1/locks/writer", "application/json", strings.NewReader(`{"session": "`+sess.ID.String()+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/locks/writer: %s", resp.Status)
	}
	if err := gw.fences.FenceCheck(t.Context(), "s3/reports/k", 1); !errors.Is(err, api.ErrLockNotHeld) {
		t.Fatalf("FenceCheck under held with a token that is not the holder's = %v; want ErrLockNotHeld", err)
	}
}

// checkedGateway serves a gateway on client (key prefix "test/") with the
// token checks given as --token-checks takes them, the partner routes
// given, and S3 at s3Endpoint (any URL where no object request is made).
func checkedGateway(t *testing.T, client *clientv3.Client, checks, s3Endpoint string, routes ...partners.PartnerRoute) (*httptest.Server, *wiredGateway) {
	t.Helper()
	var policies config.TokenChecks
	if err := policies.Set(checks); err != nil {
		t.Fatalf("--token-checks %q: %v", checks, err)
	}
	gw, err := newGatewayWith(t.Context(), slog.New(slog.NewTextHandler(io.Discard, nil)), client,
		tokenstore.Config{Prefix: "test/", Policies: policies},
		s3.Config{Endpoint: s3Endpoint, Region: "us-east-1", AccessKeyID: "a", SecretAccessKey: "b", UsePathStyle: true},
		gateway.DefaultConfig(), retention.Config{}, config.Features{Partners: routes}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return srv, gw
}

// countingPartner is a partner API that answers 201 and counts its calls.
func countingPartner(t *testing.T) (*url.URL, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u, &calls
}

// sendFenced sends method to url with token and returns the status, the
// problem type ("" without one), the body and the headers.
func sendFenced(t *testing.T, method, url string, token api.Token) (int, string, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(`{"amount":5}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(api.HeaderFenceToken, strconv.FormatInt(int64(token), 10))
	req.Header.Set("X-Request-Id", "checked-write")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var problem struct{ Type string }
	_ = json.Unmarshal(body, &problem)
	return resp.StatusCode, problem.Type, body, resp.Header
}

// acquireLock creates a session and takes lock name through srv's lock
// API, and returns the grant's token.
func acquireLock(t *testing.T, srv *httptest.Server, name string) api.Token {
	t.Helper()
	resp, err := http.Post(srv.URL+"/v1/sessions", "application/json", strings.NewReader(`{"ttl": 60}`))
	if err != nil {
		t.Fatal(err)
	}
	var sess api.Session
	if err := json.NewDecoder(resp.Body).Decode(&sess); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/sessions: %s, %v", resp.Status, err)
	}
	resp.Body.Close()
	resp, err = http.Post(srv.URL+"/v1/locks/"+name, "application/json", strings.NewReader(`{"session": "`+sess.ID.String()+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var grant api.LockGrant
	if err := json.NewDecoder(resp.Body).Decode(&grant); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/locks/%s: %s, %v", name, resp.Status, err)
	}
	return grant.Token
}

// TestTokenChecksGuardPartnerRoutes: the token checks apply to partner
// resources as to objects. Under "*=plausible", token 2^63-1 on a partner
// route is refused, the partner is never called and the resource's mark
// does not move; under "partner/pay=held:billing", only the holder of lock
// billing reaches the partner.
func TestTokenChecksGuardPartnerRoutes(t *testing.T) {
	upstream, calls := countingPartner(t)
	routes := []partners.PartnerRoute{
		{Name: "pay", Upstream: upstream, Methods: []string{http.MethodPost}, Resource: "accounts/{account}"},
		{Name: "mail", Upstream: upstream, Methods: []string{http.MethodPost}, Resource: "lists/{list}"},
	}
	wantMark := func(t *testing.T, gw *wiredGateway, resource api.Resource, want api.Token) {
		t.Helper()
		if hwm, err := gw.fences.HighWaterMark(t.Context(), resource); err != nil || hwm != want {
			t.Fatalf("HighWaterMark(%s) = %d, %v; want %d", resource, hwm, err, want)
		}
	}

	t.Run("plausible", func(t *testing.T) {
		calls.Store(0)
		srv, gw := checkedGateway(t, testenv.StartEtcd(t).Client(t), "*=plausible", "http://127.0.0.1:1", routes...)
		status, typ, body, _ := sendFenced(t, http.MethodPost, srv.URL+"/v1/partners/mail/lists/l1/send", api.MaxToken)
		if status != http.StatusBadRequest || typ != api.ProblemTypePrefix+"implausible-token" {
			t.Fatalf("POST with token 2^63-1 = %d %s %s; want 400 implausible-token", status, typ, body)
		}
		if n := calls.Load(); n != 0 {
			t.Fatalf("the partner was called %d times; want never", n)
		}
		wantMark(t, gw, "partner/mail/lists/l1", 0)
		token := acquireLock(t, srv, "any") // a real token, below etcd's revision
		if status, typ, body, _ := sendFenced(t, http.MethodPost, srv.URL+"/v1/partners/mail/lists/l1/send", token); status != http.StatusCreated {
			t.Fatalf("POST with a real token %d = %d %s %s; want 201", token, status, typ, body)
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("the partner was called %d times; want once", n)
		}
		wantMark(t, gw, "partner/mail/lists/l1", token)
	})

	t.Run("held", func(t *testing.T) {
		calls.Store(0)
		srv, gw := checkedGateway(t, testenv.StartEtcd(t).Client(t), "partner/pay=held:billing", "http://127.0.0.1:1", routes...)
		holder := acquireLock(t, srv, "billing")
		for _, token := range []api.Token{holder - 1, holder + 1} {
			status, typ, body, _ := sendFenced(t, http.MethodPost, srv.URL+"/v1/partners/pay/accounts/a1/charges", token)
			if status != http.StatusConflict || typ != api.ProblemTypePrefix+"lock-not-held" {
				t.Fatalf("POST with token %d (holder %d) = %d %s %s; want 409 lock-not-held", token, holder, status, typ, body)
			}
		}
		if n := calls.Load(); n != 0 {
			t.Fatalf("the partner was called %d times; want never", n)
		}
		wantMark(t, gw, "partner/pay/accounts/a1", 0)
		if status, typ, body, _ := sendFenced(t, http.MethodPost, srv.URL+"/v1/partners/pay/accounts/a1/charges", holder); status != http.StatusCreated {
			t.Fatalf("POST with the holder's token %d = %d %s %s; want 201", holder, status, typ, body)
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("the partner was called %d times; want once", n)
		}
		wantMark(t, gw, "partner/pay/accounts/a1", holder)
		// The route "mail" is not under held.
		if status, typ, body, _ := sendFenced(t, http.MethodPost, srv.URL+"/v1/partners/mail/lists/l1/send", holder-1); status != http.StatusCreated {
			t.Fatalf("POST to mail with token %d = %d %s %s; want 201", holder-1, status, typ, body)
		}
	})
}

// TestLockNotHeldHidesHolder: a lock-not-held answer does not tell the
// caller the holder's token, which would let it write as the holder.
func TestLockNotHeldHidesHolder(t *testing.T) {
	objects := testenv.StartS3(t)
	objects.CreateBucket(t, "reports")
	client := testenv.StartEtcd(t).Client(t)
	// Tokens of four digits or more, which nothing else in the answer has.
	for range 1000 {
		if _, err := client.Put(t.Context(), "filler", "x"); err != nil {
			t.Fatal(err)
		}
	}
	srv, _ := checkedGateway(t, client, "reports=held:writer", objects.Endpoint())
	holder := acquireLock(t, srv, "writer")
	status, typ, body, header := sendFenced(t, http.MethodPut, srv.URL+"/v1/objects/reports/quarterly.csv", holder-1)
	if status != http.StatusConflict || typ != api.ProblemTypePrefix+"lock-not-held" {
		t.Fatalf("PUT with token %d (holder %d) = %d %s %s; want 409 lock-not-held", holder-1, holder, status, typ, body)
	}
	// The holder's token as a number: not next to other digits.
	holderNumber := regexp.MustCompile(`(^|[^0-9])` + strconv.FormatInt(int64(holder), 10) + `([^0-9]|$)`)
	if holderNumber.Match(body) {
		t.Errorf("the lock-not-held body names the holder's token %d: %s", holder, body)
	}
	for name, values := range header {
		if name == "Date" || name == "Content-Length" { // the clock's and the body's, not the gateway's
			continue
		}
		for _, v := range values {
			if holderNumber.MatchString(v) {
				t.Errorf("the lock-not-held answer's header %s: %s names the holder's token %d", name, v, holder)
			}
		}
	}
}
