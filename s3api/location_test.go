package s3api_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestCompleteLocation: CompleteMultipartUpload answers the object's
// absolute URL in Location, from the request's scheme and Host, with the
// key escaped as one path segment, as S3 (and versitygw's
// CompleteMultipartUpload_success) answers it: path-style
// scheme://host/bucket/key, virtual-hosted scheme://bucket.domain/key.
func TestCompleteLocation(t *testing.T) {
	for _, tc := range []struct {
		name, domain string
	}{
		{name: "path-style"},
		{name: "virtual-hosted", domain: "s3.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDoor(t, doorOptions{domain: tc.domain})
			ctx := context.Background()
			c := d.client(writerKey)
			key := "dir/my obj"
			up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(d.bucket), Key: aws.String(key),
				Metadata: map[string]string{"fence-token": "5"}})
			if err != nil {
				t.Fatal(err)
			}
			part, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(d.bucket), Key: aws.String(key), UploadId: up.UploadId,
				PartNumber: aws.Int32(1), Body: strings.NewReader("the one part")})
			if err != nil {
				t.Fatal(err)
			}
			body := []byte(`<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>` + aws.ToString(part.ETag) + `</ETag></Part></CompleteMultipartUpload>`)
			target, want := d.url+"/"+d.bucket+"/dir/my%20obj", d.url+"/"+d.bucket+"/dir%2Fmy%20obj"
			req, err := http.NewRequest(http.MethodPost, target+"?uploadId="+url.QueryEscape(aws.ToString(up.UploadId)), bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.domain != "" {
				req, err = http.NewRequest(http.MethodPost, d.url+"/dir/my%20obj?uploadId="+url.QueryEscape(aws.ToString(up.UploadId)), bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Host = d.bucket + "." + tc.domain
				want = "https://" + req.Host + "/dir%2Fmy%20obj"
			}
			resp := d.rawRequest(t, writerKey, req, body)
			answer, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("complete = %d %s, %v", resp.StatusCode, answer, err)
			}
			var result struct{ Location string }
			if err := xml.Unmarshal(answer, &result); err != nil {
				t.Fatal(err)
			}
			if result.Location != want {
				t.Fatalf("Location = %q; want %q", result.Location, want)
			}
		})
	}
}
