package api

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

func TestNotForwardedIsAnUpstreamError(t *testing.T) {
	err := fmt.Errorf("partner payments: %w: %w: connection refused", ErrUpstream, ErrNotForwarded)
	if p := ProblemFor(err); p.Status != 502 || p.Type != ProblemTypePrefix+"upstream-error" {
		t.Fatalf("ProblemFor(not forwarded) = %d %s; want 502 upstream-error", p.Status, p.Type)
	}
}

func TestParseIdempotencyKey(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		want   IdempotencyKey
		ok     bool
	}{
		{"none", nil, "", true},
		{"uuid", []string{"8e03978e-40d5-43e8-bc93-6894a57f9324"}, "8e03978e-40d5-43e8-bc93-6894a57f9324", true},
		{"one char", []string{"k"}, "k", true},
		{"inner space and punctuation", []string{`order 1/2 "x" ~!`}, `order 1/2 "x" ~!`, true},
		{"255", []string{strings.Repeat("k", 255)}, IdempotencyKey(strings.Repeat("k", 255)), true},
		{"256", []string{strings.Repeat("k", 256)}, "", false},
		{"empty", []string{""}, "", false},
		{"two", []string{"a", "b"}, "", false},
		{"two equal", []string{"a", "a"}, "", false},
		{"tab", []string{"a\tb"}, "", false},
		{"NUL", []string{"a\x00"}, "", false},
		{"DEL", []string{"a\x7f"}, "", false},
		{"non-ASCII", []string{"clé"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseIdempotencyKey(tt.values)
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("ParseIdempotencyKey(%q) = %q, %v; want %q, ok=%v", tt.values, got, err, tt.want, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrMalformedIdempotencyKey) {
				t.Fatalf("ParseIdempotencyKey(%q) error %v does not wrap ErrMalformedIdempotencyKey", tt.values, err)
			}
		})
	}
}

func FuzzParseIdempotencyKey(f *testing.F) {
	for _, s := range []string{"k", "", "a b", "\x00", "é", strings.Repeat("x", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseIdempotencyKey([]string{s})
		if err != nil {
			if !errors.Is(err, ErrMalformedIdempotencyKey) {
				t.Fatalf("ParseIdempotencyKey(%q) error %v does not wrap ErrMalformedIdempotencyKey", s, err)
			}
			return
		}
		if string(got) != s || len(s) < 1 || len(s) > MaxIdempotencyKeyBytes {
			t.Fatalf("ParseIdempotencyKey(%q) = %q", s, got)
		}
		for _, c := range []byte(s) {
			if c < 0x20 || c > 0x7e {
				t.Fatalf("ParseIdempotencyKey accepted %q with byte %#x", s, c)
			}
		}
	})
}

func TestFingerprintCoversEveryField(t *testing.T) {
	base := NewFingerprint("POST", "accounts/a1/charges?x=1", []byte(`{"amount":5}`), 7)
	if base != NewFingerprint("POST", "accounts/a1/charges?x=1", []byte(`{"amount":5}`), 7) {
		t.Fatal("NewFingerprint is not deterministic")
	}
	others := map[string]Fingerprint{
		"method": NewFingerprint("PUT", "accounts/a1/charges?x=1", []byte(`{"amount":5}`), 7),
		"path":   NewFingerprint("POST", "accounts/a2/charges?x=1", []byte(`{"amount":5}`), 7),
		"query":  NewFingerprint("POST", "accounts/a1/charges?x=2", []byte(`{"amount":5}`), 7),
		"body":   NewFingerprint("POST", "accounts/a1/charges?x=1", []byte(`{"amount":6}`), 7),
		"token":  NewFingerprint("POST", "accounts/a1/charges?x=1", []byte(`{"amount":5}`), 8),
		// Moving bytes between fields must not collide.
		"boundary": NewFingerprint("POSTa", "ccounts/a1/charges?x=1", []byte(`{"amount":5}`), 7),
	}
	for name, f := range others {
		if f == base {
			t.Errorf("changing the %s does not change the fingerprint", name)
		}
	}
	if len(base.String()) != 64 {
		t.Errorf("Fingerprint.String() = %q; want 64 hex digits", base)
	}
}

func TestParsePartnerPath(t *testing.T) {
	tests := []struct {
		escaped string
		want    []string // nil with ok: empty path
		ok      bool
	}{
		{"", nil, true},
		{"accounts/acct_1/charges", []string{"accounts", "acct_1", "charges"}, true},
		{"a%20b/c", []string{"a b", "c"}, true},
		{"v1/caf%C3%A9", []string{"v1", "café"}, true},
		{"a:b@c;d=e", []string{"a:b@c;d=e"}, true},
		{"..", nil, false},
		{".", nil, false},
		{"a/../b", nil, false},
		{"a/./b", nil, false},
		{"%2e%2e/admin", nil, false},
		{"%2E%2e", nil, false},
		{".%2e", nil, false},
		{"a%2Fb", nil, false},
		{"a%2fb", nil, false},
		{"..%2F..%2Fadmin", nil, false},
		{"a%5Cb", nil, false},
		{`a\b`, nil, false},
		{"a%252e%252e", nil, false},
		{"a//b", nil, false},
		{"/evil.example/x", nil, false},
		{"a/", nil, false},
		{"a%00b", nil, false},
		{"a%0Ab", nil, false},
		{"a%zz", nil, false},
		{"a%", nil, false},
	}
	for _, tt := range tests {
		got, err := ParsePartnerPath(tt.escaped)
		if (err == nil) != tt.ok {
			t.Errorf("ParsePartnerPath(%q) = %q, %v; want ok=%v", tt.escaped, got.Segments, err, tt.ok)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidRequest) {
				t.Errorf("ParsePartnerPath(%q) error %v does not wrap ErrInvalidRequest", tt.escaped, err)
			}
			continue
		}
		if strings.Join(got.Segments, "|") != strings.Join(tt.want, "|") {
			t.Errorf("ParsePartnerPath(%q) = %q; want %q", tt.escaped, got.Segments, tt.want)
		}
	}
}

// FuzzParsePartnerPath checks the promises the partner backend relies on
// to keep every request below the route's base URL.
func FuzzParsePartnerPath(f *testing.F) {
	for _, s := range []string{"accounts/a1/charges", "..", "%2e%2e/x", "a%2Fb", "a//b", "a%252e", "caf%C3%A9", "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePartnerPath(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("ParsePartnerPath(%q) error %v does not wrap ErrInvalidRequest", s, err)
			}
			return
		}
		for _, seg := range p.Segments {
			if seg == "" || seg == "." || seg == ".." || strings.ContainsAny(seg, "/\\%") {
				t.Fatalf("ParsePartnerPath(%q) accepted segment %q", s, seg)
			}
		}
		// The canonical form parses back to the same segments, and an
		// upstream that decodes it once finds no dot segment or slash.
		again, err := ParsePartnerPath(p.Escaped())
		if err != nil || strings.Join(again.Segments, "\x00") != strings.Join(p.Segments, "\x00") {
			t.Fatalf("ParsePartnerPath(%q).Escaped() = %q parses to %q, %v", s, p.Escaped(), again.Segments, err)
		}
		u, err := url.Parse("http://upstream.test/base/" + p.Escaped())
		if err != nil || u.Host != "upstream.test" || !strings.HasPrefix(u.Path, "/base/") && u.Path != "/base/" {
			t.Fatalf("ParsePartnerPath(%q): forwarded URL %v, %v leaves the base", s, u, err)
		}
	})
}

// TestHeaderFingerprint: header names are compared case aside and in any
// order; values, their order and how they are split into lines are not.
func TestHeaderFingerprint(t *testing.T) {
	base := NewHeaderFingerprint(map[string][]string{"Content-Type": {"application/json"}, "X-A": {"1", "2"}})
	for name, h := range map[string]map[string][]string{
		"lower-case names": {"content-type": {"application/json"}, "x-a": {"1", "2"}},
		"upper-case names": {"CONTENT-TYPE": {"application/json"}, "X-A": {"1", "2"}},
	} {
		if got := NewHeaderFingerprint(h); got != base {
			t.Errorf("NewHeaderFingerprint(%s) = %s; want %s, as the canonical names", name, got, base)
		}
	}
	for name, h := range map[string]map[string][]string{
		"another value":              {"Content-Type": {"text/plain"}, "X-A": {"1", "2"}},
		"values in another order":    {"Content-Type": {"application/json"}, "X-A": {"2", "1"}},
		"values on one line":         {"Content-Type": {"application/json"}, "X-A": {"1, 2"}},
		"a header more":              {"Content-Type": {"application/json"}, "X-A": {"1", "2"}, "X-B": {""}},
		"a header less":              {"Content-Type": {"application/json"}},
		"underscore for dash":        {"Content_Type": {"application/json"}, "X-A": {"1", "2"}},
		"a value moved to the name":  {"Content-Typeapplication/json": {}, "X-A": {"1", "2"}},
		"an empty value more":        {"Content-Type": {"application/json", ""}, "X-A": {"1", "2"}},
		"a value moved to the other": {"Content-Type": {"application/json", "1"}, "X-A": {"2"}},
	} {
		if got := NewHeaderFingerprint(h); got == base {
			t.Errorf("NewHeaderFingerprint(%s) = the base fingerprint; want another", name)
		}
	}
	if NewHeaderFingerprint(nil) != NewHeaderFingerprint(map[string][]string{}) {
		t.Error("NewHeaderFingerprint(nil) differs from that of an empty header")
	}
}
