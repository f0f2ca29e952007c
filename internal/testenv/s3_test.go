package testenv_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"fencegate/internal/testenv"
)

func TestS3PutGet(t *testing.T) {
	s := testenv.StartS3(t)
	if got, want := s.Region, "us-east-1"; got != want {
		t.Errorf("Region = %q; want %q", got, want)
	}
	if !strings.HasPrefix(s.Endpoint(), "http://127.0.0.1:") {
		t.Errorf("Endpoint() = %q; want http://127.0.0.1:PORT", s.Endpoint())
	}
	s.CreateBucket(t, "bucket")
	s.CreateBucket(t, "bucket") // already owned: not an error

	c := s.Minio(t)
	ctx := timeout(t)
	mustPutObject(t, c, "bucket", "dir/object", "hello", minio.PutObjectOptions{})
	if got := mustGetObject(t, c, "bucket", "dir/object"); got != "hello" {
		t.Fatalf("GetObject(dir/object) = %q; want %q", got, "hello")
	}
	if _, err := c.StatObject(ctx, "bucket", "missing", minio.StatObjectOptions{}); minio.ToErrorResponse(err).StatusCode != http.StatusNotFound {
		t.Fatalf("StatObject(missing) error = %v; want 404", err)
	}
}

func TestS3ConditionalPut(t *testing.T) {
	s := testenv.StartS3(t)
	s.CreateBucket(t, "bucket")
	c := s.Minio(t)

	ifNoneMatch := minio.PutObjectOptions{}
	ifNoneMatch.SetMatchETagExcept("*")
	tests := []struct {
		name       string
		body       string
		wantStatus int // 0: success
	}{
		{name: "create", body: "first"},
		{name: "exists", body: "second", wantStatus: http.StatusPreconditionFailed},
	}
	for _, tt := range tests {
		_, err := c.PutObject(timeout(t), "bucket", "object", strings.NewReader(tt.body), int64(len(tt.body)), ifNoneMatch)
		if got := minio.ToErrorResponse(err).StatusCode; got != tt.wantStatus {
			t.Fatalf("%s: PutObject(If-None-Match: *) status = %d (err %v); want %d", tt.name, got, err, tt.wantStatus)
		}
	}
	if got := mustGetObject(t, c, "bucket", "object"); got != "first" {
		t.Fatalf("GetObject(object) = %q; want %q", got, "first")
	}
}

func TestS3InstancesAreIndependent(t *testing.T) {
	a, b := testenv.StartS3(t), testenv.StartS3(t)
	if a.Endpoint() == b.Endpoint() || a.AccessKey == b.AccessKey {
		t.Fatalf("two servers share endpoint %s or access key", a.Endpoint())
	}
	a.CreateBucket(t, "bucket")
	exists, err := b.Minio(t).BucketExists(timeout(t), "bucket")
	if err != nil || exists {
		t.Fatalf("BucketExists(bucket) on b = %v, %v; want false, nil", exists, err)
	}
}

func TestStartS3MainNotFound(t *testing.T) {
	t.Setenv(testenv.VersitygwEnv, "/nonexistent/versitygw")
	s, stop, err := testenv.StartS3Main()
	if err == nil {
		stop()
		t.Fatalf("StartS3Main() = %v, nil; want an error", s)
	}
	for _, want := range []string{
		"/nonexistent/versitygw",
		"build it with `make tools` (GOBIN=$PWD/bin go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("StartS3Main() error = %q; want it to contain %q", err, want)
		}
	}
}

func TestStartS3MainExits(t *testing.T) {
	bin, err := exec.LookPath("false")
	if err != nil {
		t.Fatalf("LookPath(false): %v", err)
	}
	t.Setenv(testenv.VersitygwEnv, bin)
	s, stop, err := testenv.StartS3Main()
	if err == nil {
		stop()
		t.Fatalf("StartS3Main() with %s = %v, nil; want an error", bin, s)
	}
	if want := "exited before it was healthy"; !strings.Contains(err.Error(), want) {
		t.Fatalf("StartS3Main() with %s error = %q; want it to contain %q", bin, err, want)
	}
}

func TestStartS3Main(t *testing.T) {
	s, stop, err := testenv.StartS3Main()
	if err != nil {
		t.Fatalf("StartS3Main(): %v", err)
	}
	defer stop()
	s.CreateBucket(t, "bucket")
	stop()
	stop() // stopping twice is a no-op
	if _, err := http.Get(s.Endpoint() + "/"); err == nil {
		t.Fatalf("GET %s after stop succeeded; want a connection error", s.Endpoint())
	}
}

// timeout returns a context that ends with the test or after 30 seconds.
// TestS3PlaceFile: a file placed in the bucket's directory is served as an
// object without an ETag, until it is written through S3.
func TestS3PlaceFile(t *testing.T) {
	s := testenv.StartS3(t)
	s.CreateBucket(t, "bucket")
	c := s.Minio(t)
	s.PlaceFile(t, "bucket", "dir/placed", []byte("placed"))
	if got := mustGetObject(t, c, "bucket", "dir/placed"); got != "placed" {
		t.Fatalf("GetObject(dir/placed) = %q; want %q", got, "placed")
	}
	info, err := c.StatObject(timeout(t), "bucket", "dir/placed", minio.StatObjectOptions{})
	if err != nil || info.ETag != "" {
		t.Fatalf("StatObject(placed) = ETag %q, %v; want no ETag", info.ETag, err)
	}
	mustPutObject(t, c, "bucket", "dir/placed", "placed", minio.PutObjectOptions{})
	info, err = c.StatObject(timeout(t), "bucket", "dir/placed", minio.StatObjectOptions{})
	if err != nil || info.ETag == "" {
		t.Fatalf("StatObject after a PutObject = ETag %q, %v; want an ETag", info.ETag, err)
	}
}

func timeout(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(tb.Context(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

func mustPutObject(tb testing.TB, c *minio.Client, bucket, key, body string, opts minio.PutObjectOptions) {
	tb.Helper()
	if _, err := c.PutObject(timeout(tb), bucket, key, strings.NewReader(body), int64(len(body)), opts); err != nil {
		tb.Fatalf("PutObject(%s/%s): %v", bucket, key, err)
	}
}

func mustGetObject(tb testing.TB, c *minio.Client, bucket, key string) string {
	tb.Helper()
	obj, err := c.GetObject(timeout(tb), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		tb.Fatalf("GetObject(%s/%s): %v", bucket, key, err)
	}
	defer obj.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, obj); err != nil {
		tb.Fatalf("GetObject(%s/%s): read: %v", bucket, key, err)
	}
	return buf.String()
}
