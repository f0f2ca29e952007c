package testenv

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"testing"
)

// CountingProxy is an HTTP reverse proxy in front of one upstream that
// counts the requests it receives, by method and in total. Tests point a
// client at [CountingProxy.URL] and check the counts to prove that a
// request did, or did not, reach the upstream.
//
// The proxy keeps the Host header that the client sent, so AWS SigV4
// signatures (which cover Host) made for the proxy's address still verify
// at the upstream. Requests are counted when they arrive, whether or not
// the upstream answers them. Its methods are safe for concurrent use.
type CountingProxy struct {
	server *httptest.Server

	mu       sync.Mutex
	total    int64
	byMethod map[string]int64
	applied  []AppliedWrite
}

// AppliedWrite is a PUT or DELETE that the upstream answered with success,
// as seen on the wire: what the client asked for and what S3 answered.
type AppliedWrite struct {
	Method      string
	Path        string
	IfMatch     string // the request's If-Match
	IfNoneMatch string // the request's If-None-Match
	FenceToken  string // the request's x-amz-meta-fence-token
	Status      int
	ETag        string // the response's ETag
}

// NewCountingProxy starts a counting proxy on a free port of 127.0.0.1 in
// front of target, an http:// URL such as [S3.Endpoint], and closes it when
// the test finishes. When the upstream cannot be reached the proxy answers
// 502 Bad Gateway and logs the error to tb.
func NewCountingProxy(tb testing.TB, target string) *CountingProxy {
	tb.Helper()
	targetURL, err := url.Parse(target)
	if err != nil || targetURL.Host == "" || (targetURL.Scheme != "http" && targetURL.Scheme != "https") {
		tb.Fatalf("testenv: counting proxy: target %q is not an http(s) URL", target)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil
	transport.DisableCompression = true
	p := &CountingProxy{byMethod: make(map[string]int64)}
	reverseProxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(targetURL)
			// SetURL sets Host to the target's; SigV4 signed the
			// client's Host, so send that one.
			r.Out.Host = r.In.Host
		},
		Transport:      transport,
		ModifyResponse: p.record,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			tb.Logf("testenv: counting proxy: %s %s: %v", r.Method, r.URL, err)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	p.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.count(r.Method)
		reverseProxy.ServeHTTP(w, r)
	}))
	tb.Cleanup(func() {
		p.server.Close()
		transport.CloseIdleConnections()
	})
	return p
}

// URL returns the proxy's base URL, http://127.0.0.1:PORT.
func (p *CountingProxy) URL() string {
	return p.server.URL
}

// Count returns how many requests the proxy received since it started or
// since the last [CountingProxy.Reset].
func (p *CountingProxy) Count() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// CountMethod returns how many requests with method m (such as
// http.MethodPut) the proxy received since it started or since the last
// [CountingProxy.Reset].
func (p *CountingProxy) CountMethod(m string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byMethod[m]
}

// Reset sets all counts to zero.
func (p *CountingProxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.byMethod)
	p.total = 0
	p.applied = nil
}

// AppliedWrites returns, in the order the upstream answered them, the
// PUTs and DELETEs it answered with a 2xx since the proxy started or since
// the last [CountingProxy.Reset].
func (p *CountingProxy) AppliedWrites() []AppliedWrite {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.applied)
}

// record keeps successful writes for [CountingProxy.AppliedWrites].
func (p *CountingProxy) record(resp *http.Response) error {
	req := resp.Request
	if (req.Method != http.MethodPut && req.Method != http.MethodDelete) || resp.StatusCode/100 != 2 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.applied = append(p.applied, AppliedWrite{
		Method:      req.Method,
		Path:        req.URL.Path,
		IfMatch:     req.Header.Get("If-Match"),
		IfNoneMatch: req.Header.Get("If-None-Match"),
		FenceToken:  req.Header.Get("X-Amz-Meta-Fence-Token"),
		Status:      resp.StatusCode,
		ETag:        resp.Header.Get("ETag"),
	})
	return nil
}

// count records one request with the given method.
func (p *CountingProxy) count(method string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byMethod[method]++
	p.total++
}
