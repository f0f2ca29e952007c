package rest

import (
	"errors"
	"strings"
	"testing"

	"fencegate/api"
)

// FuzzDecodeTicketBody: a ticket body is decoded, or refused as invalid
// (400), never anything else; one that is decoded is one of the route's
// three: a request for part tickets names an upload and nothing of the
// object, any other names a size of 1 or more and no part to start from.
func FuzzDecodeTicketBody(f *testing.F) {
	f.Add(`{"size":11,"content_type":"text/csv","metadata":{"owner":"a"}}`)
	f.Add(`{"size":11000000,"part_size":5242880,"part_count":1}`)
	f.Add(`{"upload_id":"u.s","first_part":2,"part_count":100}`)
	f.Add(`{"upload_id":"u","first_part":1,"part_count":1,"size":5}`)
	f.Add(`{"upload_id":"u","metadata":{}}`)
	f.Add(`{"upload_id":"","size":5,"first_part":3}`)
	f.Add(`{"size":5,"part_count":2}`)
	f.Add(`{"size":0}{}`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, body string) {
		b, err := decodeTicketBody(strings.NewReader(body))
		if err != nil {
			if !errors.Is(err, api.ErrInvalidRequest) {
				t.Fatalf("decodeTicketBody(%q) = %v; want ErrInvalidRequest", body, err)
			}
			return
		}
		if b.UploadID != "" {
			if b.Size != nil || b.PartSize != 0 || b.ContentType != "" || b.Metadata != nil {
				t.Fatalf("decodeTicketBody(%q) = %+v; want nothing of the object with upload_id", body, b)
			}
			return
		}
		if b.Size == nil || *b.Size < 1 || b.FirstPart != 0 || (b.PartCount != 0 && b.PartSize == 0) {
			t.Fatalf("decodeTicketBody(%q) = %+v; want a size of 1 or more, no first_part, part_count only with part_size", body, b)
		}
	})
}
