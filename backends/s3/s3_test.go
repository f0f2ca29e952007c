package s3_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"fencegate/api"
	"fencegate/backends/s3"
	"fencegate/internal/testenv"
)

var server *testenv.S3

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithS3(m, &server))
}

func newClient(tb testing.TB, endpoint string, timeout time.Duration) *s3.Client {
	tb.Helper()
	c, err := s3.New(context.Background(), s3.Config{
		Endpoint:              endpoint,
		AccessKeyID:           server.AccessKey,
		SecretAccessKey:       server.SecretKey,
		UsePathStyle:          true,
		ResponseHeaderTimeout: timeout,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func put(ctx context.Context, c *s3.Client, p api.ObjectPath, body string, token api.Token, replaces api.ObjectVersion) (string, error) {
	return c.Put(ctx, api.PutObjectInput{Path: p, Body: strings.NewReader(body), Size: int64(len(body)), Token: token, Replaces: replaces, ContentType: "text/plain"})
}

// TestConditionalWritesOnRealS3 walks the backend through every answer a
// conditional write can get from a real S3 server.
func TestConditionalWritesOnRealS3(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "cond")
	c := newClient(t, server.Endpoint(), 0)
	p := api.ObjectPath{Bucket: "cond", Key: "dir/obj"}

	v, err := c.Observe(ctx, p)
	if err != nil || v.Exists {
		t.Fatalf("Observe(absent) = %+v, %v; want not existing", v, err)
	}
	etag1, err := put(ctx, c, p, "one", 3, api.ObjectVersion{})
	if err != nil || !strings.HasPrefix(etag1, `"`) {
		t.Fatalf("create = %q, %v; want a quoted ETag", etag1, err)
	}
	v, err = c.Observe(ctx, p)
	if err != nil || !v.Exists || v.ETag != etag1 || v.Token != 3 {
		t.Fatalf("Observe = %+v, %v; want ETag %s token 3", v, err, etag1)
	}

	tests := []struct {
		name     string
		replaces api.ObjectVersion
		wantErr  error
	}{
		{"create over an existing object (If-None-Match: * → 412)", api.ObjectVersion{}, api.ErrConcurrentModification},
		{"If-Match an old ETag (412)", api.ObjectVersion{Exists: true, ETag: `"00000000000000000000000000000000"`}, api.ErrConcurrentModification},
		{"If-Match the current ETag", api.ObjectVersion{Exists: true, ETag: etag1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := put(ctx, c, p, "two", 4, tt.replaces)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Put = %v; want %v", err, tt.wantErr)
			}
		})
	}

	// Read back with an independent client.
	mc := server.Minio(t)
	info, err := mc.StatObject(ctx, "cond", "dir/obj", minio.StatObjectOptions{})
	if err != nil || info.UserMetadata["Fence-Token"] != "4" || info.ContentType != "text/plain" {
		t.Fatalf("minio stat = %+v, %v; want fence-token 4, text/plain", info.UserMetadata, err)
	}
	obj, err := c.Get(ctx, api.GetObjectInput{Path: p})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	if obj.Token != 4 || obj.Size != 3 {
		t.Fatalf("Get = %+v; want token 4, size 3", obj)
	}

	if err := c.Delete(ctx, p, etag1); !errors.Is(err, api.ErrConcurrentModification) {
		t.Fatalf("Delete with an old ETag = %v; want ErrConcurrentModification", err)
	}
	v, _ = c.Observe(ctx, p)
	if err := c.Delete(ctx, p, v.ETag); err != nil {
		t.Fatalf("Delete with the current ETag = %v", err)
	}
	// A conditional delete of a key that is already gone: AWS answers 404
	// NoSuchKey (a lost race), versitygw v1.8.0 answers 204. Either way the
	// object is gone and nothing else was touched.
	if err := c.Delete(ctx, p, v.ETag); err != nil && !errors.Is(err, api.ErrConcurrentModification) {
		t.Fatalf("Delete of a deleted object = %v; want nil or ErrConcurrentModification", err)
	}
	if _, err := put(ctx, c, p, "x", 5, v); !errors.Is(err, api.ErrConcurrentModification) {
		t.Fatalf("If-Match put on a deleted object = %v; want ErrConcurrentModification", err)
	}
	if _, err := c.Head(ctx, api.GetObjectInput{Path: p}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("Head of a deleted object = %v; want ErrNotFound", err)
	}
	missingBucket := api.ObjectPath{Bucket: "no-such-bucket", Key: "k"}
	if _, err := put(ctx, c, missingBucket, "x", 1, api.ObjectVersion{}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("Put to a missing bucket = %v; want ErrNotFound", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping = %v", err)
	}
}

// TestOneOfManyConditionalWritesWins: S3 itself arbitrates races between
// writers that observed the same version.
func TestOneOfManyConditionalWritesWins(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "race")
	c := newClient(t, server.Endpoint(), 0)
	p := api.ObjectPath{Bucket: "race", Key: "k"}
	etag, err := put(ctx, c, p, "base", 1, api.ObjectVersion{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := put(ctx, c, p, fmt.Sprint("racer ", i), 2, api.ObjectVersion{Exists: true, ETag: etag})
			errs <- err
		}()
	}
	wins := 0
	for range n {
		switch err := <-errs; {
		case err == nil:
			wins++
		case !errors.Is(err, api.ErrConcurrentModification):
			t.Errorf("racer: %v", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d of %d If-Match writes won; want exactly 1", wins, n)
	}
}

// serverCase is a misbehaving S3 server and the error class that a write
// to it must get.
type serverCase struct {
	name    string
	handler http.HandlerFunc
	wantErr error
}

// putAgainst writes once to each case's server, with a 200 ms response
// header timeout, and checks the error's class: the one wanted, and
// neither a lost race nor a timeout unless that is the one wanted.
func putAgainst(t *testing.T, tests []serverCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			c := newClient(t, srv.URL, 200*time.Millisecond)
			_, err := put(context.Background(), c, api.ObjectPath{Bucket: "b", Key: "k"}, "x", 1, api.ObjectVersion{})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Put = %v; want %v", err, tt.wantErr)
			}
			for _, other := range []error{api.ErrConcurrentModification, api.ErrUpstreamTimeout} {
				if !errors.Is(tt.wantErr, other) && errors.Is(err, other) {
					t.Fatalf("Put = %v; want no %v", err, other)
				}
			}
		})
	}
}

// TestUpstreamFailuresMap checks the mapping of S3 failures that a real
// server will not produce on demand, with HTTP servers that misbehave.
func TestUpstreamFailuresMap(t *testing.T) {
	tests := []serverCase{
		{"500", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `<Error><Code>InternalError</Code><Message>boom</Message></Error>`)
		}, api.ErrUpstream},
		{"503 slow down", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `<Error><Code>SlowDown</Code><Message>slow</Message></Error>`)
		}, api.ErrUpstream},
		{"409 conditional request conflict", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `<Error><Code>ConditionalRequestConflict</Code><Message>busy</Message></Error>`)
		}, api.ErrConcurrentModification},
		{"403 access denied", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `<Error><Code>AccessDenied</Code><Message>no</Message></Error>`)
		}, api.ErrUpstream},
		{"no answer in time", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
			}
		}, api.ErrUpstreamTimeout},
	}
	putAgainst(t, tests)
	t.Run("connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		c := newClient(t, url, 0)
		if _, err := c.Observe(context.Background(), api.ObjectPath{Bucket: "b", Key: "k"}); !errors.Is(err, api.ErrUpstream) {
			t.Fatalf("Observe = %v; want ErrUpstream", err)
		}
	})
}

func TestNewRejectsHalfCredentials(t *testing.T) {
	if _, err := s3.New(context.Background(), s3.Config{AccessKeyID: "only-id"}); err == nil {
		t.Fatal("New with an access key id but no secret succeeded")
	}
}
