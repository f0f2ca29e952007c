package s3_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"fencegate/api"
	"fencegate/internal/testenv"
)

// TestNoBlindWriteWithoutETag: S3 servers read an If-Match with an empty
// ETag as no condition at all, so a conditional write built on a version
// that exists without an ETag would be a blind write. versitygw serves a
// file placed in its directory on disk with no ETag. On both paths,
// Observe refuses such an object, and Put and Delete refuse a version that
// exists without an ETag before anything reaches S3: S3 still holds what
// it held (read back with an independent client).
func TestNoBlindWriteWithoutETag(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "noetag")
	proxy := testenv.NewCountingProxy(t, server.Endpoint())
	mc := server.Minio(t)
	for _, path := range paths(t, proxy.URL()) {
		t.Run(path.name, func(t *testing.T) {
			c := path.client
			placed := api.ObjectPath{Bucket: "noetag", Key: path.name + "/placed"}
			server.PlaceFile(t, placed.Bucket, placed.Key, []byte("placed"))
			if v, err := c.Observe(ctx, placed); !errors.Is(err, api.ErrUpstream) {
				t.Errorf("Observe(a file without an ETag) = %+v, %v; want ErrUpstream", v, err)
			}
			written := api.ObjectPath{Bucket: "noetag", Key: path.name + "/written"}
			if _, err := put(ctx, c, written, "from 6", 6, api.ObjectVersion{}); err != nil {
				t.Fatal(err)
			}
			objects := []struct {
				p    api.ObjectPath
				body string
			}{{placed, "placed"}, {written, "from 6"}}
			for _, obj := range objects {
				for _, etag := range []string{"", `""`} {
					proxy.Reset()
					replaces := api.ObjectVersion{Exists: true, ETag: etag, Token: 1}
					if _, err := put(ctx, c, obj.p, "stale from 5", 5, replaces); !errors.Is(err, api.ErrUpstream) {
						t.Errorf("Put(%s, Replaces %+v) = %v; want ErrUpstream", obj.p.Key, replaces, err)
					}
					if got := readBack(t, mc, obj.p); got != obj.body {
						t.Fatalf("after Put with ETag %q, S3 holds %s = %q; want %q", etag, obj.p.Key, got, obj.body)
					}
					if err := c.Delete(ctx, obj.p, etag); !errors.Is(err, api.ErrUpstream) {
						t.Errorf("Delete(%s, ETag %q) = %v; want ErrUpstream", obj.p.Key, etag, err)
					}
					if got := readBack(t, mc, obj.p); got != obj.body {
						t.Fatalf("after Delete with ETag %q, S3 holds %s = %q; want %q", etag, obj.p.Key, got, obj.body)
					}
					if n := proxy.CountMethod(http.MethodPut) + proxy.CountMethod(http.MethodDelete); n != 0 {
						t.Errorf("ETag %q: %d PUT or DELETE requests reached S3; want none", etag, n)
					}
				}
			}
		})
	}
}

// TestObserveRefusesEmptyETag: a server that answers a HEAD with an ETag
// that is empty between its quotes names no version either.
func TestObserveRefusesEmptyETag(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `""`)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	for _, path := range paths(t, srv.URL) {
		t.Run(path.name, func(t *testing.T) {
			if v, err := path.client.Observe(context.Background(), api.ObjectPath{Bucket: "b", Key: "k"}); !errors.Is(err, api.ErrUpstream) {
				t.Fatalf("Observe = %+v, %v; want ErrUpstream", v, err)
			}
		})
	}
}

// readBack reads p's bytes with mc, or "<absent>".
func readBack(tb testing.TB, mc *minio.Client, p api.ObjectPath) string {
	tb.Helper()
	obj, err := mc.GetObject(context.Background(), p.Bucket, p.Key, minio.GetObjectOptions{})
	if err != nil {
		tb.Fatalf("get %s/%s: %v", p.Bucket, p.Key, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if minio.ToErrorResponse(err).Code == "NoSuchKey" {
		return "<absent>"
	}
	if err != nil {
		tb.Fatalf("read %s/%s: %v", p.Bucket, p.Key, err)
	}
	return string(b)
}

// TestUnsafeUnconditionalSendsNoCondition: the test hook's write (see
// gateway.TestHooks.UnsafeUnconditionalWrite) is an explicit way to write
// blind, which the refusal of versions without an ETag leaves working: on
// both paths it sends no condition header, and lands over a version it
// did not observe.
func TestUnsafeUnconditionalSendsNoCondition(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "unconditional")
	rec := newWireRecorder(t, server.Endpoint())
	mc := server.Minio(t)
	for _, path := range paths(t, rec.srv.URL) {
		t.Run(path.name, func(t *testing.T) {
			p := api.ObjectPath{Bucket: "unconditional", Key: path.name}
			if _, err := put(ctx, path.client, p, "from 6", 6, api.ObjectVersion{}); err != nil {
				t.Fatal(err)
			}
			stale := api.ObjectVersion{Exists: true, ETag: `"00000000000000000000000000000000"`}
			_, err := path.client.Put(ctx, api.PutObjectInput{Path: p, Body: strings.NewReader("blind"), Size: 5, Token: 5, Replaces: stale, UnsafeUnconditional: true})
			if err != nil {
				t.Fatalf("unconditional Put = %v", err)
			}
			sent := rec.last(t)
			for _, h := range []string{"If-Match", "If-None-Match"} {
				if v, ok := sent.Header[h]; ok {
					t.Errorf("unconditional Put sent %s: %q; want no such header", h, v)
				}
			}
			if got := readBack(t, mc, p); got != "blind" {
				t.Fatalf("S3 holds %q; want the unconditional write's \"blind\"", got)
			}
		})
	}
}
