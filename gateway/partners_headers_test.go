package gateway_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/partners"
)

// TestPartnerRoutingHeadersStripped: headers that some upstreams, or the
// proxies in front of them, read as the request's method, path or origin
// never reach the partner, in any spelling, unless the route's
// ForwardHeaders names them (exactly).
func TestPartnerRoutingHeadersStripped(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	partner := newPartnerServer(t, 0)
	plain := payRoute(t, partner.URL)
	allowing := payRoute(t, partner.URL)
	allowing.Name = "pay-fwd"
	allowing.ForwardHeaders = []string{"X-Forwarded-For", "x-real-ip"}
	gw := startPartnerGateway(t, etcd, time.Second, plain, allowing)

	// sent is what every request carries; the name is sent as spelled.
	sent := []string{
		"X-Note",
		"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override",
		"X-Original-URL", "X-Rewrite-URL",
		"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Port", "X-Forwarded-Prefix", "X-Forwarded-Host",
		"X-Real-IP",
		"X_Fence_Token", "x_fence_resource", "X_Forwarded_For", "X_HTTP_Method_Override", "Transfer_Encoding",
		"Authorization", "Cookie", "Forwarded",
	}
	cases := []struct {
		route  string
		header string
		want   bool // forwarded
	}{
		{"pay", "X-Note", true},
		{"pay", "X-HTTP-Method-Override", false},
		{"pay", "X-HTTP-Method", false},
		{"pay", "X-Method-Override", false},
		{"pay", "X-Original-URL", false},
		{"pay", "X-Rewrite-URL", false},
		{"pay", "X-Forwarded-For", false},
		{"pay", "X-Forwarded-Proto", false},
		{"pay", "X-Forwarded-Port", false},
		{"pay", "X-Forwarded-Prefix", false},
		{"pay", "X-Forwarded-Host", false},
		{"pay", "X-Real-IP", false},
		{"pay", "X_Fence_Token", false},
		{"pay", "x_fence_resource", false},
		{"pay", "X_Forwarded_For", false},
		{"pay", "X_HTTP_Method_Override", false},
		{"pay", "Transfer_Encoding", false},
		{"pay", "Authorization", false},
		{"pay", "Cookie", false},
		{"pay", "Forwarded", false},
		{"pay-fwd", "X-Note", true},
		{"pay-fwd", "X-Forwarded-For", true},
		{"pay-fwd", "X-Real-IP", true},
		{"pay-fwd", "X-Forwarded-Proto", false},
		{"pay-fwd", "X_Forwarded_For", false},
		{"pay-fwd", "X-HTTP-Method-Override", false},
		{"pay-fwd", "X-Forwarded-Host", false},
		{"pay-fwd", "X_Fence_Token", false},
	}
	got := map[string]http.Header{}
	for i, route := range []string{"pay", "pay-fwd"} {
		header := http.Header{}
		for _, name := range sent {
			header[name] = []string{"v-" + name} // as spelled, not canonicalized
		}
		before := partner.count()
		r := partnerDo(t, gw, partnerReq{path: route + "/accounts/h" + string(rune('0'+i)) + "/x", token: 1, header: header})
		if r.status != http.StatusCreated {
			t.Fatalf("%s = %s; want 201", route, r)
		}
		calls := partner.snapshot()
		if len(calls) != before+1 {
			t.Fatalf("partner got %d calls; want 1", len(calls)-before)
		}
		got[route] = calls[len(calls)-1].Header
	}
	for _, tc := range cases {
		// The partner's server canonicalized what it read, as Values does.
		values := got[tc.route].Values(tc.header)
		forwarded := len(values) > 0
		if forwarded != tc.want {
			t.Errorf("route %s: %s forwarded = %v (%q); want %v", tc.route, tc.header, forwarded, values, tc.want)
		}
		if forwarded && values[0] != "v-"+tc.header {
			t.Errorf("route %s: %s = %q; want %q", tc.route, tc.header, values, "v-"+tc.header)
		}
	}
}

// TestPartnerForwardHeadersValidation: ForwardHeaders names only routing
// headers stripped by default, spelled with dashes.
func TestPartnerForwardHeadersValidation(t *testing.T) {
	u, err := url.Parse("https://api.example.com/v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		names []string
		want  string // in the error; "" means valid
	}{
		{nil, ""},
		{[]string{"X-Forwarded-For", "x-forwarded-proto", "X-Real-IP", "X-HTTP-Method-Override", "X-Original-URL"}, ""},
		{[]string{"X-Forwarded-Host"}, "never forwarded"},
		{[]string{"Forwarded"}, "never forwarded"},
		{[]string{"Authorization"}, "never forwarded"},
		{[]string{"X-Fence-Token"}, "never forwarded"},
		{[]string{"X_Forwarded_For"}, "underscore"},
		{[]string{"X-Debug"}, "not stripped"},
		{[]string{"a b"}, "not a header name"},
	} {
		route := partners.PartnerRoute{Name: "pay", Upstream: u, Methods: []string{"POST"}, Resource: "accounts/{account}", ForwardHeaders: tc.names}
		_, err := gateway.New(gateway.Config{}, newMemFences(), newMemObjects(), gateway.WithPartners([]partners.PartnerRoute{route}, nopPartners{}, nil))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("ForwardHeaders %q: New = %v; want valid", tc.names, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "forward_headers") || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("ForwardHeaders %q: New = %v; want a forward_headers error about %q", tc.names, err, tc.want)
		}
	}
}
