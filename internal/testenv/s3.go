package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

const (
	// VersitygwEnv names the environment variable that, when set, holds
	// the path of the versitygw binary that [StartS3] runs.
	VersitygwEnv = "FENCEGATE_VERSITYGW"

	// s3Region is the region of the S3 server and of its clients.
	s3Region = "us-east-1"
	// s3HealthPath is the health endpoint that versitygw is told to serve.
	s3HealthPath = "/healthz"
	// s3ReadyTimeout bounds how long versitygw may take to become healthy.
	s3ReadyTimeout = 20 * time.Second
	// s3StartAttempts is how many times versitygw is started on a new port
	// when the port picked was taken in the meantime.
	s3StartAttempts = 3
	// s3StopTimeout bounds the wait for the killed process to be reaped.
	s3StopTimeout = 10 * time.Second
	// s3RequestTimeout bounds the S3 requests made by [S3.CreateBucket]
	// and while starting.
	s3RequestTimeout = 30 * time.Second
)

// S3 is a versitygw S3 server running as a child process on 127.0.0.1
// with the posix backend in a fresh directory. It is made by [StartS3] or
// [StartS3Main]. Its methods are safe for concurrent use.
type S3 struct {
	// AccessKey and SecretKey are the root credentials, random per server.
	AccessKey string
	SecretKey string
	// Region is the region that the server and its clients use: us-east-1.
	Region string

	addr   string // host:port
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd.Wait returns
	output *syncBuffer   // the child's stdout and stderr

	stopOnce sync.Once
}

// StartS3 starts a versitygw server of its own for the test, waits until
// it is healthy, and kills it when the test and its subtests finish. The
// test fails, never skips, when the binary is missing or does not start;
// if the test failed, the server's output is logged at cleanup.
//
// Tests of a package that share one server start it with [StartS3Main]
// from TestMain instead.
func StartS3(tb testing.TB) *S3 {
	tb.Helper()
	bin, err := versitygwPath()
	if err != nil {
		tb.Fatal(err)
	}
	s, err := startS3(bin, tb.TempDir())
	if err != nil {
		tb.Fatalf("testenv: start S3: %v", err)
	}
	tb.Cleanup(func() {
		s.stop()
		if tb.Failed() {
			if out := s.output.String(); out != "" {
				tb.Logf("versitygw output:\n%s", out)
			}
		}
	})
	return s
}

// StartS3Main is [StartS3] for TestMain, where there is no testing.TB: it
// returns the server and a stop function that kills it and removes its
// directory, or an error. The stop function may be called more than once.
func StartS3Main() (*S3, func(), error) {
	bin, err := versitygwPath()
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "testenv-s3-")
	if err != nil {
		return nil, nil, fmt.Errorf("start S3: %w", err)
	}
	s, err := startS3(bin, dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("start S3: %w", err)
	}
	stop := func() {
		s.stop()
		_ = os.RemoveAll(dir)
	}
	return s, stop, nil
}

// Endpoint returns the server's base URL, http://127.0.0.1:PORT.
func (s *S3) Endpoint() string {
	return "http://" + s.addr
}

// Minio returns a new minio-go client of the server with the root
// credentials, path-style bucket lookup and region us-east-1. Its idle
// connections are closed when the test finishes.
func (s *S3) Minio(tb testing.TB) *minio.Client {
	tb.Helper()
	return s.MinioAt(tb, s.Endpoint())
}

// MinioAt is [S3.Minio] for a client that reaches the server through
// endpoint, an http:// URL such as a [CountingProxy]'s URL, signing its
// requests with the server's credentials.
func (s *S3) MinioAt(tb testing.TB, endpoint string) *minio.Client {
	tb.Helper()
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		tb.Fatalf("testenv: minio client: endpoint %q is not an http://host:port URL", endpoint)
	}
	transport, err := minio.DefaultTransport(false)
	if err != nil {
		tb.Fatalf("testenv: minio client: %v", err)
	}
	transport.Proxy = nil // 127.0.0.1 only; ignore HTTP_PROXY.
	tb.Cleanup(transport.CloseIdleConnections)
	c, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Secure:       false,
		Region:       s.Region,
		BucketLookup: minio.BucketLookupPath,
		Transport:    transport,
	})
	if err != nil {
		tb.Fatalf("testenv: minio client for %s: %v", endpoint, err)
	}
	return c
}

// CreateBucket creates the bucket name with S3 CreateBucket. A bucket that
// already exists and is owned by the caller is not an error.
func (s *S3) CreateBucket(tb testing.TB, name string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), s3RequestTimeout)
	defer cancel()
	err := s.Minio(tb).MakeBucket(ctx, name, minio.MakeBucketOptions{Region: s.Region})
	if err != nil && minio.ToErrorResponse(err).Code != "BucketAlreadyOwnedByYou" {
		tb.Fatalf("testenv: create bucket %q: %v", name, err)
	}
}

// startS3 runs bin with the posix backend in dir on a free port and waits
// until it is healthy, retrying on a new port if the port was taken.
func startS3(bin, dir string) (*S3, error) {
	var lastErr error
	for range s3StartAttempts {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &S3{
			AccessKey: rand.Text(),
			SecretKey: rand.Text(),
			Region:    s3Region,
			addr:      "127.0.0.1:" + strconv.Itoa(port),
			exited:    make(chan struct{}),
			output:    &syncBuffer{},
		}
		lastErr = s.launch(bin, dir)
		if lastErr == nil {
			lastErr = s.waitHealthy()
		}
		if lastErr == nil {
			lastErr = s.checkCredentials()
		}
		if lastErr == nil {
			return s, nil
		}
		s.stop()
		// Another process took the port first: versitygw says so before
		// exiting, and the other process may even have answered the health
		// check, but it does not know this server's credentials.
		if !strings.Contains(s.output.String(), "address already in use") &&
			!errors.Is(lastErr, errNotOurServer) {
			break
		}
	}
	return nil, lastErr
}

// errNotOurServer says that the server answering on the port rejects the
// credentials that the child was started with: most likely another process
// took the port and the child failed to listen.
var errNotOurServer = errors.New("the server rejects the credentials it was started with; another process may hold the port")

// checkCredentials lists the buckets with the server's credentials, to
// make sure that the healthy server on the port is the child.
func (s *S3) checkCredentials() error {
	transport, err := minio.DefaultTransport(false)
	if err != nil {
		return err
	}
	transport.Proxy = nil
	defer transport.CloseIdleConnections()
	c, err := minio.New(s.addr, &minio.Options{
		Creds:        credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Region:       s.Region,
		BucketLookup: minio.BucketLookupPath,
		Transport:    transport,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s3RequestTimeout)
	defer cancel()
	if _, err := c.ListBuckets(ctx); err != nil {
		// versitygw answers 404 XAdminUserNotFound to an unknown access
		// key, other servers 403: any S3 error response counts.
		if minio.ToErrorResponse(err).StatusCode >= 400 {
			return fmt.Errorf("versitygw on %s: %w: list buckets: %v", s.addr, errNotOurServer, err)
		}
		return fmt.Errorf("versitygw on %s: list buckets: %v; output:\n%s", s.addr, err, s.output.String())
	}
	return nil
}

// launch starts the child process.
func (s *S3) launch(bin, dir string) error {
	cmd := exec.Command(bin,
		"--port", s.addr,
		"--quiet",
		"--health", s3HealthPath,
		"posix", dir,
	)
	cmd.Env = append(childEnv(os.Environ()),
		"ROOT_ACCESS_KEY="+s.AccessKey,
		"ROOT_SECRET_KEY="+s.SecretKey,
	)
	cmd.Stdout = s.output
	cmd.Stderr = s.output
	cmd.WaitDelay = time.Second
	isolate(cmd)
	if err := cmd.Start(); err != nil {
		close(s.exited)
		return fmt.Errorf("run %s: %w", bin, err)
	}
	s.cmd = cmd
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	return nil
}

// waitHealthy polls the health endpoint until it answers 200 OK.
func (s *S3) waitHealthy() error {
	client := &http.Client{
		Timeout:   time.Second,
		Transport: &http.Transport{DisableKeepAlives: true},
	}
	healthURL := s.Endpoint() + s3HealthPath
	deadline := time.Now().Add(s3ReadyTimeout)
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("versitygw on %s exited before it was healthy (%v); output:\n%s",
				s.addr, s.cmd.ProcessState, s.output.String())
		default:
		}
		resp, err := client.Get(healthURL)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("versitygw on %s not healthy after %v (last: %v); output:\n%s",
				s.addr, s3ReadyTimeout, healthResult(resp, err), s.output.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop kills the child's process group and waits until it is reaped.
func (s *S3) stop() {
	s.stopOnce.Do(func() {
		if s.cmd == nil {
			return
		}
		select {
		case <-s.exited:
			// Reaped already (it failed to start): its process group id
			// may belong to someone else by now.
			return
		default:
		}
		kill(s.cmd)
		select {
		case <-s.exited:
		case <-time.After(s3StopTimeout):
		}
	})
}

// healthResult describes the last health check for an error message.
func healthResult(resp *http.Response, err error) string {
	if err != nil {
		return err.Error()
	}
	return resp.Status
}

// childEnv returns env without the variables that would override the
// flags and credentials given to versitygw.
func childEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "VGW_") || strings.HasPrefix(name, "ROOT_") || name == "LOGFILE" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// versitygwPath returns the versitygw binary to run: $FENCEGATE_VERSITYGW
// if set, else bin/versitygw under the repository root.
func versitygwPath() (string, error) {
	path := os.Getenv(VersitygwEnv)
	if path == "" {
		root, err := repoRoot()
		if err != nil {
			return "", err
		}
		path = filepath.Join(root, "bin", "versitygw")
	}
	if info, err := os.Stat(path); err != nil || info.IsDir() {
		return "", fmt.Errorf("versitygw not found at %s; build it with `make tools` "+
			"(GOBIN=$PWD/bin go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)", path)
	}
	return path, nil
}

// repoRoot returns the nearest directory at or above the working directory
// that holds go.mod.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("repository root: %w", err)
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("repository root: no go.mod at or above %s; set %s to the versitygw binary", wd, VersitygwEnv)
		}
		dir = parent
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p to the buffer.
func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
