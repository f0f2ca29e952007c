package api

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseObjectPath(t *testing.T) {
	tests := []struct {
		bucket, key string
		ok          bool
	}{
		{"dev", "greeting", true},
		{"my-bucket.1", "a/b/c.txt", true},
		{"dev", "ünïcødé key", true},
		{"dev", strings.Repeat("k", MaxKeyBytes), true},
		{"dev", "", false},
		{"dev", strings.Repeat("k", MaxKeyBytes+1), false},
		{"dev", "/leading", false},
		{"dev", "trailing/", false},
		{"dev", "a//b", false},
		{"dev", "a/../b", false},
		{"dev", "./a", false},
		{"dev", "..", false},
		{"dev", "new\nline", false},
		{"dev", "del\x7f", false},
		{"dev", "bad\xffutf8", false},
		{"", "k", false},
		{"ab", "k", false},
		{strings.Repeat("b", 64), "k", false},
		{"UPPER", "k", false},
		{"-dash", "k", false},
		{"dash-", "k", false},
		{"a..b", "k", false},
		{"under_score", "k", false},
	}
	for _, tt := range tests {
		got, err := ParseObjectPath(tt.bucket, tt.key)
		if tt.ok != (err == nil) {
			t.Errorf("ParseObjectPath(%q, %q) = %v, %v; want ok=%v", tt.bucket, tt.key, got, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidObjectPath) {
			t.Errorf("ParseObjectPath(%q, %q) error %v does not wrap ErrInvalidObjectPath", tt.bucket, tt.key, err)
		}
		if err == nil && got.Resource() != Resource("s3/"+tt.bucket+"/"+tt.key) {
			t.Errorf("ParseObjectPath(%q, %q).Resource() = %q", tt.bucket, tt.key, got.Resource())
		}
	}
}

// FuzzParseObjectPath checks that every accepted path keeps the promises
// the S3 backend relies on.
func FuzzParseObjectPath(f *testing.F) {
	f.Add("dev", "greeting")
	f.Add("dev", "a/../b")
	f.Add("Dev", "a//b")
	f.Add("dev", "\xff")
	f.Fuzz(func(t *testing.T, bucket, key string) {
		p, err := ParseObjectPath(bucket, key)
		if err != nil {
			if !errors.Is(err, ErrInvalidObjectPath) {
				t.Fatalf("ParseObjectPath(%q, %q) error %v does not wrap ErrInvalidObjectPath", bucket, key, err)
			}
			return
		}
		if p.Bucket != bucket || p.Key != key {
			t.Fatalf("ParseObjectPath(%q, %q) = %+v; changed its input", bucket, key, p)
		}
		if len(bucket) < 3 || len(bucket) > 63 || strings.ContainsAny(bucket, "/ ") {
			t.Fatalf("accepted bucket %q", bucket)
		}
		if key == "" || len(key) > MaxKeyBytes || !utf8.ValidString(key) {
			t.Fatalf("accepted key %q", key)
		}
		for _, seg := range strings.Split(key, "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("accepted key %q with segment %q", key, seg)
			}
		}
	})
}

func TestObjectPathResourceNamesItsStore(t *testing.T) {
	for _, tc := range []struct {
		path ObjectPath
		want Resource
	}{
		{ObjectPath{Bucket: "reports", Key: "q3.csv"}, "s3/reports/q3.csv"},
		{ObjectPath{Store: StoreS3, Bucket: "reports", Key: "q3.csv"}, "s3/reports/q3.csv"},
		{ObjectPath{Store: StoreGCS, Bucket: "reports", Key: "a/b"}, "gcs/reports/a/b"},
	} {
		if got := tc.path.Resource(); got != tc.want {
			t.Errorf("%+v.Resource() = %q; want %q", tc.path, got, tc.want)
		}
	}
}
