package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// buildFencegateTagged builds this command with the unsafe test hooks
// compiled in (-tags fencegate_unsafe_hooks), as internal/robustness does.
func buildFencegateTagged(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fencegate-unsafe-hooks")
	cmd := exec.Command("go", "build", "-tags", "fencegate_unsafe_hooks", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags fencegate_unsafe_hooks: %v\n%s", err, out)
	}
	return bin
}

// hooksOnLine is what the hooks log when they are on.
const hooksOnLine = "UNSAFE TEST HOOKS ARE ON"

// startServeWithHooks runs bin serve with FENCEGATE_UNSAFE_TEST_HOOKS set
// to hooks, against an etcd and an S3 that are not there, until it exits
// or logs that hooks are on (then it is killed), and returns its exit code
// (-1 when killed) and stderr.
func startServeWithHooks(t *testing.T, bin, hooks string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0",
		"--etcd-endpoints", "http://127.0.0.1:1", "--etcd-dial-timeout", "1s",
		"--s3-endpoint", "http://127.0.0.1:1", "--s3-access-key", "k", "--s3-secret-key", "s")
	cmd.Env = append(os.Environ(), unsafeTestHooksEnv+"="+hooks)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for lines := bufio.NewScanner(stderr); lines.Scan(); {
		out.WriteString(lines.Text() + "\n")
		if strings.Contains(lines.Text(), hooksOnLine) {
			_ = cmd.Process.Kill()
			break
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String()
	default:
		t.Fatalf("%s serve: %v", bin, err)
		return 0, ""
	}
}

// TestBuildTagDecidesHooks: a normal build of fencegate has
// no hook code at all, and refuses to start (exit 2, saying why) when
// FENCEGATE_UNSAFE_TEST_HOOKS is set, whatever its value, so a test suite
// that asks for hooks never silently gets the production protocol, and
// no environment can make a release binary unsafe. A build with
// -tags fencegate_unsafe_hooks parses the variable and turns the hooks
// on.
func TestBuildTagDecidesHooks(t *testing.T) {
	release, tagged := buildFencegate(t), buildFencegateTagged(t)
	for _, tc := range []struct {
		bin, name string
		hasHooks  bool
	}{{release, "release", false}, {tagged, "tagged", true}} {
		data, err := os.ReadFile(tc.bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{hooksOnLine, "after-fence %d %s"} {
			if got := bytes.Contains(data, []byte(s)); got != tc.hasHooks {
				t.Errorf("the %s binary holds %q: %v; want %v", tc.name, s, got, tc.hasHooks)
			}
		}
	}
	for _, tc := range []struct {
		name, bin, hooks string
		wantExit         int // -1: still running once the hooks logged that they are on
		want             string
	}{
		{"release, hooks asked for", release, "swap-order,unconditional-write", 2, "built without the unsafe test hooks"},
		{"release, pause asked for", release, "pause-after-fence=127.0.0.1:9", 2, "built without the unsafe test hooks"},
		{"release, a bad value", release, "swap_order", 2, "built without the unsafe test hooks"},
		{"tagged, a bad value", tagged, "swap_order", 2, `unknown item "swap_order"`},
		{"tagged, hooks asked for", tagged, "swap-order", -1, hooksOnLine},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := startServeWithHooks(t, tc.bin, tc.hooks)
			if code != tc.wantExit || !strings.Contains(stderr, tc.want) {
				t.Errorf("serve with %s=%q: exit %d, stderr:\n%s\nwant exit %d and %q", unsafeTestHooksEnv, tc.hooks, code, stderr, tc.wantExit, tc.want)
			}
			if tc.bin == release && strings.Contains(stderr, hooksOnLine) {
				t.Errorf("the release binary logged %q", hooksOnLine)
			}
		})
	}
}
