package s3api_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3's messages for the codes the tests below expect, as S3 answers them.
const (
	msgNoSuchBucket     = "The specified bucket does not exist"
	msgNoSuchKey        = "The specified key does not exist."
	msgNoSuchUpload     = "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed."
	msgMetadataTooLarge = "Your metadata headers exceed the maximum allowed metadata size"
	msgKeyTooLong       = "Your key is too long"
	msgInvalidRange     = "The requested range is not satisfiable"
	msgPrecondition     = "At least one of the pre-conditions you specified did not hold"
	msgInvalidBucket    = "The specified bucket is not valid."
	msgMalformedXML     = "The XML you provided was not well-formed or did not validate against our published schema"
)

// TestS3Messages: where the door answers one of S3's error codes, the
// message is S3's own for that code, whether the door refused the
// request itself (an upload id it does not fence, a key too long, user
// metadata above 2 KiB) or the store did (a missing bucket or key), as
// aws-sdk-go-v2 reads it; for a code S3 words per cause (InvalidRequest,
// InvalidArgument, InvalidTag, BadRequest), S3's message for the cause
// where S3 has one (a copy onto itself, Range with partNumber, tags). The multipart operations that name an upload
// (UploadPart, UploadPartCopy, CompleteMultipartUpload,
// AbortMultipartUpload, ListParts) in a bucket that does not exist are
// NoSuchBucket.
func TestS3Messages(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	c := d.client(writerKey)
	if _, err := d.put(t, c, "small", 3, "abc"); err != nil {
		t.Fatal(err)
	}
	missing := "no-such-bucket-" + d.bucket
	putTags := func(bucket string, tags ...types.Tag) error {
		_, err := c.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String(bucket), Key: aws.String("small"),
			Tagging: &types.Tagging{TagSet: tags}}, withHeader("X-Fence-Token", "5"))
		return err
	}
	upload := func(bucket string) *string {
		if bucket == missing {
			return aws.String("uploadId")
		}
		return aws.String("no-such-upload")
	}
	calls := []struct {
		name    string
		call    func(bucket string) error
		bucket  string
		status  int
		code    string
		message string
	}{
		{"GetObject missing key", func(b string) error {
			_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("no/such/key")})
			return err
		}, d.bucket, http.StatusNotFound, "NoSuchKey", msgNoSuchKey},
		{"GetObject missing bucket", func(b string) error {
			_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("k")})
			return err
		}, missing, http.StatusNotFound, "NoSuchBucket", msgNoSuchBucket},
		{"GetObject range beyond the object", func(b string) error {
			_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("small"), Range: aws.String("bytes=100-200")})
			return err
		}, d.bucket, http.StatusRequestedRangeNotSatisfiable, "InvalidRange", msgInvalidRange},
		{"PutObject key too long", func(b string) error {
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(strings.Repeat("k", 1025)),
				Body: strings.NewReader("x"), Metadata: map[string]string{"fence-token": "5"}})
			return err
		}, d.bucket, http.StatusBadRequest, "KeyTooLongError", msgKeyTooLong},
		{"PutObject metadata above 2 KiB", func(b string) error {
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("k"),
				Body: strings.NewReader("x"), Metadata: map[string]string{"fence-token": "5", "big": strings.Repeat("v", 2100)}})
			return err
		}, d.bucket, http.StatusBadRequest, "MetadataTooLarge", msgMetadataTooLarge},
		{"PutObject If-Match another ETag", func(b string) error {
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("small"), IfMatch: aws.String(`"0123456789abcdef0123456789abcdef"`),
				Body: strings.NewReader("x"), Metadata: map[string]string{"fence-token": "5"}})
			return err
		}, d.bucket, http.StatusPreconditionFailed, "PreconditionFailed", msgPrecondition},
		{"CreateBucket invalid name", func(b string) error {
			_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)})
			return err
		}, "aa", http.StatusBadRequest, "InvalidBucketName", msgInvalidBucket},
		{"CompleteMultipartUpload no part", func(b string) error {
			up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(b), Key: aws.String("mp"),
				Metadata: map[string]string{"fence-token": "5"}})
			if err != nil {
				return err
			}
			_, err = c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(b), Key: aws.String("mp"), UploadId: up.UploadId,
				MultipartUpload: &types.CompletedMultipartUpload{}})
			return err
		}, d.bucket, http.StatusBadRequest, "MalformedXML", msgMalformedXML},
		{"CopyObject onto itself", func(b string) error {
			_, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(b), Key: aws.String("small"), CopySource: aws.String(b + "/small"),
				Metadata: map[string]string{"fence-token": "5"}})
			return err
		}, d.bucket, http.StatusBadRequest, "InvalidRequest", "This copy request is illegal because it is trying to copy an object to itself without changing " +
			"the object's metadata, storage class, website redirect location or encryption attributes."},
		{"GetObject Range and partNumber", func(b string) error {
			_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("small"), Range: aws.String("bytes=0-1"), PartNumber: aws.Int32(1)})
			return err
		}, d.bucket, http.StatusBadRequest, "InvalidRequest", "Cannot specify both Range header and partNumber query parameter"},
		{"PutObjectTagging invalid key", func(b string) error {
			return putTags(b, types.Tag{Key: aws.String("user!name"), Value: aws.String("v")})
		}, d.bucket, http.StatusBadRequest, "InvalidTag", "The TagKey you have provided is invalid"},
		{"PutObjectTagging invalid value", func(b string) error {
			return putTags(b, types.Tag{Key: aws.String("k"), Value: aws.String("v!")})
		}, d.bucket, http.StatusBadRequest, "InvalidTag", "The TagValue you have provided is invalid"},
		{"PutObjectTagging a key twice", func(b string) error {
			return putTags(b, types.Tag{Key: aws.String("k"), Value: aws.String("1")}, types.Tag{Key: aws.String("k"), Value: aws.String("2")})
		}, d.bucket, http.StatusBadRequest, "InvalidTag", "Cannot provide multiple Tags with the same key"},
		{"PutObjectTagging eleven tags", func(b string) error {
			var tags []types.Tag
			for i := range 11 {
				tags = append(tags, types.Tag{Key: aws.String(strconv.Itoa(i)), Value: aws.String("v")})
			}
			return putTags(b, tags...)
		}, d.bucket, http.StatusBadRequest, "BadRequest", "Object tags cannot be greater than 10"},
		{"PutObject x-amz-tagging a key twice", func(b string) error {
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("k"), Tagging: aws.String("a=1&a=2"),
				Body: strings.NewReader("x"), Metadata: map[string]string{"fence-token": "5"}})
			return err
		}, d.bucket, http.StatusBadRequest, "InvalidArgument",
			"The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters without tag name duplicates."},
		{"UploadPart unknown upload", nil, d.bucket, http.StatusNotFound, "NoSuchUpload", msgNoSuchUpload},
		{"CompleteMultipartUpload unknown upload", nil, d.bucket, http.StatusNotFound, "NoSuchUpload", msgNoSuchUpload},
		{"AbortMultipartUpload unknown upload", nil, d.bucket, http.StatusNotFound, "NoSuchUpload", msgNoSuchUpload},
		{"ListParts unknown upload", nil, d.bucket, http.StatusNotFound, "NoSuchUpload", msgNoSuchUpload},
		{"UploadPart missing bucket", nil, missing, http.StatusNotFound, "NoSuchBucket", msgNoSuchBucket},
		{"UploadPartCopy missing bucket", nil, missing, http.StatusNotFound, "NoSuchBucket", msgNoSuchBucket},
		{"CompleteMultipartUpload missing bucket", nil, missing, http.StatusNotFound, "NoSuchBucket", msgNoSuchBucket},
		{"AbortMultipartUpload missing bucket", nil, missing, http.StatusNotFound, "NoSuchBucket", msgNoSuchBucket},
		{"ListParts missing bucket", nil, missing, http.StatusNotFound, "NoSuchBucket", msgNoSuchBucket},
	}
	multipart := map[string]func(bucket string) error{
		"UploadPart": func(b string) error {
			_, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(b), Key: aws.String("my-obj"), UploadId: upload(b),
				PartNumber: aws.Int32(1), Body: strings.NewReader("part")})
			return err
		},
		"UploadPartCopy": func(b string) error {
			_, err := c.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: aws.String(b), Key: aws.String("my-obj"), UploadId: upload(b),
				PartNumber: aws.Int32(1), CopySource: aws.String(d.bucket + "/small")})
			return err
		},
		"CompleteMultipartUpload": func(b string) error {
			_, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(b), Key: aws.String("my-obj"), UploadId: upload(b),
				MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: aws.String(`"abc"`)}}}})
			return err
		},
		"AbortMultipartUpload": func(b string) error {
			_, err := c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(b), Key: aws.String("my-obj"), UploadId: upload(b)})
			return err
		},
		"ListParts": func(b string) error {
			_, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(b), Key: aws.String("my-obj"), UploadId: upload(b)})
			return err
		},
	}
	for _, tt := range calls {
		t.Run(tt.name, func(t *testing.T) {
			call := tt.call
			if call == nil {
				op, _, _ := strings.Cut(tt.name, " ")
				call = multipart[op]
			}
			err := call(tt.bucket)
			wantAPIError(t, err, tt.status, tt.code)
			var apiErr smithy.APIError
			errors.As(err, &apiErr)
			if apiErr.ErrorMessage() != tt.message {
				t.Errorf("message %q; want S3's %q", apiErr.ErrorMessage(), tt.message)
			}
		})
	}
}
