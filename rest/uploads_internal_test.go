package rest

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"fencegate/api"
)

// FuzzDecodeCompletion: a completion body is decoded, or refused as
// invalid (400) or too large (413), never anything else; one that is
// decoded names an upload and parts a store takes, by ascending number.
func FuzzDecodeCompletion(f *testing.F) {
	f.Add(`{"upload_id":"u.s","parts":[{"part_number":1,"etag":"\"e\""},{"part_number":2,"etag":"e"}]}`)
	f.Add(`{"upload_id":"u","parts":[{"part_number":2,"etag":"e"},{"part_number":1,"etag":"e"}]}`)
	f.Add(`{"upload_id":"u","parts":[{"part_number":1,"etag":"e","size":1}]}`)
	f.Add(`{"upload_id":"u","parts":[]}{}`)
	f.Add(`{"UPLOAD_ID":"u","Parts":[{"Part_Number":1,"ETAG":"e"}]}`)
	f.Add(`[]`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, body string) {
		c, err := decodeCompletion(httptest.NewRequest("POST", "/v1/uploads/b/k", strings.NewReader(body)))
		if err != nil {
			if !errors.Is(err, api.ErrInvalidRequest) && !errors.Is(err, api.ErrBodyTooLarge) {
				t.Fatalf("decodeCompletion(%q) = %v; want ErrInvalidRequest or ErrBodyTooLarge", body, err)
			}
			return
		}
		if c.UploadID == "" || len(c.Parts) == 0 || len(c.Parts) > api.MaxParts {
			t.Fatalf("decodeCompletion(%q) = %+v; want an upload id and 1 to %d parts", body, c, api.MaxParts)
		}
		for i, p := range c.Parts {
			if p.ETag == "" || p.Number < 1 || p.Number > api.MaxParts || (i > 0 && p.Number <= c.Parts[i-1].Number) {
				t.Fatalf("decodeCompletion(%q): part %d is %+v; want an ETag and ascending numbers of 1 to %d", body, i+1, p, api.MaxParts)
			}
		}
	})
}

// TestDecodeCompletionBounded: a body over maxCompletionBytes is 413
// whether its Content-Length says so or it comes chunked, with no length.
func TestDecodeCompletionBounded(t *testing.T) {
	body := strings.Repeat(" ", maxCompletionBytes-2) + "{}"
	for _, tt := range []struct {
		name   string
		body   string
		length int64 // -1: chunked
		want   error
	}{
		{"at the limit", body, int64(len(body)), api.ErrInvalidRequest}, // {} names no upload
		{"at the limit, chunked", body, -1, api.ErrInvalidRequest},
		{"over the limit", " " + body, int64(len(body) + 1), api.ErrBodyTooLarge},
		{"over the limit, chunked", " " + body, -1, api.ErrBodyTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/v1/uploads/b/k", strings.NewReader(tt.body))
			r.ContentLength = tt.length
			if _, err := decodeCompletion(r); !errors.Is(err, tt.want) {
				t.Fatalf("decodeCompletion(%d bytes, Content-Length %d) = %v; want %v", len(tt.body), tt.length, err, tt.want)
			}
		})
	}
}
