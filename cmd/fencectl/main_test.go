package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/backends/s3"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

var sharedS3 *testenv.S3

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithS3(m, &sharedS3))
}

// env is a gateway with the lock API on its own etcd, and a bucket.
type env struct {
	etcd   *testenv.Etcd
	url    string
	bucket string
}

var bucketSeq atomic.Int64

func newEnv(tb testing.TB, opts ...gateway.Option) *env {
	tb.Helper()
	e := &env{
		etcd:   testenv.StartEtcd(tb),
		bucket: fmt.Sprintf("f%d-%d", time.Now().UnixNano()%1e9, bucketSeq.Add(1)),
	}
	sharedS3.CreateBucket(tb, e.bucket)
	store, err := tokenstore.New(e.etcd.Client(tb), tokenstore.Config{RequestTimeout: 2 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	backend, err := s3.New(context.Background(), s3.Config{
		Endpoint:        sharedS3.Endpoint(),
		AccessKeyID:     sharedS3.AccessKey,
		SecretAccessKey: sharedS3.SecretKey,
		UsePathStyle:    true,
	})
	if err != nil {
		tb.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store, backend, append(opts, gateway.WithLocks(store), gateway.WithTickets(backend))...)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	tb.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// fencectl runs fencectl in-process against the env's gateway (through
// FENCEGATE_URL) with the extra environment variables, and returns its
// exit code and outputs.
func (e *env) fencectl(tb testing.TB, extraEnv []string, stdin string, args ...string) (code int, stdout, stderr string) {
	tb.Helper()
	environ := append([]string{"PATH=" + os.Getenv("PATH"), "FENCEGATE_URL=" + e.url}, extraEnv...)
	var out, errOut testenv.Buffer
	code = run(context.Background(), args, environ, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// waitForFile waits until path exists and is not empty, and returns it.
func waitForFile(tb testing.TB, path string) string {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 && bytes.HasSuffix(b, []byte("\n")) {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s not written after 30s", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLockTwiceNeverOverlaps runs `fencectl lock job -- sh -c '...'` twice
// at once. Each command logs its start and end with its FENCE_TOKEN: the
// two never overlap, and the second token is larger.
func TestLockTwiceNeverOverlaps(t *testing.T) {
	e := newEnv(t)
	log := filepath.Join(t.TempDir(), "log")
	script := `echo "start $FENCE_TOKEN $FENCE_LOCK" >> "$LOG"; sleep 0.3; echo "end $FENCE_TOKEN" >> "$LOG"`
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Go(func() {
			var stderr string
			codes[i], _, stderr = e.fencectl(t, []string{"LOG=" + log}, "", "lock", "--ttl", "5s", "job", "--", "sh", "-c", script)
			t.Logf("fencectl %d: exit %d, stderr:\n%s", i, codes[i], stderr)
		})
	}
	wg.Wait()
	if codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("exit codes %v; want 0 0", codes)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 4 {
		t.Fatalf("log %q; want 4 lines", lines)
	}
	var tokens [2]api.Token
	for i := range tokens {
		var tok uint64
		if _, err := fmt.Sscanf(lines[2*i], "start %d job", &tok); err != nil || tok == 0 {
			t.Fatalf("line %q: want start <FENCE_TOKEN> job (%v)", lines[2*i], err)
		}
		if want := fmt.Sprintf("end %d", tok); lines[2*i+1] != want {
			t.Fatalf("log %q: the commands overlap (want %q after %q)", lines, want, lines[2*i])
		}
		tokens[i] = api.Token(tok)
	}
	if tokens[1] <= tokens[0] {
		t.Fatalf("tokens %v; want the second above the first", tokens)
	}
}

// TestLockLostStopsCommand revokes the session behind a running command
// (as an expiry would end it): fencectl stops the command with SIGTERM and
// exits 124.
func TestLockLostStopsCommand(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	script := `trap 'echo terminated >> "$DIR/log"; exit 143' TERM
echo "$FENCE_SESSION" > "$DIR/session"
while :; do sleep 0.05; done`
	done := make(chan int, 1)
	go func() {
		code, _, stderr := e.fencectl(t, []string{"DIR=" + dir}, "", "lock", "--ttl", "2s", "job", "--", "sh", "-c", script)
		t.Logf("fencectl stderr:\n%s", stderr)
		done <- code
	}()
	session := waitForFile(t, filepath.Join(dir, "session"))
	req, _ := http.NewRequest(http.MethodDelete, e.url+"/v1/sessions/"+session, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("revoking session %s: %v %v", session, resp, err)
	}
	resp.Body.Close()
	select {
	case code := <-done:
		if code != exitLockLost {
			t.Fatalf("exit code %d; want %d (lock lost)", code, exitLockLost)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("fencectl still running 60s after its session was revoked")
	}
	if got := waitForFile(t, filepath.Join(dir, "log")); got != "terminated" {
		t.Fatalf("command's log %q; want it stopped by SIGTERM", got)
	}
}

// TestLockLostKillsStubbornCommand stops etcd under a running command
// whose shell ignores SIGTERM: once the session's TTL passes without a
// keepalive, fencectl sends SIGTERM, then SIGKILL after --kill-after, and
// exits 124 with the command's process gone.
func TestLockLostKillsStubbornCommand(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	script := `trap '' TERM
echo $$ > "$DIR/pid"
while :; do sleep 0.05; done`
	done := make(chan int, 1)
	go func() {
		code, _, stderr := e.fencectl(t, []string{"DIR=" + dir}, "", "lock", "--ttl", "2s", "--kill-after", "500ms", "job", "--", "sh", "-c", script)
		t.Logf("fencectl stderr:\n%s", stderr)
		done <- code
	}()
	pid, err := strconv.Atoi(waitForFile(t, filepath.Join(dir, "pid")))
	if err != nil {
		t.Fatal(err)
	}
	e.etcd.Stop(t)
	select {
	case code := <-done:
		if code != exitLockLost {
			t.Fatalf("exit code %d; want %d (lock lost)", code, exitLockLost)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("fencectl still running 60s after etcd stopped")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("kill(%d, 0) = %v; want the command gone (ESRCH)", pid, err)
	}
}

func TestLockExitStatusAndErrors(t *testing.T) {
	e := newEnv(t)
	if code, _, stderr := e.fencectl(t, nil, "", "lock", "job", "--", "sh", "-c", "exit 7"); code != 7 {
		t.Errorf("command exiting 7: fencectl exit %d; want 7 (%s)", code, stderr)
	}
	if code, _, _ := e.fencectl(t, nil, "", "lock", "job", "sh", "-c", "kill -KILL $$"); code != 128+9 {
		t.Errorf("command killed by SIGKILL (no --): fencectl exit %d; want 137", code)
	}
	if code, _, _ := e.fencectl(t, nil, "", "lock", "job", "--", "no-such-command-fencectl"); code != exitNoCommand {
		t.Errorf("missing command: exit %d; want %d", code, exitNoCommand)
	}
	if code, out, _ := e.fencectl(t, nil, "", "lock", "job", "--", "sh", "-c", `echo "$FENCE_TOKEN $FENCEGATE_URL"`); code != 0 || !strings.HasSuffix(strings.TrimSpace(out), e.url) {
		t.Errorf("command's output %q (exit %d); want its token and the gateway URL", out, code)
	}

	// Someone else holds the lock: --wait runs out.
	dir := t.TempDir()
	holderDone := make(chan int, 1)
	go func() {
		code, _, _ := e.fencectl(t, []string{"DIR=" + dir}, "", "lock", "job", "--", "sh", "-c", `echo "$FENCE_SESSION" > "$DIR/session"; sleep 1000 & wait`)
		holderDone <- code
	}()
	session := waitForFile(t, filepath.Join(dir, "session"))
	code, out, _ := e.fencectl(t, nil, "", "locks", "job")
	if code != 0 || !strings.Contains(out, "lock job: held, 0 waiting") {
		t.Fatalf("locks job: exit %d, %q; want held", code, out)
	}
	if code, _, stderr := e.fencectl(t, nil, "", "lock", "--wait", "300ms", "job", "--", "true"); code != exitNotLocked {
		t.Errorf("lock held elsewhere with --wait 300ms: exit %d; want %d (%s)", code, exitNotLocked, stderr)
	}
	// End the holder: revoke its session; its fencectl stops the command.
	req, _ := http.NewRequest(http.MethodDelete, e.url+"/v1/sessions/"+session, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code := <-holderDone; code != exitLockLost {
		t.Errorf("holder's fencectl: exit %d; want %d", code, exitLockLost)
	}
}

func TestObjectCommands(t *testing.T) {
	e := newEnv(t)
	file := filepath.Join(t.TempDir(), "report.csv")
	if err := os.WriteFile(file, []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	obj := e.bucket + "/reports/q3.csv"
	code, out, stderr := e.fencectl(t, nil, "", "put", obj, file, "--token", "5")
	if code != 0 || !strings.Contains(out, "created") || !strings.Contains(out, "token 5") {
		t.Fatalf("put: exit %d, %q, %s", code, out, stderr)
	}
	code, out, _ = e.fencectl(t, []string{"FENCE_TOKEN=7"}, "a,b\n3,4\n", "--json", "put", obj, "-")
	var put map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &put) != nil || put["token"] != float64(7) || put["created"] != false {
		t.Fatalf("put --json with FENCE_TOKEN from stdin: exit %d, %q", code, out)
	}
	code, _, stderr = e.fencectl(t, nil, "", "put", obj, file, "--token", "6")
	if code != exitRefused || !strings.Contains(stderr, "stale") {
		t.Fatalf("stale put: exit %d, %s; want %d", code, stderr, exitRefused)
	}
	code, _, stderr = e.fencectl(t, nil, "", "--json", "put", obj, file, "--token", "6")
	var failure struct {
		Problem  api.Problem `json:"problem"`
		ExitCode int         `json:"exit_code"`
	}
	if code != exitRefused || json.Unmarshal([]byte(stderr), &failure) != nil || failure.Problem.HighWaterMark != 7 || failure.ExitCode != exitRefused {
		t.Fatalf("stale put --json: exit %d, %s", code, stderr)
	}
	if code, out, _ := e.fencectl(t, nil, "", "get", obj); code != 0 || out != "a,b\n3,4\n" {
		t.Fatalf("get: exit %d, %q", code, out)
	}
	code, out, _ = e.fencectl(t, nil, "", "--json", "get", obj)
	var got map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got["token"] != float64(7) || got["body"] != "a,b\n3,4\n" {
		t.Fatalf("get --json: exit %d, %q", code, out)
	}
	copyTo := filepath.Join(t.TempDir(), "copy")
	if code, out, _ := e.fencectl(t, nil, "", "get", obj, "-o", copyTo); code != 0 || !strings.Contains(out, "token 7") {
		t.Fatalf("get -o: exit %d, %q", code, out)
	}
	if b, _ := os.ReadFile(copyTo); string(b) != "a,b\n3,4\n" {
		t.Fatalf("get -o wrote %q", b)
	}
	resource := "s3/" + obj
	if code, out, _ := e.fencectl(t, nil, "", "hwm", resource); code != 0 || !strings.Contains(out, "high-water mark 7") {
		t.Fatalf("hwm: exit %d, %q", code, out)
	}
	var fence api.Fence
	if code, out, _ := e.fencectl(t, nil, "", "--json", "hwm", resource); code != 0 || json.Unmarshal([]byte(out), &fence) != nil || fence.HighWaterMark != 7 {
		t.Fatalf("hwm --json: exit %d, %q", code, out)
	}
	if code, out, _ := e.fencectl(t, nil, "", "locks", "nobody"); code != 0 || out != "lock nobody: free\n" {
		t.Fatalf("locks: exit %d, %q", code, out)
	}
	if code, _, _ := e.fencectl(t, nil, "", "delete", obj, "--token", "8"); code != 0 {
		t.Fatalf("delete: exit %d", code)
	}
	if code, _, stderr := e.fencectl(t, nil, "", "get", obj); code != exitNotFound {
		t.Fatalf("get after delete: exit %d, %s; want %d", code, stderr, exitNotFound)
	}
	if code, _, _ := e.fencectl(t, nil, "", "put", obj, file, "--token", "my-redis-lock-value"); code != exitUsage {
		t.Fatalf("put with a random lock value: exit %d; want %d", code, exitUsage)
	}
}

func TestUsageAndFailures(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"--url", "ftp://x", "locks", "job"},
		{"put", e.bucket + "/k"},
		{"put", e.bucket + "/k", "/dev/null"}, // no token
		{"put", "no-key", "/dev/null", "--token", "5"},
		{"get"},
		{"hwm"},
		{"locks", "a/b"},
		{"lock", "job"},
		{"lock", "--ttl", "0s", "job", "--", "true"},
		{"lock", "--bogus", "job", "--", "true"},
	} {
		if code, _, _ := e.fencectl(t, nil, "", args...); code != exitUsage {
			t.Errorf("fencectl %q: exit %d; want %d", args, code, exitUsage)
		}
	}
	if code, out, _ := e.fencectl(t, nil, "", "--help"); code != 0 || !strings.Contains(out, "Exit codes") {
		t.Errorf("--help: exit %d, %q", code, out)
	}
	if code, _, _ := e.fencectl(t, nil, "", "--url", "http://127.0.0.1:1", "locks", "job"); code != exitFailure {
		t.Errorf("gateway unreachable: exit %d; want %d", code, exitFailure)
	}
}
