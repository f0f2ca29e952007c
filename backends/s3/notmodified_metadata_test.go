package s3_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"fencegate/api"
)

// TestNotModifiedKeepsMetadata: a read that S3 answers 304 describes the
// current version with its metadata, which a front door's 304 must partly
// repeat (Cache-Control and Expires, RFC 9110 section 15.4.5): read by the
// HEAD that completes versitygw's bare 304, on both paths, for Get and
// Head, and for If-None-Match and If-Modified-Since.
func TestNotModifiedKeepsMetadata(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "notmod-meta")
	want := api.ObjectMetadata{CacheControl: "max-age=60", Expires: "Wed, 02 Jan 2030 03:04:05 GMT", ContentLanguage: "en"}
	for _, path := range paths(t, server.Endpoint()) {
		t.Run(path.name, func(t *testing.T) {
			c := path.client
			p := api.ObjectPath{Bucket: "notmod-meta", Key: path.name}
			etag, err := c.Put(ctx, api.PutObjectInput{Path: p, Body: strings.NewReader("x"), Size: 1, Token: 5, Metadata: want, ContentType: "text/plain"})
			if err != nil {
				t.Fatal(err)
			}
			head, err := c.Head(ctx, api.GetObjectInput{Path: p})
			if err != nil {
				t.Fatal(err)
			}
			// A date after the last modification that is already past:
			// S3 servers ignore dates in the future.
			time.Sleep(time.Until(head.LastModified.Add(2 * time.Second)))
			after := head.LastModified.Truncate(time.Second).Add(time.Second)
			for _, in := range []api.GetObjectInput{{Path: p, IfNoneMatch: etag}, {Path: p, IfModifiedSince: after}} {
				for name, read := range map[string]func(context.Context, api.GetObjectInput) (*api.Object, error){"Get": c.Get, "Head": c.Head} {
					obj, err := read(ctx, in)
					if err != nil {
						t.Fatalf("%s(%+v) = %v", name, in, err)
					}
					if !obj.NotModified || obj.Body != nil || obj.ETag != etag || obj.Token != 5 {
						t.Fatalf("%s(%+v) = %+v; want NotModified, no body, ETag %s, token 5", name, in, obj, etag)
					}
					if obj.Metadata.CacheControl != want.CacheControl || obj.Metadata.Expires != want.Expires || obj.Metadata.ContentLanguage != want.ContentLanguage {
						t.Errorf("%s(%+v).Metadata = %+v; want the current version's %+v", name, in, obj.Metadata, want)
					}
				}
			}
		})
	}
}

// TestNotModifiedMetadataFromTheAnswer: an S3 server whose 304 carries the
// token needs no HEAD; the result then takes the Cache-Control and
// Expires that the 304 carries (as MinIO's does), on both paths.
func TestNotModifiedMetadataFromTheAnswer(t *testing.T) {
	var nonConditional atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") == "" {
			nonConditional.Add(1)
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h.Set("ETag", `"e1"`)
		h.Set("Last-Modified", "Fri, 04 Dec 2026 10:00:00 GMT")
		h.Set("X-Amz-Meta-Fence-Token", "8")
		h.Set("Cache-Control", "no-cache")
		h.Set("Expires", "Thu, 01 Jan 2031 00:00:00 GMT")
		w.WriteHeader(http.StatusNotModified)
	}))
	t.Cleanup(srv.Close)
	for _, path := range paths(t, srv.URL) {
		for name, read := range map[string]func(context.Context, api.GetObjectInput) (*api.Object, error){"Get": path.client.Get, "Head": path.client.Head} {
			obj, err := read(context.Background(), api.GetObjectInput{Path: api.ObjectPath{Bucket: "b", Key: "k"}, IfNoneMatch: `"e1"`})
			if err != nil {
				t.Fatalf("%s %s: %v", path.name, name, err)
			}
			if !obj.NotModified || obj.ETag != `"e1"` || obj.Token != 8 || obj.Metadata.CacheControl != "no-cache" || obj.Metadata.Expires != "Thu, 01 Jan 2031 00:00:00 GMT" {
				t.Errorf("%s %s = %+v; want NotModified, ETag \"e1\", token 8, the 304's Cache-Control and Expires", path.name, name, obj)
			}
		}
	}
	if n := nonConditional.Load(); n != 0 {
		t.Errorf("%d unconditional requests; want none (the 304 carried the token)", n)
	}
}
