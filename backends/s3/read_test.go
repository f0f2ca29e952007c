package s3_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"fencegate/api"
)

// TestConditionalReadsOnRealS3 sends Get and Head with a range and each
// precondition through both paths to versitygw, and checks the result
// each answer maps to: 206 a ContentRange, 304 NotModified with the
// object's ETag and recorded token (which versitygw's 304 does not carry),
// 412 and 416 their error classes.
func TestConditionalReadsOnRealS3(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "cond-reads")
	for _, path := range paths(t, server.Endpoint()) {
		t.Run(path.name, func(t *testing.T) {
			c := path.client
			p := api.ObjectPath{Bucket: "cond-reads", Key: path.name}
			etag, err := put(ctx, c, p, "0123456789", 9, api.ObjectVersion{})
			if err != nil {
				t.Fatal(err)
			}
			const wrong = `"00000000000000000000000000000000"`
			past := time.Now().Add(-time.Hour)
			tests := []struct {
				name         string
				in           api.GetObjectInput
				head         bool
				wantErr      error
				notModified  bool
				contentRange string // Get only
			}{
				{name: "range", in: api.GetObjectInput{Range: "bytes=2-5"}, contentRange: "bytes 2-5/10"},
				{name: "range past the end", in: api.GetObjectInput{Range: "bytes=20-"}, wantErr: api.ErrRangeNotSatisfiable},
				{name: "If-None-Match current", in: api.GetObjectInput{IfNoneMatch: etag}, notModified: true},
				{name: "If-None-Match current, HEAD", in: api.GetObjectInput{IfNoneMatch: etag}, head: true, notModified: true},
				{name: "If-None-Match *", in: api.GetObjectInput{IfNoneMatch: "*"}, notModified: true},
				{name: "If-Match wrong", in: api.GetObjectInput{IfMatch: wrong}, wantErr: api.ErrPreconditionFailed},
				{name: "If-Match wrong, HEAD", in: api.GetObjectInput{IfMatch: wrong}, head: true, wantErr: api.ErrPreconditionFailed},
				{name: "If-Unmodified-Since past", in: api.GetObjectInput{IfUnmodifiedSince: past}, wantErr: api.ErrPreconditionFailed},
				{name: "If-Match current", in: api.GetObjectInput{IfMatch: etag}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					tt.in.Path = p
					read := c.Get
					if tt.head {
						read = c.Head
					}
					obj, err := read(ctx, tt.in)
					if tt.wantErr != nil {
						if !errors.Is(err, tt.wantErr) {
							t.Fatalf("read(%+v) = %v; want %v", tt.in, err, tt.wantErr)
						}
						return
					}
					if err != nil {
						t.Fatalf("read(%+v) = %v", tt.in, err)
					}
					if obj.Body != nil {
						defer obj.Body.Close()
					}
					if obj.NotModified != tt.notModified || obj.Token != 9 || obj.ETag != etag || obj.LastModified.IsZero() {
						t.Fatalf("read(%+v) = %+v; want NotModified %v, token 9, ETag %s, a Last-Modified", tt.in, obj, tt.notModified, etag)
					}
					if tt.notModified && obj.Body != nil {
						t.Fatalf("read(%+v) has a body; want none on 304", tt.in)
					}
					if !tt.head && obj.ContentRange != tt.contentRange {
						t.Fatalf("read(%+v).ContentRange = %q; want %q", tt.in, obj.ContentRange, tt.contentRange)
					}
				})
			}
		})
	}
}

// TestNotModifiedAfterAChange: when the object changes between S3's 304
// and the HEAD that reads its token, the backend must not answer 304 with
// the new version's token (the client does not hold that version). A
// proxy writes a new version each time it relays a 304; the read then
// starts again, and gets the new version in full.
func TestNotModifiedAfterAChange(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "cond-change")
	mc := server.Minio(t)
	u, err := url.Parse(server.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	var rewrites atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.StatusCode == http.StatusNotModified && rewrites.Add(1) == 1 {
			_, err := mc.PutObject(context.Background(), "cond-change", "k", strings.NewReader("new"), 3,
				minio.PutObjectOptions{UserMetadata: map[string]string{api.MetadataFenceToken: "12"}})
			return err
		}
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)

	for _, path := range paths(t, srv.URL) {
		t.Run(path.name, func(t *testing.T) {
			rewrites.Store(0)
			p := api.ObjectPath{Bucket: "cond-change", Key: "k"}
			if _, err := mc.PutObject(ctx, "cond-change", "k", strings.NewReader("old"), 3,
				minio.PutObjectOptions{UserMetadata: map[string]string{api.MetadataFenceToken: "11"}}); err != nil {
				t.Fatal(err)
			}
			old, err := path.client.Head(ctx, api.GetObjectInput{Path: p})
			if err != nil || old.Token != 11 {
				t.Fatalf("Head = %+v, %v; want token 11", old, err)
			}
			obj, err := path.client.Get(ctx, api.GetObjectInput{Path: p, IfNoneMatch: old.ETag})
			if err != nil {
				t.Fatal(err)
			}
			if obj.NotModified || obj.Token != 12 || obj.Body == nil {
				t.Fatalf("Get(If-None-Match the old ETag) = %+v; want token 12's bytes, not a 304", obj)
			}
			defer obj.Body.Close()
			if b, _ := io.ReadAll(obj.Body); string(b) != "new" {
				t.Fatalf("body = %q; want %q", b, "new")
			}
			if n := rewrites.Load(); n != 1 {
				t.Fatalf("S3 answered 304 %d times; want once (the setup is wrong)", n)
			}
		})
	}
}
