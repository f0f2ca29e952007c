package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"fencegate/api"
	"fencegate/backends/s3"
)

// wireRecorder is a reverse proxy in front of the S3 server that keeps
// every request's method, escaped path, query and headers as sent.
type wireRecorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
}

func newWireRecorder(tb testing.TB, target string) *wireRecorder {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatal(err)
	}
	w := &wireRecorder{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.reqs = append(w.reqs, &http.Request{Method: r.Method, URL: r.URL, Header: r.Header.Clone(), ContentLength: r.ContentLength})
		w.mu.Unlock()
		proxy.ServeHTTP(rw, r)
	}))
	tb.Cleanup(w.srv.Close)
	return w
}

func (w *wireRecorder) last(tb testing.TB) *http.Request {
	tb.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.reqs) == 0 {
		tb.Fatal("no request reached the S3 server")
	}
	return w.reqs[len(w.reqs)-1]
}

// paths are the two ways the backend can send a request: its signed path
// (the default) and the SDK's operations. They must be indistinguishable
// to the caller.
func paths(tb testing.TB, endpoint string) []struct {
	name   string
	client *s3.Client
} {
	tb.Helper()
	signed := newClient(tb, endpoint, 0)
	if !s3.UsesSignedPath(signed) {
		tb.Fatal("a client with static credentials does not use the signed path")
	}
	return []struct {
		name   string
		client *s3.Client
	}{{"signed", signed}, {"sdk", s3.ThroughSDK(signed)}}
}

// TestSignedPathErrorMappingOnRealS3 runs every answer a conditional write
// and a HEAD can get from versitygw through both paths, and checks that
// each maps to the same error class.
func TestSignedPathErrorMappingOnRealS3(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "signed-errors")
	for _, path := range paths(t, server.Endpoint()) {
		t.Run(path.name, func(t *testing.T) {
			c := path.client
			p := api.ObjectPath{Bucket: "signed-errors", Key: path.name + "/obj"}
			etag1, err := put(ctx, c, p, "one", 7, api.ObjectVersion{})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			deleted := api.ObjectPath{Bucket: "signed-errors", Key: path.name + "/deleted"}
			etagDeleted, err := put(ctx, c, deleted, "gone", 1, api.ObjectVersion{})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Delete(ctx, deleted, etagDeleted); err != nil {
				t.Fatal(err)
			}
			badSecret, err := s3.New(ctx, s3.Config{Endpoint: server.Endpoint(), AccessKeyID: server.AccessKey, SecretAccessKey: "wrong-secret", UsePathStyle: true})
			if err != nil {
				t.Fatal(err)
			}
			if path.name == "sdk" {
				badSecret = s3.ThroughSDK(badSecret)
			}
			tests := []struct {
				name    string
				client  *s3.Client
				path    api.ObjectPath
				replace api.ObjectVersion
				wantErr error // nil: success
			}{
				{"If-None-Match: * on an existing object (412)", c, p, api.ObjectVersion{}, api.ErrConcurrentModification},
				{"If-Match an old ETag (412)", c, p, api.ObjectVersion{Exists: true, ETag: `"00000000000000000000000000000000"`}, api.ErrConcurrentModification},
				{"If-Match on a deleted object (404 NoSuchKey)", c, deleted, api.ObjectVersion{Exists: true, ETag: etagDeleted}, api.ErrConcurrentModification},
				{"missing bucket (404 NoSuchBucket)", c, api.ObjectPath{Bucket: "no-such-bucket", Key: "k"}, api.ObjectVersion{}, api.ErrNotFound},
				{"wrong secret (403)", badSecret, api.ObjectPath{Bucket: "signed-errors", Key: path.name + "/other"}, api.ObjectVersion{}, api.ErrUpstream},
				{"If-Match the current ETag", c, p, api.ObjectVersion{Exists: true, ETag: etag1}, nil},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					etag, err := put(ctx, tt.client, tt.path, "two", 8, tt.replace)
					if tt.wantErr == nil {
						if err != nil || etag == "" || etag == etag1 {
							t.Fatalf("Put = %q, %v; want a new ETag", etag, err)
						}
						return
					}
					if !errors.Is(err, tt.wantErr) {
						t.Fatalf("Put = %v; want %v", err, tt.wantErr)
					}
					for _, other := range []error{api.ErrConcurrentModification, api.ErrNotFound, api.ErrUpstreamTimeout} {
						if other != tt.wantErr && errors.Is(err, other) {
							t.Fatalf("Put = %v; want %v and not %v", err, tt.wantErr, other)
						}
					}
				})
			}

			obj, err := c.Head(ctx, api.GetObjectInput{Path: p})
			if err != nil || obj.Token != 8 || obj.Size != 3 || obj.ContentType != "text/plain" || obj.LastModified.IsZero() || !strings.HasPrefix(obj.ETag, `"`) {
				t.Fatalf("Head = %+v, %v; want token 8, size 3, text/plain, a time and a quoted ETag", obj, err)
			}
			for _, absent := range []api.ObjectPath{deleted, {Bucket: "no-such-bucket", Key: "k"}} {
				if _, err := c.Head(ctx, api.GetObjectInput{Path: absent}); !errors.Is(err, api.ErrNotFound) {
					t.Fatalf("Head(%v) = %v; want ErrNotFound", absent, err)
				}
				if v, err := c.Observe(ctx, absent); err != nil || v.Exists {
					t.Fatalf("Observe(%v) = %+v, %v; want absent", absent, v, err)
				}
			}
			if _, err := badSecret.Head(ctx, api.GetObjectInput{Path: p}); !errors.Is(err, api.ErrUpstream) || errors.Is(err, api.ErrNotFound) {
				t.Fatalf("Head with a wrong secret = %v; want ErrUpstream", err)
			}
		})
	}
}

// TestSignedPathSendsWhatTheSDKSends compares, on the wire, the
// conditional PUT and the HEAD of both paths: the same method, path-style
// escaped path, query, conditional and metadata headers, payload hash and
// Expect header.
func TestSignedPathSendsWhatTheSDKSends(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "signed-wire")
	rec := newWireRecorder(t, server.Endpoint())
	sent := map[string][]*http.Request{}
	const key = "dir/a b+c%ü=&?#.txt"
	bigBody := bytes.Repeat([]byte("x"), 3<<20)
	for _, path := range paths(t, rec.srv.URL) {
		p := api.ObjectPath{Bucket: "signed-wire", Key: path.name + "/" + key}
		etag, err := put(ctx, path.client, p, "one", 5, api.ObjectVersion{})
		if err != nil {
			t.Fatalf("%s: create: %v", path.name, err)
		}
		sent[path.name] = append(sent[path.name], rec.last(t))
		etag, err = path.client.Put(ctx, api.PutObjectInput{Path: p, Body: strings.NewReader("two"), Size: 3, Token: 6, Replaces: api.ObjectVersion{Exists: true, ETag: etag}})
		if err != nil {
			t.Fatalf("%s: If-Match put: %v", path.name, err)
		}
		sent[path.name] = append(sent[path.name], rec.last(t))
		if _, err := path.client.Head(ctx, api.GetObjectInput{Path: p}); err != nil {
			t.Fatalf("%s: head: %v", path.name, err)
		}
		sent[path.name] = append(sent[path.name], rec.last(t))
		// A body from 2 MiB asks for 100-continue, as the SDK does.
		if _, err := path.client.Put(ctx, api.PutObjectInput{Path: p, Body: bytes.NewReader(bigBody), Size: int64(len(bigBody)), Token: 7, Replaces: api.ObjectVersion{Exists: true, ETag: etag}}); err != nil {
			t.Fatalf("%s: 3 MiB If-Match put: %v", path.name, err)
		}
		sent[path.name] = append(sent[path.name], rec.last(t))

		// The key is where an independent client finds it, with the token.
		info, err := server.Minio(t).StatObject(ctx, p.Bucket, p.Key, minio.StatObjectOptions{})
		if err != nil || info.UserMetadata["Fence-Token"] != "7" || info.Size != int64(len(bigBody)) || info.ContentType != "application/octet-stream" {
			t.Fatalf("%s: minio stat %q = %+v, %v; want fence-token 7, size %d, application/octet-stream", path.name, p.Key, info, err, len(bigBody))
		}
	}
	// Keys with a leading or doubled slash: the same path on the wire,
	// and the same outcome, whatever S3 makes of them.
	for _, key := range []string{"/lead", "a//b/"} {
		var outcomes []string
		for _, path := range paths(t, rec.srv.URL) {
			p := api.ObjectPath{Bucket: "signed-wire", Key: key + path.name}
			_, err := put(ctx, path.client, p, "x", 1, api.ObjectVersion{})
			outcomes = append(outcomes, fmt.Sprint(err == nil, errors.Is(err, api.ErrConcurrentModification), errors.Is(err, api.ErrNotFound), errors.Is(err, api.ErrUpstream)))
			sent[path.name] = append(sent[path.name], rec.last(t))
		}
		if outcomes[0] != outcomes[1] {
			t.Errorf("Put of key %q: signed path %s, SDK %s (ok, lost race, not found, upstream)", key, outcomes[0], outcomes[1])
		}
	}
	headers := []string{"If-Match", "If-None-Match", "Content-Type", "X-Amz-Meta-Fence-Token", "X-Amz-Content-Sha256", "Expect", "Content-Length"}
	for i := range sent["sdk"] {
		sdk, signed := sent["sdk"][i], sent["signed"][i]
		if signed.Header.Get("Amz-Sdk-Invocation-Id") != "" || sdk.Header.Get("Amz-Sdk-Invocation-Id") == "" {
			t.Fatalf("request %d: the signed path's request went through the SDK (or the SDK's did not)", i)
		}
		sdkPath := strings.Replace(strings.Replace(sdk.URL.EscapedPath(), "/sdk/", "/signed/", 1), "sdk", "signed", 1)
		if signed.Method != sdk.Method || signed.URL.EscapedPath() != sdkPath || signed.URL.RawQuery != sdk.URL.RawQuery {
			t.Errorf("request %d: signed %s %s?%s; sdk %s %s?%s", i, signed.Method, signed.URL.EscapedPath(), signed.URL.RawQuery, sdk.Method, sdkPath, sdk.URL.RawQuery)
		}
		for _, h := range headers {
			if got, want := signed.Header.Get(h), sdk.Header.Get(h); got != want {
				t.Errorf("request %d (%s): %s = %q; the SDK sends %q", i, sdk.Method, h, got, want)
			}
		}
	}
	if got := sent["signed"][3].Header.Get("Expect"); got != "100-continue" {
		t.Errorf("3 MiB put: Expect = %q; want 100-continue", got)
	}
}

// TestSignedPathFailuresMap checks the signed path's mapping of failures a
// real server will not produce on demand, and that it follows no redirect.
func TestSignedPathFailuresMap(t *testing.T) {
	var redirected sync.Once
	redirectTarget := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirected.Do(func() { t.Errorf("the signed path followed a redirect to %s", r.URL) })
	}))
	defer redirectTarget.Close()
	tests := []serverCase{
		{"412 without a body", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusPreconditionFailed)
		}, api.ErrConcurrentModification},
		{"409 conditional request conflict", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `<Error><Code>ConditionalRequestConflict</Code><Message>busy</Message></Error>`)
		}, api.ErrConcurrentModification},
		{"404 without a code", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotFound)
		}, api.ErrUpstream},
		{"500", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `<Error><Code>InternalError</Code><Message>boom</Message></Error>`)
		}, api.ErrUpstream},
		{"307 redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, redirectTarget.URL+r.URL.Path, http.StatusTemporaryRedirect)
		}, api.ErrUpstream},
		{"not XML", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "<html>proxy error")
		}, api.ErrUpstream},
		{"no answer in time", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
			}
		}, api.ErrUpstreamTimeout},
	}
	putAgainst(t, tests)
}

// TestSignedPathCorrectsClockSkew: a server whose clock is an hour ahead
// refuses the first write as RequestTimeTooSkewed (reported, not retried)
// and accepts the next one, signed at its time, as the SDK's operations
// would after the same refusal.
func TestSignedPathCorrectsClockSkew(t *testing.T) {
	const ahead = time.Hour
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serverNow := time.Now().Add(ahead)
		w.Header().Set("Date", serverNow.UTC().Format(http.TimeFormat))
		signed, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
		if err != nil || serverNow.Sub(signed).Abs() > 15*time.Minute {
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `<Error><Code>RequestTimeTooSkewed</Code><Message>too far</Message></Error>`)
			return
		}
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, 0)
	p := api.ObjectPath{Bucket: "b", Key: "k"}
	if _, err := put(context.Background(), c, p, "x", 1, api.ObjectVersion{}); !errors.Is(err, api.ErrUpstream) || !strings.Contains(err.Error(), "RequestTimeTooSkewed") {
		t.Fatalf("first Put = %v; want ErrUpstream (RequestTimeTooSkewed)", err)
	}
	for i := range 2 {
		if etag, err := put(context.Background(), c, p, "x", 1, api.ObjectVersion{}); err != nil || etag == "" {
			t.Fatalf("Put %d after the refusal = %q, %v; want accepted", i+2, etag, err)
		}
	}
	if _, err := c.Head(context.Background(), api.GetObjectInput{Path: p}); err != nil {
		t.Fatalf("Head after the refusal = %v; want signed at the server's time", err)
	}
}
