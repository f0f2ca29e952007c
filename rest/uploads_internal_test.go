package rest

import (
	"errors"
	"testing"

	"fencegate/api"
)

// FuzzDecodeCompletion: a completion body is decoded, or refused as
// invalid (400), never anything else; one that is
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
		c, err := decodeCompletion([]byte(body))
		if err != nil {
			if !errors.Is(err, api.ErrInvalidRequest) {
				t.Fatalf("decodeCompletion(%q) = %v; want ErrInvalidRequest", body, err)
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
