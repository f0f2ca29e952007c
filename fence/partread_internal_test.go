package fence

import (
	"errors"
	"testing"

	"fencegate/api"
)

// TestCheckPartRead: ReadObject reads a part only when the part is 1 to
// api.MaxParts, without a Range, of an S3 bucket's object; a store that
// does not know parts (GCS) would answer the whole object.
func TestCheckPartRead(t *testing.T) {
	s3Path := api.ObjectPath{Store: api.StoreS3, Bucket: "b", Key: "k"}
	tests := []struct {
		name string
		in   api.GetObjectInput
		ok   bool
	}{
		{"no part", api.GetObjectInput{Path: s3Path, Range: "bytes=0-1"}, true},
		{"part 1", api.GetObjectInput{Path: s3Path, PartNumber: 1}, true},
		{"part 10000", api.GetObjectInput{Path: s3Path, PartNumber: api.MaxParts}, true},
		{"no store named", api.GetObjectInput{Path: api.ObjectPath{Bucket: "b", Key: "k"}, PartNumber: 2}, true},
		{"part 10001", api.GetObjectInput{Path: s3Path, PartNumber: api.MaxParts + 1}, false},
		{"negative", api.GetObjectInput{Path: s3Path, PartNumber: -1}, false},
		{"with a Range", api.GetObjectInput{Path: s3Path, PartNumber: 1, Range: "bytes=0-1"}, false},
		{"GCS", api.GetObjectInput{Path: api.ObjectPath{Store: api.StoreGCS, Bucket: "b", Key: "k"}, PartNumber: 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkPartRead(tt.in)
			if tt.ok != (err == nil) || err != nil && !errors.Is(err, api.ErrInvalidRequest) {
				t.Fatalf("checkPartRead(%+v) = %v; want ok %v, else %v", tt.in, err, tt.ok, api.ErrInvalidRequest)
			}
		})
	}
}
