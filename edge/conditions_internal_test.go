package edge

import (
	"regexp"
	"testing"
)

func TestByteRange(t *testing.T) {
	tests := []struct {
		field, want string
	}{
		{"bytes=2-5", "bytes=2-5"},
		{"bytes=7-", "bytes=7-"},
		{"bytes=-3", "bytes=-3"},
		{"Bytes = 0002-05", "bytes=2-5"},
		{"bytes=8-99999999999999999999999", "bytes=8-"},
		{"bytes=99999999999999999999999-", "bytes=9223372036854775807-"},
		{"bytes=-99999999999999999999999", "bytes=-9223372036854775807"},
		{"bytes=5-2", ""},
		{"bytes=0-1,4-5", ""},
		{"bytes=0-1,", ""},
		{"bytes=-", ""},
		{"bytes=+1-2", ""},
		{"bytes=1-2\r\nX-Amz-Meta-Fence-Token: 9", ""},
		{"items=0-1", ""},
		{"bytes", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := ByteRange(tt.field); got != tt.want {
			t.Errorf("ByteRange(%q) = %q; want %q", tt.field, got, tt.want)
		}
	}
}

// canonicalRange is every Range the gateway may send S3.
var canonicalRange = regexp.MustCompile(`^bytes=([0-9]+-[0-9]*|-[0-9]+)$`)

func FuzzByteRange(f *testing.F) {
	for _, s := range []string{"bytes=2-5", "bytes=-3", "bytes=7-", "bytes=0-1,4-5", "bytes=99999999999999999999-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, field string) {
		got := ByteRange(field)
		if got == "" {
			return
		}
		if !canonicalRange.MatchString(got) || len(got) > len("bytes=")+2*19+1 {
			t.Fatalf("ByteRange(%q) = %q; not a canonical byte range", field, got)
		}
		if again := ByteRange(got); again != got {
			t.Fatalf("ByteRange(%q) = %q; want it unchanged", got, again)
		}
	})
}

func TestEntityTag(t *testing.T) {
	tests := []struct {
		fields  []string
		want    string
		wantErr bool
	}{
		{nil, "", false},
		{[]string{`"abc"`}, `"abc"`, false},
		{[]string{` W/"abc" `}, `W/"abc"`, false},
		{[]string{"*"}, "*", false},
		{[]string{`"abc",`}, `"abc"`, false},
		{[]string{`abc`}, "", true},
		{[]string{`"a b"`}, "", true},
		{[]string{`"a"`, `"b"`}, "", true},
		{[]string{`"a", "b"`}, "", true},
		{[]string{`*, "b"`}, "", true},
		{[]string{"\"a\"\r\nX: y"}, "", true},
	}
	for _, tt := range tests {
		got, err := EntityTag(tt.fields)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("EntityTag(%q) = %q, %v; want %q, error %v", tt.fields, got, err, tt.want, tt.wantErr)
		}
	}
}
