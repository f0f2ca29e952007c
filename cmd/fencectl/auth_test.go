package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fencegate/backends/s3"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

// TestAPIKey runs fencectl against a gateway that authenticates API keys:
// the key from FENCEGATE_API_KEY or --api-key is sent, a missing or
// unknown key is a refusal (exit 3), and `fencectl lock` hands the key to
// its command.
func TestAPIKey(t *testing.T) {
	const key = "fgk_fencectl_test_6512bd43d9caa6e02c990b0a82652dca"
	e := &env{
		etcd:   testenv.StartEtcd(t),
		bucket: fmt.Sprintf("k%d-%d", time.Now().UnixNano()%1e9, bucketSeq.Add(1)),
	}
	sharedS3.CreateBucket(t, e.bucket)
	store, err := tokenstore.New(e.etcd.Client(t), tokenstore.Config{RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	backend, err := s3.New(context.Background(), s3.Config{
		Endpoint:        sharedS3.Endpoint(),
		AccessKeyID:     sharedS3.AccessKey,
		SecretAccessKey: sharedS3.SecretKey,
		UsePathStyle:    true,
	})
	if err != nil {
		t.Fatal(err)
	}
	auth := gateway.Auth{
		Identities: []gateway.Identity{{Name: "ops", Grants: []gateway.Grant{{Operations: []gateway.Operation{gateway.OpAdmin}}}}},
		APIKeys:    []gateway.APIKey{{SHA256: sha256.Sum256([]byte(key)), Identity: "ops"}},
	}
	gw, err := gateway.New(gateway.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store, backend, gateway.WithAuth(auth), gateway.WithLocks(store))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	e.url = srv.URL

	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, []byte("v"), 0o644); err != nil {
		t.Fatal(err)
	}
	obj := e.bucket + "/k"
	tests := []struct {
		name     string
		env      []string
		args     []string
		wantCode int
		stderr   string // part of stderr, for refusals
	}{
		{"no key", nil, []string{"put", obj, file, "--token", "5"}, exitRefused, "unauthorized"},
		{"unknown key", []string{"FENCEGATE_API_KEY=fgk_wrong"}, []string{"put", obj, file, "--token", "5"}, exitRefused, "unknown API key"},
		{"key from the environment", []string{"FENCEGATE_API_KEY=" + key}, []string{"put", obj, file, "--token", "5"}, exitOK, ""},
		{"key from the flag", nil, []string{"--api-key", key, "put", obj, file, "--token", "6"}, exitOK, ""},
		{"the flag wins", []string{"FENCEGATE_API_KEY=fgk_wrong"}, []string{"--api-key", key, "get", obj}, exitOK, ""},
		{"lock hands the key to its command", nil, []string{"--api-key", key, "lock", "job", "--", "sh", "-c", `test "$FENCEGATE_API_KEY" = ` + key}, exitOK, ""},
		{"lock without a key", nil, []string{"lock", "job", "--", "true"}, exitRefused, "unauthorized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := e.fencectl(t, tt.env, "", tt.args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.stderr) {
				t.Fatalf("fencectl %q: exit %d, stderr %q; want %d and %q", tt.args, code, stderr, tt.wantCode, tt.stderr)
			}
			if strings.Contains(stderr, key) {
				t.Errorf("stderr quotes the key: %q", stderr)
			}
		})
	}
}
