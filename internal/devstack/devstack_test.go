package devstack_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"fencegate/internal/devstack"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testLogger logs to the test's output.
func testLogger(tb testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tb.Output(), nil))
}

func startEtcd(tb testing.TB, dir string) *devstack.Etcd {
	tb.Helper()
	return startEtcdConfig(tb, devstack.EtcdConfig{Dir: dir, UnsafeNoFsync: true, Logger: testLogger(tb)})
}

func startEtcdConfig(tb testing.TB, cfg devstack.EtcdConfig) *devstack.Etcd {
	tb.Helper()
	e, err := devstack.StartEtcd(tb.Context(), cfg)
	if err != nil {
		tb.Fatalf("StartEtcd: %v", err)
	}
	tb.Cleanup(e.Close)
	return e
}

func etcdClient(tb testing.TB, e *devstack.Etcd) *clientv3.Client {
	tb.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   e.Endpoints(),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		tb.Fatalf("clientv3.New(%v): %v", e.Endpoints(), err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

func startS3(tb testing.TB, dir string) *devstack.S3Server {
	tb.Helper()
	s, err := devstack.StartVersityGW(tb.Context(), devstack.S3Config{Dir: dir, AccessKey: "devstack-test", SecretKey: "devstack-test-secret"})
	if err != nil {
		tb.Fatalf("StartVersityGW: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

func s3Client(s *devstack.S3Server) *s3.Client {
	return s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint()),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
}

func TestEtcdKeepsDataAcrossRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd")
	e := startEtcd(t, dir)
	c := etcdClient(t, e)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("Put(k): %v", err)
	}
	_ = c.Close()
	e.Close()
	e.Close() // closing twice does nothing
	if conn, err := net.DialTimeout("tcp", strings.TrimPrefix(e.Endpoints()[0], "http://"), time.Second); err == nil {
		conn.Close()
		t.Fatalf("etcd at %v still accepts connections after Close", e.Endpoints())
	}

	// A second run on the same directory, on new ports, has the data.
	e2 := startEtcd(t, dir)
	resp, err := etcdClient(t, e2).Get(ctx, "k")
	if err != nil {
		t.Fatalf("Get(k) after restart: %v", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get(k) after restart = %v; want v", resp.Kvs)
	}
}

func TestEtcdDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	startEtcd(t, dir)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := devstack.StartEtcd(ctx, devstack.EtcdConfig{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("StartEtcd on a directory in use = %v; want an error saying so", err)
	}
}

func TestEtcdFixedPorts(t *testing.T) {
	clientPort, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	e, err := devstack.StartEtcd(t.Context(), devstack.EtcdConfig{Dir: t.TempDir(), ClientPort: clientPort, UnsafeNoFsync: true})
	if err != nil {
		t.Fatalf("StartEtcd: %v", err)
	}
	defer e.Close()
	if got, want := e.Endpoints()[0], "http://127.0.0.1:"+strconv.Itoa(clientPort); got != want {
		t.Errorf("Endpoints()[0] = %q; want %q", got, want)
	}
	// The same client port again fails: it is taken.
	_, err = devstack.StartEtcd(t.Context(), devstack.EtcdConfig{Dir: t.TempDir(), ClientPort: clientPort, UnsafeNoFsync: true})
	if !errors.Is(err, devstack.ErrAddrInUse) {
		t.Fatalf("StartEtcd on a taken client port = %v; want %v", err, devstack.ErrAddrInUse)
	}
}

func TestEtcdRestartFromConfig(t *testing.T) {
	e := startEtcd(t, t.TempDir())
	cfg := e.Config()
	if cfg.ClientPort == 0 || cfg.PeerPort == 0 {
		t.Fatalf("Config() ports = %d, %d; want the ports in use", cfg.ClientPort, cfg.PeerPort)
	}
	if got, want := e.Endpoints()[0], "http://127.0.0.1:"+strconv.Itoa(cfg.ClientPort); got != want {
		t.Errorf("Endpoints()[0] = %q; want %q", got, want)
	}
	c := etcdClient(t, e)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("Put(k): %v", err)
	}
	e.Close()

	// Started again from its config, it is on the same ports and has the
	// data; the old client reconnects.
	e2 := startEtcdConfig(t, cfg)
	if got, want := e2.Endpoints(), e.Endpoints(); !slices.Equal(got, want) {
		t.Fatalf("Endpoints() after restart = %v; want %v", got, want)
	}
	resp, err := c.Get(ctx, "k")
	if err != nil {
		t.Fatalf("Get(k) after restart: %v", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get(k) after restart = %v; want v", resp.Kvs)
	}
}

func TestVersityGW(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s3")
	s := startS3(t, dir)
	if !strings.HasPrefix(s.Endpoint(), "http://127.0.0.1:") {
		t.Errorf("Endpoint() = %q; want http://127.0.0.1:PORT", s.Endpoint())
	}
	for range 2 { // the second time, the bucket exists: not an error
		if err := s.CreateBucket(t.Context(), "bucket"); err != nil {
			t.Fatalf("CreateBucket: %v", err)
		}
	}
	client := s3Client(s)
	_, err := client.PutObject(t.Context(), &s3.PutObjectInput{
		Bucket: aws.String("bucket"),
		Key:    aws.String("key"),
		Body:   strings.NewReader("hello"),
	})
	if err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bucket", "key")); err != nil {
		t.Errorf("object not stored under the posix root: %v", err)
	}

	s.Close()
	s.Close() // closing twice does nothing
	select {
	case <-s.Exited():
	default:
		t.Fatal("Exited() not closed after Close")
	}
	if _, err := http.Get(s.Endpoint() + "/healthz"); err == nil {
		t.Fatal("versitygw still answers after Close")
	}

	// A second run on the same directory keeps buckets and objects.
	s2 := startS3(t, dir)
	if err := s2.CreateBucket(t.Context(), "bucket"); err != nil {
		t.Fatalf("CreateBucket after restart: %v", err)
	}
	out, err := s3Client(s2).GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String("key")})
	if err != nil {
		t.Fatalf("GetObject after restart: %v", err)
	}
	defer out.Body.Close()
	var body bytes.Buffer
	if _, err := body.ReadFrom(out.Body); err != nil || body.String() != "hello" {
		t.Fatalf("GetObject after restart = %q, %v; want %q", body.String(), err, "hello")
	}
}

func TestVersityGWRandomCredentials(t *testing.T) {
	s, err := devstack.StartVersityGW(t.Context(), devstack.S3Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("StartVersityGW: %v", err)
	}
	defer s.Close()
	if s.AccessKey == "" || s.SecretKey == "" {
		t.Fatalf("credentials = %q, %q; want random ones", s.AccessKey, s.SecretKey)
	}
	if err := s.CreateBucket(t.Context(), "bucket"); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
}

func TestVersityGWStartFailure(t *testing.T) {
	// A binary that exits at once: the error says so and carries its output.
	script := filepath.Join(t.TempDir(), "versitygw")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'boom: bad flags' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := devstack.StartVersityGW(t.Context(), devstack.S3Config{Binary: script, Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "exited before it was healthy") || !strings.Contains(err.Error(), "boom: bad flags") {
		t.Fatalf("StartVersityGW(failing binary) = %v; want an error with its output", err)
	}

	_, err = devstack.StartVersityGW(t.Context(), devstack.S3Config{Binary: filepath.Join(t.TempDir(), "missing"), Dir: t.TempDir()})
	if err == nil {
		t.Fatal("StartVersityGW(missing binary) = nil error")
	}
}

func TestVersityGWCancelled(t *testing.T) {
	// A binary that never becomes healthy: cancelling ctx stops the wait.
	script := filepath.Join(t.TempDir(), "versitygw")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := devstack.StartVersityGW(ctx, devstack.S3Config{Binary: script, Dir: t.TempDir()})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("StartVersityGW(cancelled) = %v; want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("StartVersityGW(cancelled) took %v", d)
	}
}

func TestFindVersityGW(t *testing.T) {
	t.Run("env", func(t *testing.T) {
		bin := filepath.Join(t.TempDir(), "gw")
		if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv(devstack.VersityGWEnv, bin)
		if got, err := devstack.FindVersityGW(); err != nil || got != bin {
			t.Fatalf("FindVersityGW() = %q, %v; want %q", got, err, bin)
		}
	})
	t.Run("env not a file", func(t *testing.T) {
		t.Setenv(devstack.VersityGWEnv, t.TempDir())
		if _, err := devstack.FindVersityGW(); err == nil || !strings.Contains(err.Error(), devstack.VersityGWEnv) ||
			!strings.Contains(err.Error(), "make tools") {
			t.Fatalf("FindVersityGW() error = %v; want one naming %s and saying how to build it", err, devstack.VersityGWEnv)
		}
	})
	t.Run("repository", func(t *testing.T) {
		t.Setenv(devstack.VersityGWEnv, "")
		got, err := devstack.FindVersityGW()
		if err != nil {
			t.Fatalf("FindVersityGW(): %v", err)
		}
		if !strings.HasSuffix(got, filepath.Join("bin", "versitygw")) {
			t.Fatalf("FindVersityGW() = %q; want .../bin/versitygw", got)
		}
	})
	t.Run("missing", func(t *testing.T) {
		t.Setenv(devstack.VersityGWEnv, "")
		t.Chdir(t.TempDir())
		_, err := devstack.FindVersityGW()
		want := "make tools` (GOBIN=$PWD/bin go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("FindVersityGW() error = %v; want one containing %q", err, want)
		}
	})
}

func TestFreePortsAreDistinct(t *testing.T) {
	ports, err := devstack.FreePorts(64)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[int]bool)
	for _, p := range ports {
		if p <= 0 || p > 65535 || seen[p] {
			t.Fatalf("FreePorts(64) = %v: port %d is out of range or repeated", ports, p)
		}
		seen[p] = true
	}
}
