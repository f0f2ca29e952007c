package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// curlResult is what a curl command got.
type curlResult struct {
	status int
	header http.Header
	body   string
}

// printedCurls returns the curl command lines that dev printed, in order.
func printedCurls(out string) []string {
	var cmds []string
	for line := range strings.Lines(out) {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "curl ") {
			cmds = append(cmds, line)
		}
	}
	return cmds
}

// shellWords splits a command line into words as sh does for the subset
// that dev prints: words separated by spaces, and single-quoted strings.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var word strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case quoted && r == '\'':
			quoted = false
		case quoted:
			word.WriteRune(r)
		case r == '\'':
			quoted, inWord = true, true
		case r == ' ':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		case strings.ContainsRune("\"\\$`;&|<>(){}*?#~", r):
			t.Fatalf("command %q has %q, which this test does not parse as sh would", line, r)
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("command %q has an unterminated quote", line)
	}
	if inWord {
		words = append(words, word.String())
	}
	return words
}

// goCurl runs a printed curl command with net/http. It understands the
// options that dev prints: -i, -s, -X, --data-binary and -H.
func goCurl(t *testing.T, line string) curlResult {
	t.Helper()
	words := shellWords(t, line)
	if len(words) == 0 || words[0] != "curl" {
		t.Fatalf("not a curl command: %q", line)
	}
	method, target := "", ""
	var body *string
	header := http.Header{}
	for i := 1; i < len(words); i++ {
		arg := func() string {
			i++
			if i >= len(words) {
				t.Fatalf("%q: %s needs an argument", line, words[i-1])
			}
			return words[i]
		}
		switch w := words[i]; w {
		case "-i", "-s":
		case "-X":
			method = arg()
		case "--data-binary":
			b := arg()
			body = &b
		case "-H":
			name, value, ok := strings.Cut(arg(), ":")
			if !ok {
				t.Fatalf("%q: header without a colon", line)
			}
			header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
		default:
			if strings.HasPrefix(w, "-") || target != "" {
				t.Fatalf("%q: unexpected %q", line, w)
			}
			target = w
		}
	}
	var reader io.Reader
	if body != nil {
		reader = strings.NewReader(*body)
		if method == "" {
			method = http.MethodPost
		}
		header.Set("Content-Type", "application/x-www-form-urlencoded") // as curl sends
	}
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(t.Context(), method, target, reader)
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	for name, values := range header {
		req.Header[name] = values
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%q: reading body: %v", line, err)
	}
	return curlResult{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// realCurl runs a printed curl command with sh and curl, as a user
// pasting it would, and parses what -i printed.
func realCurl(t *testing.T, line string) curlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	var env []string
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !strings.HasSuffix(strings.ToLower(name), "_proxy") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "no_proxy=*")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", line, err)
	}
	if !strings.Contains(line, " -i ") {
		return curlResult{status: http.StatusOK, header: http.Header{}, body: string(out)}
	}
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(out))), nil)
	if err != nil {
		t.Fatalf("sh -c %q: parsing its output %q: %v", line, out, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return curlResult{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// wantSession checks that dev printed the four commands of the session
// for tokens token and token-1 exactly, runs them with exec, and checks
// their answers. The first write answers firstStatus.
func wantSession(t *testing.T, out, base string, token int, firstStatus int, exec func(*testing.T, string) curlResult) {
	t.Helper()
	object := base + "/v1/objects/dev/greeting"
	want := []string{
		fmt.Sprintf("curl -i -X PUT --data-binary 'hello from %d' -H 'X-Fence-Token: %d' %s", token, token, object),
		fmt.Sprintf("curl -i -X PUT --data-binary 'hello from %d' -H 'X-Fence-Token: %d' %s", token-1, token-1, object),
		"curl -i " + object,
		"curl -s " + base + "/v1/fences/s3/dev/greeting",
	}
	got := printedCurls(out)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("dev printed the commands\n%s\nwant\n%s\nfull output:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), out)
	}

	if r := exec(t, got[0]); r.status != firstStatus || r.header.Get("X-Fence-Token") != itoa(token) {
		t.Errorf("%s: status %d, X-Fence-Token %q; want %d, %d\n%s", got[0], r.status, r.header.Get("X-Fence-Token"), firstStatus, token, r.body)
	}

	r := exec(t, got[1])
	var problem struct {
		Type          string `json:"type"`
		HighWaterMark int    `json:"high_water_mark"`
	}
	if err := json.Unmarshal([]byte(r.body), &problem); err != nil {
		t.Errorf("%s: body %q: %v", got[1], r.body, err)
	}
	if r.status != http.StatusConflict || r.header.Get("Content-Type") != "application/problem+json" ||
		problem.Type != "urn:fencegate:problem:stale-token" || problem.HighWaterMark != token {
		t.Errorf("%s: status %d, Content-Type %q, body %s; want 409, a stale-token problem+json with high_water_mark %d",
			got[1], r.status, r.header.Get("Content-Type"), r.body, token)
	}

	r = exec(t, got[2])
	if r.status != http.StatusOK || r.header.Get("X-Fence-Token") != itoa(token) || r.body != fmt.Sprintf("hello from %d", token) {
		t.Errorf("%s: status %d, X-Fence-Token %q, body %q; want 200, %d, %q",
			got[2], r.status, r.header.Get("X-Fence-Token"), r.body, token, fmt.Sprintf("hello from %d", token))
	}

	r = exec(t, got[3])
	wantFence := fmt.Sprintf(`{"resource":"s3/dev/greeting","high_water_mark":%d}`, token)
	if r.status != http.StatusOK || strings.TrimSpace(r.body) != wantFence {
		t.Errorf("%s: status %d, body %q; want 200, %s", got[3], r.status, r.body, wantFence)
	}
}

// waitOutput waits until the run has printed want.
func (r *running) waitOutput(t *testing.T, want string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if out := r.stdout.String(); strings.Contains(out, want) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("run did not print %q within 30s", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDevSession(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	addr := freeAddr(t)
	base := "http://" + addr

	// A fresh --data: tokens 5 and 4, and the write creates the object.
	first := startRun(t, "dev", "--listen", addr, "--s3-listen", "127.0.0.1:0", "--data", data, "--log-level", "warn")
	first.waitReady(t, base)
	out := first.waitOutput(t, "Ctrl-C stops everything")
	for _, want := range []string{"console  " + base + "/ui/", "access key fencegate-dev", "secret key fencegate-dev-secret", "bucket dev", "The high-water mark of s3/dev/greeting is 0."} {
		if !strings.Contains(out, want) {
			t.Errorf("dev printed:\n%s\nwant it to contain %q", out, want)
		}
	}
	wantSession(t, out, base, 5, http.StatusCreated, goCurl)
	if res, err := http.Get(base + "/ui/"); err != nil || res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("GET the printed console URL: %v %v; want 200 text/html", res, err)
	} else {
		res.Body.Close()
	}
	// Someone else raises the mark further before the next run.
	if r := goCurl(t, "curl -i -X PUT --data-binary 'hello from 41' -H 'X-Fence-Token: 41' "+base+"/v1/objects/dev/greeting"); r.status != http.StatusOK {
		t.Fatalf("write with token 41: status %d; want 200\n%s", r.status, r.body)
	}
	if err := first.stop(t); err != nil {
		t.Fatalf("dev after cancellation = %v; want nil", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("the gateway still answers after dev returned")
	}

	// The same --data again: etcd and the objects persisted, so the
	// session continues from the high-water mark 41, and the object exists.
	second := startRun(t, "dev", "--listen", addr, "--s3-listen", "127.0.0.1:0", "--data", data, "--log-level", "warn")
	second.waitReady(t, base)
	out = second.waitOutput(t, "Ctrl-C stops everything")
	if !strings.Contains(out, "The high-water mark of s3/dev/greeting is 41, and the object exists.") {
		t.Errorf("dev printed:\n%s\nwant the high-water mark 41", out)
	}
	run := goCurl
	if _, err := exec.LookPath("curl"); err == nil {
		run = realCurl // as a user would paste them
	} else {
		t.Log("no curl on PATH: running the printed commands with net/http")
	}
	wantSession(t, out, base, 42, http.StatusOK, run)
	if err := second.stop(t); err != nil {
		t.Fatalf("dev after cancellation = %v; want nil", err)
	}
}

func TestDevMissingVersityGW(t *testing.T) {
	t.Setenv("FENCEGATE_VERSITYGW", filepath.Join(t.TempDir(), "nope"))
	err := run(t.Context(), []string{"dev", "--listen", freeAddr(t), "--data", t.TempDir()}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "FENCEGATE_VERSITYGW") {
		t.Fatalf("dev with a missing versitygw = %v; want an error naming FENCEGATE_VERSITYGW", err)
	}
}

func TestDevInterruptedDuringStart(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // as a Ctrl-C during start does
	if err := run(ctx, []string{"dev", "--listen", freeAddr(t), "--s3-listen", freeAddr(t), "--data", t.TempDir()}, io.Discard, io.Discard); err != nil {
		t.Fatalf("dev interrupted during start = %v; want nil", err)
	}
}

func TestListenAddressTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, args := range [][]string{
		{"dev", "--listen", ln.Addr().String(), "--data", t.TempDir()},
		{"serve", "--listen", ln.Addr().String(), "--etcd-endpoints", "http://127.0.0.1:1"},
	} {
		err := run(t.Context(), args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "listen") || !strings.Contains(err.Error(), "address already in use") {
			t.Errorf("run(%q) = %v; want a listen error", args, err)
		}
	}
}

// TestDevWithGCS: dev --stores s3,gcs also runs fake-gcs-server with the
// bucket dev-gcs in it, probes it in /readyz, and prints a session for
// it whose commands fence gcs/dev-gcs/greeting: token 5 is accepted,
// token 4 refused, the read answers token 5's bytes and token.
func TestDevWithGCS(t *testing.T) {
	addr := freeAddr(t)
	base := "http://" + addr
	r := startRun(t, "dev", "--stores", "s3,gcs", "--listen", addr, "--s3-listen", "", "--data", filepath.Join(t.TempDir(), "data"), "--log-level", "warn")
	r.waitReady(t, base)
	out := r.waitOutput(t, "Ctrl-C stops everything")
	for _, want := range []string{"fake-gcs-server", "bucket dev-gcs", "The high-water mark of gcs/dev-gcs/greeting is 0."} {
		if !strings.Contains(out, want) {
			t.Errorf("dev printed:\n%s\nwant it to contain %q", out, want)
		}
	}
	if r := goCurl(t, "curl -s "+base+"/readyz"); !strings.Contains(r.body, `"gcs":"ok"`) {
		t.Errorf("/readyz: %s; want a gcs probe that is ok", r.body)
	}
	object := base + "/v1/objects/dev-gcs/greeting"
	want := []string{
		"curl -i -X PUT --data-binary 'hello from 5' -H 'X-Fence-Token: 5' " + object,
		"curl -i -X PUT --data-binary 'hello from 4' -H 'X-Fence-Token: 4' " + object,
		"curl -i " + object,
		"curl -s " + base + "/v1/fences/gcs/dev-gcs/greeting",
	}
	got := printedCurls(out)
	if len(got) != 8 || strings.Join(got[4:], "\n") != strings.Join(want, "\n") {
		t.Fatalf("dev printed the commands\n%s\nwant the S3 session's four, then\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if res := goCurl(t, got[4]); res.status != http.StatusCreated || res.header.Get("X-Fence-Token") != "5" {
		t.Errorf("%s: %d, X-Fence-Token %q; want 201, 5\n%s", got[4], res.status, res.header.Get("X-Fence-Token"), res.body)
	}
	if res := goCurl(t, got[5]); res.status != http.StatusConflict || !strings.Contains(res.body, "stale-token") {
		t.Errorf("%s: %d %s; want 409 stale-token", got[5], res.status, res.body)
	}
	if res := goCurl(t, got[6]); res.status != http.StatusOK || res.body != "hello from 5" || res.header.Get("X-Fence-Token") != "5" {
		t.Errorf("%s: %d %q, X-Fence-Token %q; want 200 \"hello from 5\", 5", got[6], res.status, res.body, res.header.Get("X-Fence-Token"))
	}
	if res := goCurl(t, got[7]); strings.TrimSpace(res.body) != `{"resource":"gcs/dev-gcs/greeting","high_water_mark":5}` {
		t.Errorf("%s: %s; want the mark 5 of gcs/dev-gcs/greeting", got[7], res.body)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("dev after cancellation = %v; want nil", err)
	}
}

// TestDevRefusesNonLoopbackListen: dev serves without auth (no auth
// section) and with a published S3 key, so --listen and --s3-listen must
// be loopback addresses unless --insecure-listen-anywhere says otherwise:
// every other address is refused before anything starts, with a usage
// error (exit 2) that says why and names the flag.
func TestDevRefusesNonLoopbackListen(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the error; "" means accepted
	}{
		{[]string{"--listen", "0.0.0.0:0"}, "--listen 0.0.0.0:0: not a loopback address"},
		{[]string{"--listen", ":0"}, "--listen :0: not a loopback address"},
		{[]string{"--listen", "[::]:0"}, "--listen [::]:0: not a loopback address"},
		{[]string{"--listen", "192.0.2.1:0"}, "--listen 192.0.2.1:0: not a loopback address"},
		{[]string{"--listen", "[fe80::1%lo]:0"}, "not a loopback address"},
		{[]string{"--listen", "no-such-host.invalid:0"}, "--listen no-such-host.invalid:0: not a loopback address"},
		{[]string{"--s3-listen", "0.0.0.0:0"}, "--s3-listen 0.0.0.0:0: not a loopback address"},
		{[]string{"--s3-listen", ":0"}, "--s3-listen :0: not a loopback address"},
		{[]string{"--listen", "127.0.0.1:0"}, ""},
		{[]string{"--listen", "127.1.2.3:0"}, ""},
		{[]string{"--listen", "[::1]:0"}, ""},
		{[]string{"--listen", "localhost:0"}, ""},
		{[]string{"--s3-listen", "[::1]:0"}, ""},
		{[]string{"--s3-listen", ""}, ""},
		{[]string{"--listen", "0.0.0.0:0", "--insecure-listen-anywhere"}, ""},
		{[]string{"--listen", ":0", "--s3-listen", "[::]:0", "--insecure-listen-anywhere"}, ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append([]string{"--data", t.TempDir()}, tc.args...)
			_, err := parseDev(args, envMap(nil), io.Discard)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("parseDev(%q) = %v; want it accepted", args, err)
			case tc.want == "":
				return
			case err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--insecure-listen-anywhere"):
				t.Fatalf("parseDev(%q) = %v; want an error containing %q that names --insecure-listen-anywhere", args, err, tc.want)
			}
			// The whole command refuses it too, with exit status 2, before
			// anything starts.
			err = runEnv(t.Context(), append([]string{"dev"}, args...), envMap(nil), io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, new(*usageError)) {
				t.Fatalf("dev %q = %v; want a usage error containing %q", args, err, tc.want)
			}
		})
	}
}
