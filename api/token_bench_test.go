package api

import (
	"net/http"
	"testing"
)

// BenchmarkParseTokenHeader is the token parser on the write path, as the
// gateway calls it: the values of the header, from http.Header.
func BenchmarkParseTokenHeader(b *testing.B) {
	tests := []struct {
		name   string
		values []string
	}{
		{"valid", []string{"9007199254740993"}},
		{"max", []string{"9223372036854775807"}},
		{"malformed", []string{"12a4"}},
		{"missing", nil},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = ParseTokenHeader(tt.values)
			}
		})
	}
}

// BenchmarkParseTokenFromRequest includes the header lookup, as the
// gateway does it.
func BenchmarkParseTokenFromRequest(b *testing.B) {
	h := http.Header{}
	h.Set(HeaderFenceToken, "34")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseTokenHeader(h.Values(HeaderFenceToken)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseObjectPath is the other parser every fenced write runs.
func BenchmarkParseObjectPath(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseObjectPath("bench", "run-abc/gateway/distinct/1KiB/c64/w17"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkObjectResource is the resource name every fenced write builds.
func BenchmarkObjectResource(b *testing.B) {
	p := ObjectPath{Bucket: "bench", Key: "run-abc/gateway/distinct/1KiB/c64/w17"}
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Resource()
	}
}
