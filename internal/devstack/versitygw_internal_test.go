package devstack

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckCredentialsRejectsOtherServer(t *testing.T) {
	running, err := StartVersityGW(t.Context(), S3Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("StartVersityGW: %v", err)
	}
	defer running.Close()
	if err := running.checkCredentials(t.Context()); err != nil {
		t.Fatalf("checkCredentials() of the server itself = %v; want nil", err)
	}
	// versitygw answers 404 XAdminUserNotFound to an unknown access key.
	impostor := newS3Server(running.addr, "someone-else", "someone-elses-secret")
	defer impostor.Close()
	if err := impostor.checkCredentials(t.Context()); !errors.Is(err, errNotOurServer) {
		t.Fatalf("checkCredentials() with other credentials = %v; want %v", err, errNotOurServer)
	}
}

func TestRepoRoot(t *testing.T) {
	tests := []struct {
		name    string
		files   []string // created under a temporary directory
		chdir   string   // relative to it
		want    string   // relative to it; "" means an error
		wantErr string
	}{
		{name: "here", files: []string{"go.mod"}, chdir: ".", want: "."},
		{name: "above", files: []string{"go.mod", "a/b/x.go"}, chdir: "a/b", want: "."},
		{name: "nearest", files: []string{"go.mod", "a/go.mod", "a/b/x.go"}, chdir: "a/b", want: "a"},
		{name: "none", files: []string{"a/x.go"}, chdir: "a", wantErr: "no go.mod"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range tt.files {
				path := filepath.Join(dir, f)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			t.Chdir(filepath.Join(dir, tt.chdir))
			got, err := repoRoot()
			if tt.wantErr != "" {
				// Only meaningful when no go.mod is above the temporary
				// directory itself.
				if err == nil && !strings.HasPrefix(dir, got) {
					t.Fatalf("repoRoot() = %q, nil; want an error", got)
				}
				if err != nil && !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("repoRoot() error = %v; want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if want := filepath.Join(dir, tt.want); err != nil || got != want {
				t.Fatalf("repoRoot() = %q, %v; want %q, nil", got, err, want)
			}
		})
	}
}

func TestChildEnv(t *testing.T) {
	env := []string{"PATH=/bin", "VGW_REGION=eu-west-1", "ROOT_ACCESS_KEY_ID=x", "LOGFILE=/tmp/l", "HOME=/root", "MY_ROOT_DIR=/r"}
	got := childEnv(env)
	want := []string{"PATH=/bin", "HOME=/root", "MY_ROOT_DIR=/r"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("childEnv(%q) = %q; want %q", env, got, want)
	}
}
