package s3api_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// answerStatus is the HTTP status of an SDK call's answer: 200 without an
// error, else the status of the error's response (0: none).
func answerStatus(err error) int {
	if err == nil {
		return http.StatusOK
	}
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) {
		return respErr.HTTPStatusCode()
	}
	return 0
}

// TestUnquotedEntityTags: aws-sdk-go-v2's GetObject, HeadObject and
// CopyObject with an ETag sent without its quotes (If-Match: abc, as
// users often pass it) are answered as S3 answers the quoted ETag: the
// read's or the copy source's condition holds or fails, never 400.
func TestUnquotedEntityTags(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	c := d.client(writerKey)
	out, err := d.put(t, c, "tagged", 3, "tagged bytes")
	if err != nil {
		t.Fatal(err)
	}
	bare := strings.Trim(aws.ToString(out.ETag), `"`)
	other := "0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name                 string
		ifMatch, ifNoneMatch string
		want                 int
	}{
		{"If-Match holds", bare, "", http.StatusOK},
		{"If-Match fails", other, "", http.StatusPreconditionFailed},
		{"If-None-Match matches", "", bare, http.StatusNotModified},
		{"If-None-Match does not match", "", other, http.StatusOK},
		{"If-Match quoted and bare", `"` + bare + `"`, "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			get, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("tagged"),
				IfMatch: optional(tc.ifMatch), IfNoneMatch: optional(tc.ifNoneMatch)})
			if err == nil {
				get.Body.Close()
			}
			if got := answerStatus(err); got != tc.want {
				t.Errorf("GetObject: %d (%v); want %d", got, err, tc.want)
			}
			_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("tagged"),
				IfMatch: optional(tc.ifMatch), IfNoneMatch: optional(tc.ifNoneMatch)})
			if got := answerStatus(err); got != tc.want {
				t.Errorf("HeadObject: %d (%v); want %d", got, err, tc.want)
			}
			// A copy whose source's condition fails is 412, a
			// not-modified one included.
			wantCopy := tc.want
			if wantCopy == http.StatusNotModified {
				wantCopy = http.StatusPreconditionFailed
			}
			_, err = c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("copy of tagged"),
				CopySource: aws.String(d.bucket + "/tagged"), CopySourceIfMatch: optional(tc.ifMatch), CopySourceIfNoneMatch: optional(tc.ifNoneMatch)},
				withHeader("X-Amz-Meta-Fence-Token", "4"))
			if got := answerStatus(err); got != wantCopy {
				t.Errorf("CopyObject: %d (%v); want %d", got, err, wantCopy)
			}
		})
	}
}

// optional is s for the SDK: nil when empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return aws.String(s)
}
