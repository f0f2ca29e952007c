package gateway

import (
	"net/url"
	"strings"
	"testing"

	"fencegate/api"
)

// FuzzPartnerUpstreamURL: whatever path and query a client sends, a
// request that passes the checks goes to the route's scheme and host,
// below its base path, and nowhere else.
func FuzzPartnerUpstreamURL(f *testing.F) {
	for _, seed := range []struct{ path, query string }{
		{"accounts/a1/charges", "a=1"},
		{"a/%2e%2e/b", ""},
		{"a%2F..%2Fb", ""},
		{"@evil.example/x", "next=http://evil.example/"},
		{"x", "#frag"},
		{"%252e%252e", "a=%00"},
		{"caf%C3%A9/%20", "q=%zz"},
	} {
		f.Add(seed.path, seed.query)
	}
	base, err := url.Parse("https://api.example.com/v1")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, escaped, rawQuery string) {
		path, err := api.ParsePartnerPath(escaped)
		if err != nil {
			return
		}
		u, err := upstreamURL(base, path, rawQuery)
		if err != nil {
			return
		}
		if u.Scheme != "https" || u.Host != "api.example.com" || u.User != nil {
			t.Fatalf("upstreamURL(%q, %q) = %s: left the upstream", escaped, rawQuery, u)
		}
		if !strings.HasPrefix(u.EscapedPath(), "/v1/") {
			t.Fatalf("upstreamURL(%q, %q) = %s: left the base path", escaped, rawQuery, u)
		}
		for _, seg := range strings.Split(strings.TrimPrefix(u.Path, "/"), "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("upstreamURL(%q, %q) = %s: dot segment", escaped, rawQuery, u)
			}
		}
		// The partner reads back the segments the gateway validated.
		if got := strings.TrimPrefix(u.EscapedPath(), "/v1/"); got != path.Escaped() {
			t.Fatalf("upstreamURL(%q, %q) path %q; want %q", escaped, rawQuery, got, path.Escaped())
		}
	})
}

// FuzzParseResourceHeader: an accepted X-Fence-Resource is printable
// ASCII without spaces, at most the limit, with no empty or dot segments.
func FuzzParseResourceHeader(f *testing.F) {
	for _, seed := range []string{"user/u1", "a/../b", "", "a//b", "x y", "é"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		id, err := parseResourceHeader([]string{v})
		if err != nil {
			return
		}
		if id != v || len(id) == 0 || len(id) > api.MaxPartnerResourceBytes {
			t.Fatalf("parseResourceHeader(%q) = %q", v, id)
		}
		for _, seg := range strings.Split(id, "/") {
			if seg == "" || seg == "." || seg == ".." || strings.ContainsAny(seg, " \t\r\n") {
				t.Fatalf("parseResourceHeader(%q) accepted segment %q", v, seg)
			}
		}
	})
}
