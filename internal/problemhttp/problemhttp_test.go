package problemhttp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"fencegate/api"
)

// TestWrite answers each problem with its status, the problem headers,
// Retry-After only where the client should come back, and a body but to
// a HEAD.
func TestWrite(t *testing.T) {
	tests := []struct {
		method     string
		err        error
		status     int
		retryAfter string
	}{
		{http.MethodPut, &api.StaleTokenError{Resource: "s3/b/k", Token: 3, HighWaterMark: 5}, 409, ""},
		{http.MethodGet, fmt.Errorf("%w: busy", api.ErrGatewayBusy), 503, "1"},
		{http.MethodPut, fmt.Errorf("%w: 9 in flight", api.ErrTooManyRequests), 429, "1"},
		{http.MethodHead, fmt.Errorf("%w: nothing", api.ErrNotFound), 404, ""},
		{http.MethodGet, fmt.Errorf("disk on fire"), 500, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %d", tt.method, tt.status), func(t *testing.T) {
			r := httptest.NewRequest(tt.method, "/v1/objects/b/"+strings.Repeat("k", 2*api.MaxEchoBytes), nil)
			w := httptest.NewRecorder()
			Write(w, r, For(r, tt.err))
			if w.Code != tt.status || w.Header().Get("Retry-After") != tt.retryAfter {
				t.Errorf("status %d, Retry-After %q; want %d, %q", w.Code, w.Header().Get("Retry-After"), tt.status, tt.retryAfter)
			}
			if ct, cc := w.Header().Get("Content-Type"), w.Header().Get("Cache-Control"); ct != api.ContentTypeProblem || cc != "no-store" {
				t.Errorf("Content-Type %q, Cache-Control %q; want %q, no-store", ct, cc, api.ContentTypeProblem)
			}
			if tt.method == http.MethodHead {
				if w.Body.Len() != 0 {
					t.Errorf("HEAD answered a body of %d bytes", w.Body.Len())
				}
				return
			}
			var p api.Problem
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
				t.Fatalf("body %q: %v", w.Body.String(), err)
			}
			if p.Status != tt.status || len(p.Instance) > api.MaxEchoBytes+64 || !strings.HasPrefix(p.Instance, "/v1/objects/b/") || !strings.Contains(p.Instance, "truncated") {
				t.Errorf("problem %+v; want status %d and the path cut to %d bytes", p, tt.status, api.MaxEchoBytes)
			}
			if tt.status == 500 && strings.Contains(w.Body.String(), "disk on fire") {
				t.Errorf("a 500 answered its error's details: %s", w.Body.String())
			}
		})
	}
}
