package s3api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
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

// TestMultipartMissingBucket: UploadPart, UploadPartCopy,
// CompleteMultipartUpload and AbortMultipartUpload in a bucket that does
// not exist are S3's 404 NoSuchBucket (versitygw's
// UploadPart_non_existing_bucket, UploadPartCopy_non_existing_bucket,
// CompletedMultipartUpload_non_existing_bucket,
// AbortMultipartUpload_non_existing_bucket), whatever upload id and copy
// source they name; in the door's bucket the same requests are
// NoSuchUpload (an upload id that names nothing) or InvalidArgument (a
// copy source that is not bucket/key), and an identity without the
// write grant is answered as before, learning nothing of the bucket.
func TestMultipartMissingBucket(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	calls := map[string]func(c *s3.Client, bucket string) error{
		"UploadPart": func(c *s3.Client, bucket string) error {
			_, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String("my-obj"), UploadId: aws.String("uploadId"),
				PartNumber: aws.Int32(1), Body: strings.NewReader("part")})
			return err
		},
		"UploadPartCopy": func(c *s3.Client, bucket string) error {
			_, err := c.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: aws.String(bucket), Key: aws.String("my-obj"), UploadId: aws.String("uploadId"),
				PartNumber: aws.Int32(1), CopySource: aws.String("Copy-Source")})
			return err
		},
		"CompleteMultipartUpload": func(c *s3.Client, bucket string) error {
			_, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("my-obj"),
				UploadId: aws.String("uploadId"), MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: aws.String(`"abc"`)}}}})
			return err
		},
		"AbortMultipartUpload": func(c *s3.Client, bucket string) error {
			_, err := c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("my-obj"), UploadId: aws.String("uploadId")})
			return err
		},
	}
	inOwnBucket := map[string]string{"UploadPart": "NoSuchUpload", "UploadPartCopy": "InvalidArgument",
		"CompleteMultipartUpload": "NoSuchUpload", "AbortMultipartUpload": "NoSuchUpload"}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			wantAPIError(t, call(d.client(writerKey), "no-such-bucket-"+d.bucket), http.StatusNotFound, "NoSuchBucket")
			status := http.StatusNotFound
			if inOwnBucket[name] == "InvalidArgument" {
				status = http.StatusBadRequest
			}
			wantAPIError(t, call(d.client(writerKey), d.bucket), status, inOwnBucket[name])
			// A reader gets what it got before the bucket was looked
			// up: AccessDenied, or the copy source's InvalidArgument.
			if name == "UploadPartCopy" {
				wantAPIError(t, call(d.client(readerKey), "no-such-bucket-"+d.bucket), http.StatusBadRequest, "InvalidArgument")
			} else {
				wantAPIError(t, call(d.client(readerKey), "no-such-bucket-"+d.bucket), http.StatusForbidden, "AccessDenied")
			}
		})
	}
}
