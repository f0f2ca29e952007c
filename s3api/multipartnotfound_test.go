package s3api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestUploadPartCopyMissingSource: a part copied from a key that does
// not exist is S3's 404 NoSuchKey (versitygw's
// UploadPartCopy_non_existing_source_object_key), not a lost race; the
// upload stays, and a part from a source that exists is then stored.
func TestUploadPartCopyMissingSource(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	c := d.client(writerKey)
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(d.bucket), Key: aws.String("dst"),
		Metadata: map[string]string{"fence-token": "7"}})
	if err != nil {
		t.Fatal(err)
	}
	copyPart := func(source string) error {
		_, err := c.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: aws.String(d.bucket), Key: aws.String("dst"), UploadId: up.UploadId,
			PartNumber: aws.Int32(1), CopySource: aws.String(d.bucket + "/" + source)})
		return err
	}
	wantAPIError(t, copyPart("no/such/key"), http.StatusNotFound, "NoSuchKey")
	if _, err := d.put(t, c, "src", 3, "source"); err != nil {
		t.Fatal(err)
	}
	if err := copyPart("src"); err != nil {
		t.Fatalf("copy a part of an existing source after the refusal: %v", err)
	}
}
