package s3api_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestReadRanges reads a 100-byte object and an empty one through the
// door with a Range header, by GET and by HEAD, as S3 answers them (the
// ranges of versitygw's conformance tests GetObject_with_range and
// HeadObject_with_range): a range S3 honours is 206 with its
// Content-Range and Content-Length, also on HEAD; one it does not parse
// (a space, two dashes, several ranges, another unit, backwards) is
// ignored, 200 with the whole object; one past the end is 416.
func TestReadRanges(t *testing.T) {
	d := newDoor(t, doorOptions{})
	w := d.client(writerKey)
	data := strings.Repeat("0123456789", 10)
	if _, err := d.put(t, w, "hundred", 3, data); err != nil {
		t.Fatal(err)
	}
	if _, err := d.put(t, w, "empty", 3, ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key, rng     string
		status       int
		contentRange string
		body         string
	}{
		{"hundred", "bytes=,", 200, "", data},
		{"hundred", "bytes= -1", 200, "", data},
		{"hundred", "bytes=--1", 200, "", data},
		{"hundred", "bytes=0 -1", 200, "", data},
		{"hundred", "bytes=0- 1", 200, "", data},
		{"hundred", "bytes=0--1", 200, "", data},
		{"hundred", "bytes=10-5", 200, "", data},
		{"hundred", "bytes=abc", 200, "", data},
		{"hundred", "foo=0-1", 200, "", data},
		{"hundred", "bytes=100-x", 200, "", data},
		{"hundred", "bytes=0-0,1-2", 200, "", data},
		{"hundred", "bytes=102-0", 200, "", data},
		{"hundred", "bytes=00-01", 206, "bytes 0-1/100", data[:2]},
		{"hundred", "bytes=-1", 206, "bytes 99-99/100", data[99:]},
		{"hundred", "bytes=-101", 206, "bytes 0-99/100", data},
		{"hundred", "bytes=0-100", 206, "bytes 0-99/100", data},
		{"hundred", "bytes=50-", 206, "bytes 50-99/100", data[50:]},
		{"hundred", "bytes=-0", 416, "", ""},
		{"hundred", "bytes=100-110", 416, "", ""},
		{"empty", "bytes= -1", 200, "", ""},
		{"empty", "bytes=-1", 200, "", ""},
		{"empty", "bytes=0-0", 416, "", ""},
		{"empty", "bytes=0-", 416, "", ""},
	} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			t.Run(fmt.Sprintf("%s %s %q", method, tc.key, tc.rng), func(t *testing.T) {
				req, err := http.NewRequest(method, d.url+"/"+d.bucket+"/"+tc.key, nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Range", tc.rng)
				resp := d.rawRequest(t, readerKey, req, nil)
				body, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != tc.status {
					t.Fatalf("%s Range %q = %d (%s); want %d", method, tc.rng, resp.StatusCode, body, tc.status)
				}
				if tc.status == http.StatusRequestedRangeNotSatisfiable {
					return
				}
				if got := resp.Header.Get("Content-Range"); got != tc.contentRange {
					t.Errorf("%s Range %q: Content-Range %q; want %q", method, tc.rng, got, tc.contentRange)
				}
				if resp.ContentLength != int64(len(tc.body)) {
					t.Errorf("%s Range %q: Content-Length %d; want %d", method, tc.rng, resp.ContentLength, len(tc.body))
				}
				if method == http.MethodGet && string(body) != tc.body {
					t.Errorf("GET Range %q = %q; want %q", tc.rng, body, tc.body)
				}
			})
		}
	}
}
