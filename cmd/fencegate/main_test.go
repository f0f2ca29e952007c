package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"fencegate/internal/devstack"
	"fencegate/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// envMap is a lookupEnvFunc over a map.
func envMap(m map[string]string) lookupEnvFunc {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// running is a run in a goroutine.
type running struct {
	cancel context.CancelFunc
	done   chan error
	stdout *testenv.Buffer
	stderr *testenv.Buffer
}

// startRun runs args until the test stops it with stop, or the test ends.
func startRun(t *testing.T, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1), stdout: &testenv.Buffer{}, stderr: &testenv.Buffer{}}
	go func() { r.done <- run(ctx, args, r.stdout, r.stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(60 * time.Second):
			t.Errorf("run(%q) did not return within 60s of cancellation", args)
		}
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		}
	})
	return r
}

// stop cancels the run and returns its error.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("run did not return within 60s of cancellation")
		return nil
	}
}

// waitReady polls base/readyz until it answers 200, failing the test if
// the run ends first or a minute passes.
func (r *running) waitReady(t *testing.T, base string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("run ended before %s/readyz was ready: %v", base, err)
		default:
		}
		resp, err := client.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/readyz not 200 after 60s (last: %v, %v)", base, resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + itoa(port)
}

func TestConfigErrorsNameTheFlag(t *testing.T) {
	const endpoints = "--etcd-endpoints=http://127.0.0.1:2379"
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string // in the error
	}{
		{"serve without etcd endpoints", []string{"serve"}, nil, "--etcd-endpoints is required"},
		{"no command without etcd endpoints", nil, nil, "--etcd-endpoints is required"},
		{"negative buffer", []string{"serve", endpoints, "--buffer-bytes", "-1"}, nil, "--buffer-bytes -1"},
		{"buffer not a size", []string{"serve", endpoints, "--buffer-bytes", "lots"}, nil, "-buffer-bytes"},
		{"buffer over max body", []string{"serve", endpoints, "--buffer-bytes", "2MiB", "--max-body-bytes", "1MiB"}, nil, "--buffer-bytes 2MiB must not exceed --max-body-bytes 1MiB"},
		{"zero buffer budget", []string{"serve", endpoints, "--buffer-budget-bytes", "0"}, nil, "--buffer-budget-bytes 0"},
		{"buffer budget under buffer", []string{"serve", endpoints, "--buffer-bytes", "2MiB", "--buffer-budget-bytes", "1MiB"}, nil, "--buffer-budget-bytes 1MiB must be at least --buffer-bytes 2MiB"},
		{"zero max body", []string{"serve", endpoints, "--max-body-bytes", "0"}, nil, "--max-body-bytes 0"},
		{"tiny max header", []string{"serve", endpoints, "--max-header-bytes", "10"}, nil, "--max-header-bytes 10"},
		{"negative max lock waiters", []string{"serve", endpoints, "--max-lock-waiters", "-1"}, nil, "--max-lock-waiters -1: must not be negative"},
		{"zero transfer chunk timeout", []string{"serve", endpoints, "--transfer-chunk-timeout", "0s"}, nil, "--transfer-chunk-timeout 0s"},
		{"negative requests per client", []string{"serve", endpoints, "--max-requests-per-client", "-1"}, nil, "--max-requests-per-client -1"},
		{"no s3 connections", []string{"serve", endpoints, "--s3-max-conns", "0"}, nil, "--s3-max-conns 0"},
		{"zero s3 conn wait", []string{"serve", endpoints, "--s3-conn-wait-timeout", "0s"}, nil, "--s3-conn-wait-timeout 0s"},
		{"listen without port", []string{"serve", endpoints, "--listen", "127.0.0.1"}, nil, `--listen "127.0.0.1"`},
		{"listen with bad port", []string{"serve", endpoints, "--listen", "127.0.0.1:http2"}, nil, `--listen "127.0.0.1:http2"`},
		{"etcd endpoint not a URL", []string{"serve", "--etcd-endpoints", "ftp://x:1"}, nil, `--etcd-endpoints "ftp://x:1"`},
		{"etcd endpoints mixed", []string{"serve", "--etcd-endpoints", "http://a:1,https://b:1"}, nil, "--etcd-endpoints mixes"},
		{"etcd username alone", []string{"serve", endpoints, "--etcd-username", "u"}, nil, "--etcd-password"},
		{"etcd cert alone", []string{"serve", endpoints, "--etcd-cert", "c.pem"}, nil, "--etcd-key"},
		{"etcd ca missing", []string{"serve", "--etcd-endpoints", "https://a:1", "--etcd-ca", "/nonexistent/ca.pem"}, nil, "--etcd-ca"},
		{"empty prefix", []string{"serve", endpoints, "--etcd-prefix", ""}, nil, "--etcd-prefix"},
		{"zero request timeout", []string{"serve", endpoints, "--etcd-request-timeout", "0s"}, nil, "--etcd-request-timeout"},
		{"negative write timeout", []string{"serve", endpoints, "--write-timeout", "-1s"}, nil, "--write-timeout"},
		{"zero read header timeout", []string{"serve", endpoints, "--read-header-timeout", "0s"}, nil, "--read-header-timeout"},
		{"zero shutdown timeout", []string{"serve", endpoints, "--shutdown-timeout", "0s"}, nil, "--shutdown-timeout"},
		{"s3 endpoint not a URL", []string{"serve", endpoints, "--s3-endpoint", "127.0.0.1:7070"}, nil, "--s3-endpoint"},
		{"s3 access key alone", []string{"serve", endpoints, "--s3-access-key", "AK"}, nil, "--s3-secret-key"},
		{"log format", []string{"serve", endpoints, "--log-format", "xml"}, nil, "--log-format"},
		{"otlp endpoint not http(s)", []string{"serve", endpoints, "--otlp-endpoint", "ftp://x"}, nil, `--otlp-endpoint "ftp://x"`},
		{"otlp endpoint without host", []string{"serve", endpoints, "--otlp-endpoint", "http://"}, nil, `--otlp-endpoint "http://"`},
		{"otlp endpoint in env", []string{"serve", endpoints}, map[string]string{"FENCEGATE_OTLP_ENDPOINT": "collector:4317"}, `--otlp-endpoint "collector:4317"`},
		{"sample ratio over 1", []string{"serve", endpoints, "--trace-sample-ratio", "2"}, nil, "--trace-sample-ratio 2: must be from 0 to 1"},
		{"sample ratio not a number", []string{"serve", endpoints, "--trace-sample-ratio", "half"}, nil, "-trace-sample-ratio"},
		{"dev sample ratio", []string{"dev", "--trace-sample-ratio", "-0.5"}, nil, "--trace-sample-ratio -0.5"},
		{"log level", []string{"serve", endpoints, "--log-level", "loud"}, nil, "-log-level"},
		{"unknown flag", []string{"serve", "--frobnicate"}, nil, "frobnicate"},
		{"stray argument", []string{"serve", endpoints, "extra"}, nil, `unexpected argument "extra"`},
		{"bad env value", []string{"serve", endpoints}, map[string]string{"FENCEGATE_BUFFER_BYTES": "many"}, "--buffer-bytes: invalid value in FENCEGATE_BUFFER_BYTES"},
		{"bad env value checked", []string{"serve"}, map[string]string{"FENCEGATE_ETCD_ENDPOINTS": "http://a:1", "FENCEGATE_BUFFER_BYTES": "-5"}, "--buffer-bytes -5"},
		{"dev listen", []string{"dev", "--listen", ":"}, nil, `--listen ":"`},
		{"dev s3 port", []string{"dev", "--s3-port", "70000"}, nil, "--s3-port 70000"},
		{"dev empty data", []string{"dev", "--data", ""}, nil, "--data"},
		{"unknown command", []string{"frobnicate"}, nil, `unknown command "frobnicate"`},
		{"version argument", []string{"version", "x"}, nil, `unexpected argument "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := runEnv(t.Context(), tt.args, envMap(tt.env), &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run(%q) = %v; want an error containing %q", tt.args, err, tt.want)
			}
			if !errors.As(err, new(*usageError)) {
				t.Errorf("run(%q) = %T; want a *usageError", tt.args, err)
			}
		})
	}
}

func TestConfigErrorsAreReportedTogether(t *testing.T) {
	err := runEnv(t.Context(), []string{"serve", "--listen", "x", "--buffer-bytes", "0"}, envMap(nil), &bytes.Buffer{}, &bytes.Buffer{})
	for _, want := range []string{"--listen", "--etcd-endpoints", "--buffer-bytes"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("run = %v; want an error containing %q", err, want)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"serve", "-h"}, {"dev", "--help"}} {
		var stdout bytes.Buffer
		err := runEnv(t.Context(), args, envMap(nil), &stdout, &bytes.Buffer{})
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("run(%q) = %v; want flag.ErrHelp", args, err)
		}
		for _, want := range []string{"--listen host:port  [$FENCEGATE_LISTEN]", "(default 127.0.0.1:8080)", "environment variable"} {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("run(%q) printed:\n%s\nwant it to contain %q", args, stdout.String(), want)
			}
		}
	}
	var stdout bytes.Buffer
	if err := runEnv(t.Context(), []string{"serve", "-h"}, envMap(nil), &stdout, &bytes.Buffer{}); !errors.Is(err, flag.ErrHelp) {
		t.Fatal(err)
	}
	for _, want := range []string{"[$FENCEGATE_ETCD_ENDPOINTS]", "[$FENCEGATE_S3_SECRET_KEY]", "AWS_ACCESS_KEY_ID", "(default 8MiB)", "(default 10s)"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("serve -h printed:\n%s\nwant it to contain %q", stdout.String(), want)
		}
	}
	stdout.Reset()
	if err := runEnv(t.Context(), []string{"help"}, envMap(nil), &stdout, &bytes.Buffer{}); err != nil || !strings.Contains(stdout.String(), "fencegate dev") {
		t.Errorf("run(help) = %v, printed %q; want the commands", err, stdout.String())
	}
}

func TestVersion(t *testing.T) {
	var stdout bytes.Buffer
	if err := run(t.Context(), []string{"version"}, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatalf("run(version): %v", err)
	}
	if out := stdout.String(); !strings.HasPrefix(out, "fencegate ") || !strings.Contains(out, "go: go1.") {
		t.Errorf("run(version) printed %q; want fencegate <version> and the Go version", out)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
