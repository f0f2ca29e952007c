package s3api_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/minio/minio-go/v7"
)

// TestDefaultContentType: an object written through the door without a
// Content-Type is stored as S3 stores it, binary/octet-stream (versitygw's
// PutObject_default_content_type and
// CopyObject_default_content_type_with_replace_metadata); a Content-Type
// sent is kept, and a copy with COPY keeps the source's.
func TestDefaultContentType(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	c := d.client(writerKey)
	// The SDK sends application/octet-stream when the input has none;
	// S3's default is for a request without the header.
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("plain"), Body: strings.NewReader("bytes"),
		Metadata: map[string]string{"fence-token": "4"}}, withoutHeader("Content-Type")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("sdk"), Body: strings.NewReader("bytes"),
		Metadata: map[string]string{"fence-token": "4"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("typed"), ContentType: aws.String("text/plain"),
		Metadata: map[string]string{"fence-token": "4"}}); err != nil {
		t.Fatal(err)
	}
	copyOf := func(src, dst, directive string) {
		t.Helper()
		in := &s3.CopyObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(dst), CopySource: aws.String(d.bucket + "/" + src),
			Metadata: map[string]string{"fence-token": "4"}}
		if directive != "" {
			in.MetadataDirective = "REPLACE"
		}
		if _, err := c.CopyObject(ctx, in, withoutHeader("Content-Type")); err != nil {
			t.Fatalf("copy %s to %s: %v", src, dst, err)
		}
	}
	copyOf("typed", "replaced", "REPLACE")
	copyOf("typed", "copied", "")
	for _, tc := range []struct{ key, want string }{
		{"plain", "binary/octet-stream"},
		{"sdk", "application/octet-stream"},
		{"typed", "text/plain"},
		{"replaced", "binary/octet-stream"},
		{"copied", "text/plain"},
	} {
		info, err := d.minio.StatObject(ctx, d.bucket, tc.key, minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if info.ContentType != tc.want {
			t.Errorf("stored Content-Type of %s = %q; want %q", tc.key, info.ContentType, tc.want)
		}
		head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(tc.key)})
		if err != nil || aws.ToString(head.ContentType) != tc.want {
			t.Errorf("HeadObject(%s) Content-Type = %q, %v; want %q", tc.key, aws.ToString(head.ContentType), err, tc.want)
		}
	}
}

// withoutHeader removes a header from every request of an SDK call,
// before it is signed (the SDK adds a Content-Type of its own to a
// PutObject with a body).
func withoutHeader(name string) func(*s3.Options) {
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("withoutHeader",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					if req, ok := in.Request.(*smithyhttp.Request); ok {
						req.Header.Del(name)
					}
					return next.HandleFinalize(ctx, in)
				}), "Signing", middleware.Before)
		})
	}
}
