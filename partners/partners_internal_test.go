package partners

import (
	"errors"
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

// TestResourcePathCheck: a header-mode route's resource_path lets a
// request through only when its path starts with the template's literals
// and, in place of {resource}, the header's resource id, segment by
// segment and percent-decoded.
func TestResourcePathCheck(t *testing.T) {
	for _, tc := range []struct {
		template, id, path string
		ok                 bool
	}{
		{"accounts/{resource}", "a1", "accounts/a1", true},
		{"accounts/{resource}", "a1", "accounts/a1/refunds", true},
		{"accounts/{resource}", "a1", "accounts/a2/refunds", false},
		{"accounts/{resource}", "a1", "accounts/a1x/refunds", false},
		{"accounts/{resource}", "a1", "accounts", false},
		{"accounts/{resource}", "a1", "", false},
		{"accounts/{resource}", "a1", "refunds/a1", false},
		{"accounts/{resource}", "a1", "Accounts/a1", false},
		{"accounts/{resource}", "eu/a1", "accounts/eu/a1/refunds", true},
		{"accounts/{resource}", "eu/a1", "accounts/eu/a2/refunds", false},
		{"accounts/{resource}", "eu/a1", "accounts/eu", false},
		{"accounts/{resource}", "a 1", "accounts/a%201/x", true},
		{"accounts/{resource}", "a%201", "accounts/a%201/x", false},
		{"{resource}/charges", "a1", "a1/charges/c1", true},
		{"{resource}/charges", "a1", "a1/refunds", false},
	} {
		binding, err := parseResourcePath(tc.template)
		if err != nil {
			t.Fatalf("parseResourcePath(%q): %v", tc.template, err)
		}
		path, err := api.ParsePartnerPath(tc.path)
		if err != nil {
			t.Fatalf("ParsePartnerPath(%q): %v", tc.path, err)
		}
		err = binding.check(tc.id, path)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, api.ErrInvalidRequest) {
			t.Errorf("%q.check(%q, %q) = %v; want ok %v (else invalid-request)", tc.template, tc.id, tc.path, err, tc.ok)
		}
	}
	var none *resourcePath
	if err := none.check("a1", api.PartnerPath{Segments: []string{"accounts", "a2"}}); err != nil {
		t.Errorf("no binding: check = %v; want nil (the path is not checked)", err)
	}
}

// FuzzResourcePathCheck: whatever X-Fence-Resource and path a client
// sends, a request that passes accounts/{resource} acts below
// accounts/<the header's resource>: the path's segments after "accounts",
// as many as the id has, joined by '/', are the id.
func FuzzResourcePathCheck(f *testing.F) {
	for _, seed := range []struct{ id, path string }{
		{"a1", "accounts/a1/refunds"},
		{"a1", "accounts/a2/refunds"},
		{"eu/a1", "accounts/eu/a1"},
		{"a%2F1", "accounts/a%2F1"},
		{"a 1", "accounts/a%201"},
	} {
		f.Add(seed.id, seed.path)
	}
	binding, err := parseResourcePath("accounts/{resource}")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, header, escaped string) {
		id, err := parseResourceHeader([]string{header})
		if err != nil {
			return
		}
		path, err := api.ParsePartnerPath(escaped)
		if err != nil {
			return
		}
		if binding.check(id, path) != nil {
			return
		}
		n := strings.Count(id, "/") + 1
		if len(path.Segments) < 1+n || path.Segments[0] != "accounts" || strings.Join(path.Segments[1:1+n], "/") != id {
			t.Fatalf("check(%q, %q) passed a path that does not start with accounts/%s", id, escaped, id)
		}
	})
}

// TestParseUpstream covers the partner upstream URL rules.
func TestParseUpstream(t *testing.T) {
	tests := []struct {
		in      string
		wantErr string
	}{
		{"https://api.example.com/v1", ""},
		{"http://10.0.0.1:8080", ""},
		{"HTTPS://api.example.com", ""},
		{"ftp://api.example.com", `scheme "ftp" not allowed`},
		{"api.example.com", `scheme "" not allowed`},
		{"https://", "has no host"},
		{"https:api.example.com", "has no host"},
		{"https://:443", "has no host"},
		{"https://u:p@api.example.com", "has user info"},
		{"https://api.example.com/?key=1", "has a query"},
		{"https://api.example.com/?", "has a query"},
		{"https://api.example.com/#frag", "has a fragment"},
		{"https://api.example.com/#", "has a fragment"},
		{"https://api example.com", "is not a URL"},
		{"https://api.example.com/v1/../x", "base path"},
	}
	for _, tt := range tests {
		_, err := ParseUpstream(tt.in)
		if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseUpstream(%q) = %v; want error containing %q", tt.in, err, tt.wantErr)
		}
		if err != nil && strings.Contains(err.Error(), ":p@") {
			t.Errorf("ParseUpstream(%q) = %v: the password is in the message", tt.in, err)
		}
	}
}

func TestParseResourceTemplate(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"header", true},
		{"accounts/{account}", true},
		{"{a}", true},
		{"v1/{org}/repos/{repo}", true},
		{"", false},
		{"accounts", false},
		{"accounts/{a}/x/{a}", false},
		{"accounts//{a}", false},
		{"/{a}", false},
		{"./{a}", false},
		{"acc{a}", false},
		{"{a b}", false},
		{"a%2F/{a}", false},
		{"Header", false},
	} {
		if _, err := parseResourceTemplate(tc.in); (err == nil) != tc.ok {
			t.Errorf("parseResourceTemplate(%q) = %v; want ok %v", tc.in, err, tc.ok)
		}
	}
}
