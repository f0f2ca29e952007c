package testenv_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
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

func TestCountingProxyS3(t *testing.T) {
	s := testenv.StartS3(t)
	s.CreateBucket(t, "bucket")
	p := testenv.NewCountingProxy(t, s.Endpoint())
	c := s.MinioAt(t, p.URL())

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

func TestNewCountingProxyTarget(t *testing.T) {
	u, err := url.Parse(testenv.NewCountingProxy(t, "http://127.0.0.1:1").URL())
	if err != nil || u.Scheme != "http" || !strings.HasPrefix(u.Host, "127.0.0.1:") {
		t.Fatalf("URL() = %v (%v); want http://127.0.0.1:PORT", u, err)
	}
}
