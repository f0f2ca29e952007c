package testenv_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/minio/minio-go/v7"

	"fencegate/internal/testenv"
)

func TestCountingProxyCounts(t *testing.T) {
	var (
		mu            sync.Mutex
		upstreamHosts []string
	)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		upstreamHosts = append(upstreamHosts, r.Host)
		mu.Unlock()
		w.Header().Set("X-Path", r.URL.RequestURI())
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(upstream.Close)
	p := testenv.NewCountingProxy(t, upstream.URL)
	proxyHost := strings.TrimPrefix(p.URL(), "http://")

	tests := []struct {
		method string
		path   string
	}{
		{http.MethodGet, "/a"},
		{http.MethodPut, "/bucket/key?x-id=PutObject"},
		{http.MethodPut, "/bucket/a%2Fb"},
		{http.MethodDelete, "/bucket/key"},
		{http.MethodHead, "/"},
	}
	for _, tt := range tests {
		req, err := http.NewRequestWithContext(t.Context(), tt.method, p.URL()+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tt.method, tt.path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusTeapot {
			t.Errorf("%s %s: status %d; want %d", tt.method, tt.path, resp.StatusCode, http.StatusTeapot)
		}
		if got := resp.Header.Get("X-Path"); got != tt.path {
			t.Errorf("%s %s: upstream saw %q; want %q", tt.method, tt.path, got, tt.path)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, host := range upstreamHosts {
		if host != proxyHost {
			t.Errorf("upstream saw Host %q; want the proxy's %q", host, proxyHost)
		}
	}

	counts := []struct {
		method string
		want   int64
	}{
		{http.MethodGet, 1},
		{http.MethodPut, 2},
		{http.MethodDelete, 1},
		{http.MethodHead, 1},
		{http.MethodPost, 0},
	}
	for _, c := range counts {
		if got := p.CountMethod(c.method); got != c.want {
			t.Errorf("CountMethod(%s) = %d; want %d", c.method, got, c.want)
		}
	}
	if got := p.Count(); got != int64(len(tests)) {
		t.Errorf("Count() = %d; want %d", got, len(tests))
	}

	p.Reset()
	if got := p.Count(); got != 0 {
		t.Errorf("Count() after Reset = %d; want 0", got)
	}
	if got := p.CountMethod(http.MethodPut); got != 0 {
		t.Errorf("CountMethod(PUT) after Reset = %d; want 0", got)
	}
}

func TestCountingProxyUpstreamDown(t *testing.T) {
	upstream := httptest.NewServer(http.NotFoundHandler())
	upstream.Close()
	p := testenv.NewCountingProxy(t, upstream.URL)
	resp, err := http.Get(p.URL() + "/")
	if err != nil {
		t.Fatalf("GET through proxy: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status = %d; want %d", resp.StatusCode, http.StatusBadGateway)
	}
	if got := p.Count(); got != 1 {
		t.Errorf("Count() = %d; want 1 (requests count even when the upstream is down)", got)
	}
}

// startS3BehindProxy starts an S3 server with a bucket named "bucket" and
// a counting proxy in front of it, and returns a client of the proxy.
func startS3BehindProxy(t *testing.T) (*testenv.S3, *testenv.CountingProxy, *minio.Client) {
	t.Helper()
	s := testenv.StartS3(t)
	s.CreateBucket(t, "bucket")
	p := testenv.NewCountingProxy(t, s.Endpoint())
	return s, p, s.MinioAt(t, p.URL())
}

func TestCountingProxyS3(t *testing.T) {
	s, p, c := startS3BehindProxy(t)

	// SigV4 signs the Host header: these verify at versitygw only if the
	// proxy passes the client's Host through.
	mustPutObject(t, c, "bucket", "via/proxy", "through the proxy", minio.PutObjectOptions{})
	if got := p.CountMethod(http.MethodPut); got != 1 {
		t.Errorf("CountMethod(PUT) after PutObject = %d; want 1", got)
	}
	if got := mustGetObject(t, c, "bucket", "via/proxy"); got != "through the proxy" {
		t.Fatalf("GetObject through proxy = %q; want %q", got, "through the proxy")
	}
	if got := p.CountMethod(http.MethodGet); got < 1 {
		t.Errorf("CountMethod(GET) after GetObject = %d; want at least 1", got)
	}

	// A client of the server itself does not pass through the proxy.
	p.Reset()
	if got := mustGetObject(t, s.Minio(t), "bucket", "via/proxy"); got != "through the proxy" {
		t.Fatalf("GetObject direct = %q; want %q", got, "through the proxy")
	}
	if got := p.Count(); got != 0 {
		t.Errorf("Count() after a direct GetObject = %d; want 0", got)
	}
}

func TestCountingProxyAppliedWrites(t *testing.T) {
	_, p, c := startS3BehindProxy(t)

	// A create-only PUT carrying a fence token, as the gateway sends it:
	// the first is applied, the second answered 412 and not.
	create := minio.PutObjectOptions{UserMetadata: map[string]string{"fence-token": "7"}}
	create.SetMatchETagExcept("*")
	info, err := c.PutObject(timeout(t), "bucket", "dir/key", strings.NewReader("first"), 5, create)
	if err != nil {
		t.Fatalf("PutObject(If-None-Match: *): %v", err)
	}
	_, err = c.PutObject(timeout(t), "bucket", "dir/key", strings.NewReader("second"), 6, create)
	if got := minio.ToErrorResponse(err).StatusCode; got != http.StatusPreconditionFailed {
		t.Fatalf("second PutObject(If-None-Match: *) status = %d (err %v); want %d", got, err, http.StatusPreconditionFailed)
	}
	if got := p.CountMethod(http.MethodPut); got != 2 {
		t.Errorf("CountMethod(PUT) = %d; want 2: the 412 reached the upstream too", got)
	}
	if err := c.RemoveObject(timeout(t), "bucket", "dir/key", minio.RemoveObjectOptions{}); err != nil {
		t.Fatalf("RemoveObject: %v", err)
	}

	got := p.AppliedWrites()
	want := []testenv.AppliedWrite{
		{
			Method:      http.MethodPut,
			Path:        "/bucket/dir/key",
			IfNoneMatch: "*",
			FenceToken:  "7",
			Status:      http.StatusOK,
			ETag:        `"` + info.ETag + `"`,
		},
		{Method: http.MethodDelete, Path: "/bucket/dir/key", Status: http.StatusNoContent},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("AppliedWrites() =\n%+v\nwant\n%+v", got, want)
	}

	p.Reset()
	if got := p.AppliedWrites(); len(got) != 0 {
		t.Errorf("AppliedWrites() after Reset = %+v; want none", got)
	}
}

func TestNewCountingProxyTarget(t *testing.T) {
	u, err := url.Parse(testenv.NewCountingProxy(t, "http://127.0.0.1:1").URL())
	if err != nil || u.Scheme != "http" || !strings.HasPrefix(u.Host, "127.0.0.1:") {
		t.Fatalf("URL() = %v (%v); want http://127.0.0.1:PORT", u, err)
	}
}
