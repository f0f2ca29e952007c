package s3api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"

	"fencegate/api"
)

// TestCopyObjectSourceMetadataRules: CopyObject with the COPY directive
// stores the source's user metadata beside the copy's own fence-token
// entry, and holds what it will store to PutObject's rules: at most 2 KiB
// of names and values, the fence-token entry included (MetadataTooLarge),
// and printable US-ASCII values (InvalidArgument). The sources are
// written straight to S3, past the door's checks; a copy that breaks a
// rule is refused before the fence check, so that nothing is stored and
// no mark is raised.
func TestCopyObjectSourceMetadataRules(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	// "fence-token" is 11 bytes and "big" 3: with a one-digit token, a
	// value of 2033 fills 2 KiB.
	atLimit := strings.Repeat("v", 2048-11-1-3)
	cases := []struct {
		name     string
		meta     map[string]string // the source's, written straight to S3
		token    api.Token         // the copy's
		wantCode string            // "" when the copy is stored
	}{
		{name: "2 KiB with the token", meta: map[string]string{"big": atLimit}, token: 5},
		{name: "one byte over with the token", meta: map[string]string{"big": atLimit + "v"}, token: 5, wantCode: "MetadataTooLarge"},
		{name: "over by a longer token", meta: map[string]string{"big": atLimit}, token: 55, wantCode: "MetadataTooLarge"},
		{name: "over in several entries", meta: map[string]string{"a": strings.Repeat("x", 1000), "b": strings.Repeat("y", 1000), "c": strings.Repeat("z", 40)}, token: 5, wantCode: "MetadataTooLarge"},
		{name: "the source's own token is not counted", meta: map[string]string{"big": atLimit[9:], "fence-token": "123456789"}, token: 5},
		{name: "bytes beyond ASCII in a value", meta: map[string]string{"owner": "élise"}, token: 5, wantCode: "InvalidArgument"},
	}
	c := d.client(writerKey)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := "src"+string(rune('a'+i)), "dst"+string(rune('a'+i))
			if _, err := d.minio.PutObject(ctx, d.bucket, src, strings.NewReader("source"), 6, minio.PutObjectOptions{UserMetadata: tc.meta}); err != nil {
				t.Fatalf("put the source straight to S3: %v", err)
			}
			stored := d.storedMetadata(t, src).user
			for k, v := range tc.meta {
				if stored[k] != v {
					t.Fatalf("S3 stored the source's %s as %q; want %q (the case tests nothing else)", k, stored[k], v)
				}
			}
			d.s3.Reset()
			_, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(dst), CopySource: aws.String(d.bucket + "/" + src),
				Metadata: map[string]string{"fence-token": tc.token.String()}})
			if tc.wantCode == "" {
				if err != nil {
					t.Fatalf("copy: %v", err)
				}
				got := d.storedMetadata(t, dst).user
				want := map[string]string{"fence-token": tc.token.String()}
				for k, v := range tc.meta {
					if k != "fence-token" {
						want[k] = v
					}
				}
				if len(got) != len(want) {
					t.Fatalf("copy stored %d metadata entries %v; want %v", len(got), got, want)
				}
				for k, v := range want {
					if got[k] != v {
						t.Fatalf("copy stored %s = %q; want %q", k, got[k], v)
					}
				}
				if hwm := d.mark(t, dst); hwm != tc.token {
					t.Fatalf("mark = %s; want %s", hwm, tc.token)
				}
				return
			}
			wantAPIError(t, err, http.StatusBadRequest, tc.wantCode)
			if n := d.s3.CountMethod(http.MethodPut); n != 0 {
				t.Errorf("%d PUTs reached S3; want none", n)
			}
			if hwm := d.mark(t, dst); hwm != 0 {
				t.Errorf("mark of %s = %s; want none raised", dst, hwm)
			}
			if _, _, ok := d.stored(t, dst); ok {
				t.Errorf("%s was stored", dst)
			}
		})
	}
}
