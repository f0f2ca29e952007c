package main

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"fencegate/api"
	"fencegate/backends/s3"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

func TestTokenChecksFlag(t *testing.T) {
	var got tokenChecks
	if err := got.Set(" reports=held:report-writer, logs=plausible,*=plausible,legacy=none "); err != nil {
		t.Fatal(err)
	}
	want := tokenChecks{
		{Prefix: "s3/reports/", Check: tokenstore.CheckHeld, Lock: "report-writer"},
		{Prefix: "s3/logs/", Check: tokenstore.CheckPlausible},
		{Prefix: "", Check: tokenstore.CheckPlausible},
		{Prefix: "s3/legacy/", Check: tokenstore.CheckNone},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Set = %+v; want %+v", got, want)
	}
	if s := got.String(); s != "reports=held:report-writer,logs=plausible,*=plausible,legacy=none" {
		t.Errorf("String() = %q", s)
	}
	if err := got.Set(""); err != nil || len(got) != 0 {
		t.Errorf("Set(\"\") = %v, %+v; want an empty list", err, got)
	}
	for _, bad := range []string{
		"reports", "reports=strict", "reports=held", "reports=held:a/b", "reports=plausible:x",
		"Bad_Bucket=none", "a=none,a=plausible", "*=none,*=held:x",
	} {
		var c tokenChecks
		if err := c.Set(bad); err == nil {
			t.Errorf("Set(%q) succeeded; want an error", bad)
		}
	}
}

// TestServeTakesTokenChecks: --token-checks and its environment variable
// reach the token store's config; a bad value is a usage error.
func TestServeTakesTokenChecks(t *testing.T) {
	env := func(m map[string]string) lookupEnvFunc {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	base := map[string]string{"FENCEGATE_ETCD_ENDPOINTS": "http://127.0.0.1:2379"}
	cfg, err := parseServe([]string{"--token-checks", "reports=held:w"}, env(base), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.tokenChecks) != 1 || cfg.tokenChecks[0].Lock != "w" {
		t.Fatalf("token checks %+v", cfg.tokenChecks)
	}
	base["FENCEGATE_TOKEN_CHECKS"] = "*=plausible"
	if cfg, err = parseServe(nil, env(base), nil); err != nil || len(cfg.tokenChecks) != 1 || cfg.tokenChecks[0].Check != tokenstore.CheckPlausible {
		t.Fatalf("from the environment: %+v, %v", cfg.tokenChecks, err)
	}
	if _, err := parseServe([]string{"--token-checks", "reports=strict"}, env(base), nil); err == nil {
		t.Fatal("a bad --token-checks was accepted")
	}
}

// TestGatewayServesLockAPI: the gateway that serve and dev build mounts the
// lock API, and its token store applies the token checks.
func TestGatewayServesLockAPI(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	var checks tokenChecks
	if err := checks.Set("reports=held:writer"); err != nil {
		t.Fatal(err)
	}
	gw, err := newGateway(t.Context(), slog.New(slog.NewTextHandler(io.Discard, nil)), etcd.Client(t),
		tokenstore.Config{Prefix: "test/", Policies: checks},
		s3.Config{Endpoint: "http://127.0.0.1:1", Region: "us-east-1", AccessKeyID: "a", SecretAccessKey: "b", UsePathStyle: true},
		defaultLimits())
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
