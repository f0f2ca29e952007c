package testenv

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"go.uber.org/goleak"

	"fencegate/internal/devstack"
)

// VersitygwEnv names the environment variable that, when set, holds the
// path of the versitygw binary that [StartS3] runs
// ([devstack.FindVersityGW]).
const VersitygwEnv = devstack.VersityGWEnv

// S3 is a versitygw S3 server running as a child process on 127.0.0.1
// with the posix backend in a fresh directory. It is made by [StartS3],
// [StartS3Main] or [RunWithS3]. Its methods are safe for concurrent use.
type S3 struct {
	// AccessKey and SecretKey are the root credentials, random per server.
	AccessKey string
	SecretKey string
	// Region is the region that the server and its clients use: us-east-1.
	Region string

	server *devstack.S3Server
	dir    string // the posix backend's root: a directory per bucket
}

// newS3 returns the S3 of a server running on dir.
func newS3(server *devstack.S3Server, dir string) *S3 {
	return &S3{
		AccessKey: server.AccessKey,
		SecretKey: server.SecretKey,
		Region:    server.Region,
		server:    server,
		dir:       dir,
	}
}

// StartS3 starts a versitygw server of its own for the test, waits until
// it is healthy, and stops it when the test and its subtests finish. The
// test fails, never skips, when the binary is missing or does not start;
// if the test failed, the server's output is logged at cleanup.
//
// Tests of a package that share one server start it with [RunWithS3] (or
// [StartS3Main]) from TestMain instead.
func StartS3(tb testing.TB) *S3 {
	tb.Helper()
	dir := tb.TempDir()
	server, err := devstack.StartVersityGW(startContext(tb), devstack.S3Config{Dir: dir})
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	tb.Cleanup(func() {
		server.Close()
		if tb.Failed() {
			if out := server.Output(); out != "" {
				tb.Logf("versitygw output:\n%s", out)
			}
		}
	})
	return newS3(server, dir)
}

// StartS3Main is [StartS3] for TestMain, where there is no testing.TB: it
// returns the server and a stop function that stops it and removes its
// directory, or an error. The stop function may be called more than once.
// [RunWithS3] does all that TestMain needs with it.
func StartS3Main() (*S3, func(), error) {
	dir, err := os.MkdirTemp("", "testenv-s3-")
	if err != nil {
		return nil, nil, fmt.Errorf("start S3: %w", err)
	}
	server, err := devstack.StartVersityGW(context.Background(), devstack.S3Config{Dir: dir})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	stop := func() {
		server.Close()
		_ = os.RemoveAll(dir)
	}
	return newS3(server, dir), stop, nil
}

// RunWithS3 is the TestMain of a package whose tests share one S3 server:
// it starts the server with [StartS3Main] and sets *shared to it, runs the
// tests, stops the server, and then, if the tests passed, checks that no
// goroutine is left running (goleak). It returns the exit code for
// os.Exit; when the server does not start, it prints why and returns 1
// without running the tests.
//
//	var sharedS3 *testenv.S3
//
//	func TestMain(m *testing.M) {
//		os.Exit(testenv.RunWithS3(m, &sharedS3))
//	}
//
// The tests then call sharedS3.Minio(t) and sharedS3.CreateBucket(t, name),
// each with a bucket of its own.
func RunWithS3(m *testing.M, shared **S3) int {
	s, stop, err := StartS3Main()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	*shared = s
	code := m.Run()
	stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	return code
}

// Endpoint returns the server's base URL, http://127.0.0.1:PORT.
func (s *S3) Endpoint() string {
	return s.server.Endpoint()
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

// CreateBucket creates the bucket name with S3 CreateBucket, or empties it
// when it exists already, so that a test starts from an empty bucket also
// when it runs again in the same process (go test -count=N).
func (s *S3) CreateBucket(tb testing.TB, name string) {
	tb.Helper()
	if err := s.server.CreateBucket(tb.Context(), name); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	mc := s.Minio(tb)
	objects := mc.ListObjects(tb.Context(), name, minio.ListObjectsOptions{Recursive: true})
	for res := range mc.RemoveObjects(tb.Context(), name, objects, minio.RemoveObjectsOptions{}) {
		if res.Err != nil {
			tb.Fatalf("testenv: empty bucket %s: remove %s: %v", name, res.ObjectName, res.Err)
		}
	}
}

// PlaceFile writes data as the object bucket/key straight into the
// bucket's directory on disk, as an operator's file put there before
// versitygw served it. versitygw's posix backend keeps an object's ETag in
// an extended attribute that only its own writes set, so it serves such a
// file with no ETag at all (until something writes the object through S3).
// The bucket must exist.
func (s *S3) PlaceFile(tb testing.TB, bucket, key string, data []byte) {
	tb.Helper()
	path := filepath.Join(s.dir, bucket, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		tb.Fatalf("testenv: place %s/%s: %v", bucket, key, err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatalf("testenv: place %s/%s: %v", bucket, key, err)
	}
}

// ReadStored reads bucket/key with mc, an S3 client that the code under
// test does not use for writing (minio-go), so that a test sees what
// landed rather than what the writer believes: the object's bytes and the
// fence token it records (x-amz-meta-fence-token), or ok false when the
// key is absent. Any other failure fails tb.
func ReadStored(tb testing.TB, mc *minio.Client, bucket, key string) (body []byte, token string, ok bool) {
	tb.Helper()
	ctx := context.Background()
	info, err := mc.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
	if minio.ToErrorResponse(err).Code == "NoSuchKey" {
		return nil, "", false
	}
	if err != nil {
		tb.Fatalf("stat %s/%s: %v", bucket, key, err)
	}
	obj, err := mc.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		tb.Fatalf("get %s/%s: %v", bucket, key, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		tb.Fatalf("read %s/%s: %v", bucket, key, err)
	}
	return b, info.UserMetadata["Fence-Token"], true
}
