package api

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestParseTokenHeader(t *testing.T) {
	tests := []struct {
		name    string
		values  []string
		want    Token
		wantErr error
	}{
		{"one", []string{"1"}, 1, nil},
		{"typical", []string{"34"}, 34, nil},
		{"max", []string{"9223372036854775807"}, MaxToken, nil},
		{"missing", nil, 0, ErrMissingToken},
		{"empty", []string{""}, 0, ErrMalformedToken},
		{"two headers", []string{"5", "6"}, 0, ErrMalformedToken},
		{"two equal headers", []string{"5", "5"}, 0, ErrMalformedToken},
		{"comma list", []string{"5, 6"}, 0, ErrMalformedToken},
		{"negative", []string{"-1"}, 0, ErrMalformedToken},
		{"plus sign", []string{"+1"}, 0, ErrMalformedToken},
		{"zero", []string{"0"}, 0, ErrMalformedToken},
		{"leading zero", []string{"007"}, 0, ErrMalformedToken},
		{"inner space", []string{"5 5"}, 0, ErrMalformedToken},
		{"leading space", []string{" 5"}, 0, ErrMalformedToken},
		{"trailing space", []string{"5 "}, 0, ErrMalformedToken},
		{"tab", []string{"5\t"}, 0, ErrMalformedToken},
		{"exponent", []string{"1e3"}, 0, ErrMalformedToken},
		{"hex", []string{"0x10"}, 0, ErrMalformedToken},
		{"underscore", []string{"1_000"}, 0, ErrMalformedToken},
		{"decimal point", []string{"1.0"}, 0, ErrMalformedToken},
		{"arabic-indic digits", []string{"٣٤"}, 0, ErrMalformedToken},
		{"fullwidth digits", []string{"３４"}, 0, ErrMalformedToken},
		{"2^63", []string{"9223372036854775808"}, 0, ErrMalformedToken},
		{"2^64", []string{"18446744073709551616"}, 0, ErrMalformedToken},
		{"2^64-1", []string{"18446744073709551615"}, 0, ErrMalformedToken},
		{"1000 digits", []string{strings.Repeat("9", 1000)}, 0, ErrMalformedToken},
		{"letters", []string{"abc"}, 0, ErrMalformedToken},
		{"NUL", []string{"5\x00"}, 0, ErrMalformedToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTokenHeader(tt.values)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Errorf("ParseTokenHeader(%q) = %v, %v; want %v, %v", tt.values, got, err, tt.want, tt.wantErr)
			}
			if tt.wantErr != nil && errors.Is(err, ErrMissingToken) == errors.Is(err, ErrMalformedToken) {
				t.Errorf("ParseTokenHeader(%q) error %v is not exactly one of missing/malformed", tt.values, err)
			}
		})
	}
}

// FuzzParseToken checks the parser against the grammar's definition: a
// value is accepted exactly when it is the canonical decimal form of a
// number in [1, 2^63-1].
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"1", "34", "0", "007", "-1", "+1", "1e3", "9223372036854775807", "9223372036854775808", " 5", "٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseToken(s)
		n, convErr := strconv.ParseInt(s, 10, 64)
		canonical := convErr == nil && n >= 1 && strconv.FormatInt(n, 10) == s
		switch {
		case canonical && (err != nil || got != Token(n)):
			t.Fatalf("ParseToken(%q) = %v, %v; want %d", s, got, err, n)
		case !canonical && err == nil:
			t.Fatalf("ParseToken(%q) = %v; want ErrMalformedToken", s, got)
		case err != nil && !errors.Is(err, ErrMalformedToken):
			t.Fatalf("ParseToken(%q) error %v does not wrap ErrMalformedToken", s, err)
		}
	})
}
