package main

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fencegate/edge"
	"fencegate/gateway"
)

// TestAPIKey runs fencectl against a gateway that authenticates API keys:
// the key from FENCEGATE_API_KEY or --api-key is sent, a missing or
// unknown key is a refusal (exit 3), and `fencectl lock` hands the key to
// its command.
func TestAPIKey(t *testing.T) {
	const key = "fgk_fencectl_test_6512bd43d9caa6e02c990b0a82652dca"
	auth := edge.Auth{
		Identities: []edge.Identity{{Name: "ops", Grants: []edge.Grant{{Operations: []edge.Operation{edge.OpAdmin}}}}},
		APIKeys:    []edge.APIKey{{SHA256: sha256.Sum256([]byte(key)), Identity: "ops"}},
	}
	e := newEnv(t, gateway.WithAuth(auth))

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
