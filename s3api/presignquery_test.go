package s3api_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestPresignedEncryptionAndTagging: a PUT presigned by aws-sdk-go-v2
// with SSE-KMS, a bucket key and tags (the SDK signs the encryption and
// the tagging as headers, and moves
// x-amz-server-side-encryption-bucket-key-enabled into the query) is
// served with their S3 meaning, fenced: the store gets the encryption
// with the bucket key, and the object its tags, as minio-go reads them
// from versitygw; a stale token is 409 StaleFenceToken and changes
// nothing. Changing a value of the signed query is SignatureDoesNotMatch.
func TestPresignedEncryptionAndTagging(t *testing.T) {
	d, store := newSSEDoor(t, nil)
	presign := s3.NewPresignClient(d.client(writerKey))
	body := []byte("presigned with encryption and tags")
	put := func(token string, change func(url string) string) *http.Response {
		t.Helper()
		p, err := presign.PresignPutObject(context.Background(), &s3.PutObjectInput{
			Bucket: aws.String(d.bucket), Key: aws.String("k"), ServerSideEncryption: types.ServerSideEncryptionAwsKms,
			SSEKMSKeyId: aws.String("arn:aws:kms:us-east-1:111122223333:key/1234abcd"), BucketKeyEnabled: aws.Bool(true),
			Tagging: aws.String("project=fence&team=a%20b"), Metadata: map[string]string{"fence-token": token},
		})
		if err != nil {
			t.Fatal(err)
		}
		url := p.URL
		if change != nil {
			url = change(url)
		}
		req, err := http.NewRequest(p.Method, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range p.SignedHeader {
			if k != "Host" && k != "Content-Length" {
				req.Header[k] = vs
			}
		}
		resp, err := d.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := put("5", nil); resp.StatusCode != http.StatusOK {
		e := readS3Error(t, resp)
		t.Fatalf("presigned PUT: %d %s (%s); want 200", resp.StatusCode, e.Code, e.Message)
	}
	wantSSE(t, "the write's PUT", only(t, store.seen(d.bucket, "k"), http.MethodPut, "").sse, map[string]string{
		hSSE: "aws:kms", hKMSKeyID: "arn:aws:kms:us-east-1:111122223333:key/1234abcd", hBucketKey: "true"})
	wantTags(t, "the object's tags", d.storedTags(t, "k"), map[string]string{"project": "fence", "team": "a b"})

	for _, tt := range []struct {
		name, token string
		change      func(string) string
		status      int
		code        string
	}{
		{"stale token", "4", nil, http.StatusConflict, "StaleFenceToken"},
		{"bucket key changed", "6", func(u string) string {
			return string(bytes.Replace([]byte(u), []byte("Bucket-Key-Enabled=true"), []byte("Bucket-Key-Enabled=false"), 1))
		}, http.StatusForbidden, "SignatureDoesNotMatch"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := put(tt.token, tt.change)
			e := readS3Error(t, resp)
			if resp.StatusCode != tt.status || e.Code != tt.code {
				t.Fatalf("answered %d %s (%s); want %d %s", resp.StatusCode, e.Code, e.Message, tt.status, tt.code)
			}
			if got, token, _ := d.stored(t, "k"); got != string(body) || token != "5" {
				t.Errorf("versitygw holds %q with token %q; want the first PUT's, 5", got, token)
			}
		})
	}
}
