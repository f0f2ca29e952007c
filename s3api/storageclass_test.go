package s3api_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestStorageClassPassedThrough: the storage class the store answers is
// the door's answer too, as S3 gives it: HeadObject and GetObject of an
// object and of its copy (x-amz-storage-class; versitygw's
// CopyObject_cross_bucket_server_side_copy reads it after a copy), and
// ListParts (<StorageClass>; versitygw's ListParts_success). versitygw
// answers STANDARD; AWS answers it in ListParts and leaves the header
// out for STANDARD objects, which the door then leaves out too.
func TestStorageClassPassedThrough(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	c := d.client(writerKey)
	if _, err := d.put(t, c, "src", 3, "source"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("dst"), CopySource: aws.String(d.bucket + "/src"),
		Metadata: map[string]string{"fence-token": "3"}}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"src", "dst"} {
		head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(key)})
		if err != nil || head.StorageClass != types.StorageClassStandard {
			t.Errorf("HeadObject(%s) StorageClass = %q, %v; want STANDARD", key, head.StorageClass, err)
		}
		get, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		get.Body.Close()
		if get.StorageClass != types.StorageClassStandard {
			t.Errorf("GetObject(%s) StorageClass = %q; want STANDARD", key, get.StorageClass)
		}
	}
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(d.bucket), Key: aws.String("mp"),
		Metadata: map[string]string{"fence-token": "3"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(d.bucket), Key: aws.String("mp"), UploadId: up.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("part")}); err != nil {
		t.Fatal(err)
	}
	parts, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(d.bucket), Key: aws.String("mp"), UploadId: up.UploadId})
	if err != nil || parts.StorageClass != types.StorageClassStandard || len(parts.Parts) != 1 {
		t.Fatalf("ListParts = StorageClass %q, %d parts, %v; want STANDARD, 1 part", parts.StorageClass, len(parts.Parts), err)
	}
}
