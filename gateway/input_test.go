package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"fencegate/api"
	"fencegate/gateway"
)

// TestBadInputReachesNothing sends malformed requests: each gets the
// right status with a problem+json body, and neither etcd nor the store
// (S3 or GCS) hears of any of them.
func TestBadInputReachesNothing(t *testing.T) {
	for _, store := range objectStores {
		t.Run(store, func(t *testing.T) { badInputReachesNothing(t, store) })
	}
}

func badInputReachesNothing(t *testing.T, store string) {
	e := newEnvOn(t, store, gateway.Config{BufferBytes: 512, MaxBodyBytes: 1024, MaxHeaderBytes: 4096})
	etcdBefore := e.etcdCalls.Count()
	e.resetStoreCounts()

	type header struct{ name, value string }
	tokenCases := []struct {
		name    string
		headers []header // sent as written: names are not canonicalised
		status  int
		slug    string
	}{
		{"missing", nil, 428, "missing-token"},
		{"empty", []header{{"X-Fence-Token", ""}}, 400, "malformed-token"},
		{"two headers", []header{{"X-Fence-Token", "5"}, {"X-Fence-Token", "6"}}, 400, "malformed-token"},
		{"two headers, two cases", []header{{"X-Fence-Token", "5"}, {"x-fence-token", "5"}}, 400, "malformed-token"},
		{"comma list", []header{{"X-Fence-Token", "5, 6"}}, 400, "malformed-token"},
		{"negative", []header{{"X-Fence-Token", "-1"}}, 400, "malformed-token"},
		{"plus", []header{{"X-Fence-Token", "+1"}}, 400, "malformed-token"},
		{"zero", []header{{"X-Fence-Token", "0"}}, 400, "malformed-token"},
		{"leading zeros", []header{{"X-Fence-Token", "007"}}, 400, "malformed-token"},
		{"inner space", []header{{"X-Fence-Token", "5 5"}}, 400, "malformed-token"},
		{"exponent", []header{{"X-Fence-Token", "1e3"}}, 400, "malformed-token"},
		{"hex", []header{{"X-Fence-Token", "0x10"}}, 400, "malformed-token"},
		{"underscore", []header{{"X-Fence-Token", "1_000"}}, 400, "malformed-token"},
		{"decimal", []header{{"X-Fence-Token", "5.0"}}, 400, "malformed-token"},
		{"arabic-indic digits", []header{{"X-Fence-Token", "٥"}}, 400, "malformed-token"},
		{"fullwidth digits", []header{{"X-Fence-Token", "５"}}, 400, "malformed-token"},
		{"2^63", []header{{"X-Fence-Token", "9223372036854775808"}}, 400, "malformed-token"},
		{"2^64", []header{{"X-Fence-Token", "18446744073709551616"}}, 400, "malformed-token"},
		{"1000 digits", []header{{"X-Fence-Token", strings.Repeat("7", 1000)}}, 400, "malformed-token"},
		{"letters", []header{{"X-Fence-Token", "latest"}}, 400, "malformed-token"},
		{"redis random value", []header{{"X-Fence-Token", "8f14e45fceea167a5a36dedd4bea2543"}}, 400, "malformed-token"},
		{"wrong header name", []header{{"X-Fencing-Token", "5"}}, 428, "missing-token"},
	}
	for _, tc := range tokenCases {
		for _, method := range []string{http.MethodPut, http.MethodDelete} {
			t.Run(tc.name+"/"+method, func(t *testing.T) {
				req, err := http.NewRequest(method, e.objectURL("k"), strings.NewReader("body"))
				if err != nil {
					t.Fatal(err)
				}
				for _, h := range tc.headers {
					req.Header[h.name] = append(req.Header[h.name], h.value)
				}
				wantProblem(t, send(t, req), tc.status, tc.slug)
			})
		}
	}
	pathCases := []struct {
		name, path string
		status     int
		slug       string
	}{
		{"empty key", "/v1/objects/" + e.bucket + "/", 400, "invalid-object-path"},
		{"overlong key", "/v1/objects/" + e.bucket + "/" + strings.Repeat("k", api.MaxKeyBytes+1), 400, "invalid-object-path"},
		{"dot-dot segment", "/v1/objects/" + e.bucket + "/a/../b", 400, "invalid-object-path"},
		{"encoded dot-dot", "/v1/objects/" + e.bucket + "/a/%2E%2E/b", 400, "invalid-object-path"},
		{"double slash", "/v1/objects/" + e.bucket + "/a//b", 400, "invalid-object-path"},
		{"control character", "/v1/objects/" + e.bucket + "/a%0Ab", 400, "invalid-object-path"},
		{"bad bucket", "/v1/objects/Bad_Bucket/k", 400, "invalid-object-path"},
		{"no key at all", "/v1/objects/" + e.bucket, 400, "invalid-object-path"},
	}
	for _, tc := range pathCases {
		t.Run(tc.name, func(t *testing.T) {
			wantProblem(t, do(t, http.MethodPut, e.url+tc.path, []string{"5"}, []byte("x")), tc.status, tc.slug)
		})
	}

	t.Run("body over the limit", func(t *testing.T) {
		wantProblem(t, do(t, http.MethodPut, e.objectURL("big"), []string{"5"}, make([]byte, 1025)), 413, "body-too-large")
	})
	t.Run("chunked body over the buffer", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPut, e.objectURL("big"), io.MultiReader(strings.NewReader(strings.Repeat("x", 600))))
		req.Header.Set(api.HeaderFenceToken, "5")
		req.ContentLength = -1 // chunked: length unknown
		wantProblem(t, send(t, req), 411, "length-required")
	})
	t.Run("headers over the limit", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPut, e.objectURL("k"), strings.NewReader("x"))
		req.Header.Set(api.HeaderFenceToken, "5")
		req.Header.Set("X-Padding", strings.Repeat("p", 5000))
		wantProblem(t, send(t, req), 431, "headers-too-large")
	})
	t.Run("method not allowed", func(t *testing.T) {
		wantProblem(t, do(t, http.MethodPost, e.objectURL("k"), []string{"5"}, nil), 405, "method-not-allowed")
	})
	t.Run("fence of empty resource", func(t *testing.T) {
		wantProblem(t, do(t, http.MethodGet, e.url+"/v1/fences/", nil, nil), 400, "invalid-request")
	})

	if n := e.etcdCalls.Count() - etcdBefore; n != 0 {
		t.Errorf("bad input made %d etcd requests; want 0", n)
	}
	if n := e.storeRequests(); n != 0 {
		t.Errorf("bad input made %d requests to the stores; want 0", n)
	}
}

// TestTokenHeaderNameIsCaseInsensitive: HTTP header names are
// case-insensitive, so a lower-case x-fence-token is the token.
func TestTokenHeaderNameIsCaseInsensitive(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	req, err := http.NewRequest(http.MethodPut, e.objectURL("case"), strings.NewReader("ok"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header["x-fence-token"] = []string{"5"}
	if r := send(t, req); r.status != http.StatusCreated || r.write.Token != 5 {
		t.Fatalf("PUT with x-fence-token: 5 = %s; want 201 with token 5", r)
	}
}
