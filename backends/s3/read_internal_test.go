package s3

import (
	"testing"
	"time"

	"fencegate/api"
)

func TestStillNotModified(t *testing.T) {
	modified := time.Date(2026, 12, 3, 18, 0, 0, 500e6, time.UTC) // sub-second, as S3 stores it
	current := &api.Object{ETag: `"b"`, LastModified: modified}
	tests := []struct {
		name   string
		in     api.GetObjectInput
		answer api.Object
		want   bool
	}{
		{"answer names the current version", api.GetObjectInput{}, api.Object{ETag: `"b"`}, true},
		{"answer names another version", api.GetObjectInput{IfNoneMatch: `"b"`}, api.Object{ETag: `"a"`}, false},
		{"If-None-Match the current ETag", api.GetObjectInput{IfNoneMatch: `"b"`}, api.Object{}, true},
		{"If-None-Match weak matches", api.GetObjectInput{IfNoneMatch: `W/"b"`}, api.Object{}, true},
		{"If-None-Match *", api.GetObjectInput{IfNoneMatch: "*"}, api.Object{}, true},
		{"If-None-Match an old ETag", api.GetObjectInput{IfNoneMatch: `"a"`}, api.Object{}, false},
		{"If-Match no longer holds", api.GetObjectInput{IfMatch: `"a"`, IfNoneMatch: `"b"`}, api.Object{}, false},
		{"If-Match weak never holds", api.GetObjectInput{IfMatch: `W/"b"`, IfNoneMatch: `"b"`}, api.Object{}, false},
		{"If-Modified-Since the same second", api.GetObjectInput{IfModifiedSince: modified.Truncate(time.Second)}, api.Object{}, true},
		{"If-Modified-Since before", api.GetObjectInput{IfModifiedSince: modified.Add(-time.Second)}, api.Object{}, false},
		{"no condition", api.GetObjectInput{}, api.Object{}, false},
	}
	for _, tt := range tests {
		if got := stillNotModified(tt.in, &tt.answer, current); got != tt.want {
			t.Errorf("%s: stillNotModified(%+v, %+v) = %v; want %v", tt.name, tt.in, tt.answer, got, tt.want)
		}
	}
}
