package s3_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"fencegate/api"
)

// bareNotFoundProxy is a reverse proxy in front of S3 that answers every
// request for a key ending in "/lost" itself: 404 with no body, as a load
// balancer or a misrouted proxy would.
func bareNotFoundProxy(tb testing.TB, target string) string {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/lost") {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	tb.Cleanup(srv.Close)
	return srv.URL
}

// TestConfirmAbsent: only S3's NoSuchKey, for the bucket asked, confirms
// that an object is absent. A HEAD's 404 (what Observe sees) has no body,
// so a missing bucket and a proxy's bare 404 look like a missing key to
// it; ConfirmAbsent tells them apart, and an object there is not absent.
func TestConfirmAbsent(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "absent")
	direct := newClient(t, server.Endpoint(), 0)
	proxied := newClient(t, bareNotFoundProxy(t, server.Endpoint()), 0)
	for _, k := range []string{"here", "empty"} {
		body := map[string]string{"here": "v", "empty": ""}[k]
		if _, err := put(ctx, direct, api.ObjectPath{Bucket: "absent", Key: k}, body, 1, api.ObjectVersion{}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name       string
		proxied    bool
		path       api.ObjectPath
		wantAbsent bool
		wantErr    bool
	}{
		{"no such key", false, api.ObjectPath{Bucket: "absent", Key: "gone"}, true, false},
		{"no such key under a directory", false, api.ObjectPath{Bucket: "absent", Key: "dir/gone"}, true, false},
		{"an object", false, api.ObjectPath{Bucket: "absent", Key: "here"}, false, false},
		{"an empty object", false, api.ObjectPath{Bucket: "absent", Key: "empty"}, false, false},
		{"no such bucket", false, api.ObjectPath{Bucket: "no-such-bucket-absent", Key: "k"}, false, true},
		{"a proxy's bare 404", true, api.ObjectPath{Bucket: "absent", Key: "lost"}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := direct
			if tt.proxied {
				c = proxied
			}
			absent, err := c.ConfirmAbsent(ctx, tt.path)
			if absent != tt.wantAbsent || (err != nil) != tt.wantErr {
				t.Fatalf("ConfirmAbsent(%v) = %v, %v; want %v, error %v", tt.path, absent, err, tt.wantAbsent, tt.wantErr)
			}
		})
	}
}
