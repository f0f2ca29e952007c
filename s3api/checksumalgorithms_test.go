package s3api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"fencegate/internal/s3checksum"
)

// TestPutObjectChecksumAlgorithms: a PutObject with an x-amz-checksum-*
// header of any algorithm the newest SDKs name (CRC32, CRC32C, CRC64NVME,
// SHA1, SHA256, SHA512, MD5, XXHASH64, XXHASH3, XXHASH128) lands when the
// value is the body's and is refused 400 BadDigest, with nothing stored,
// when it is not, as S3 does. A header of an algorithm no one knows is
// refused 400, never ignored: a client that asked for its bytes to be
// checked must not have them stored unchecked. Each right value is first
// sent straight to versitygw, so the values are S3's, not only the door's
// own hashes agreeing with themselves.
func TestPutObjectChecksumAlgorithms(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	direct := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(sharedS3.Endpoint()), UsePathStyle: true,
		Credentials:      credentials.NewStaticCredentialsProvider(sharedS3.AccessKey, sharedS3.SecretKey, ""),
		RetryMaxAttempts: 1, RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
	})
	// The door's client computes no checksum of its own: each request
	// carries the one header the test sets.
	door := d.client(writerKey, func(o *s3.Options) { o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired })
	body := []byte("the bytes whose checksum the client sends")
	for _, alg := range s3checksum.Algorithms {
		t.Run(alg.Name, func(t *testing.T) {
			h := alg.New()
			h.Write(body)
			right := base64.StdEncoding.EncodeToString(h.Sum(nil))
			wrong := base64.StdEncoding.EncodeToString(make([]byte, h.Size()))
			header := "X-Amz-Checksum-" + alg.Name

			if _, err := direct.PutObject(ctx, &s3.PutObjectInput{
				Bucket: aws.String(d.bucket), Key: aws.String("direct-" + alg.Name), Body: bytes.NewReader(body),
			}, withHeader(header, right)); err != nil {
				t.Fatalf("straight to versitygw, %s %s: %v", header, right, err)
			}

			key := "right-" + alg.Name
			if _, err := door.PutObject(ctx, &s3.PutObjectInput{
				Bucket: aws.String(d.bucket), Key: aws.String(key), Body: bytes.NewReader(body),
				Metadata: map[string]string{"fence-token": "4"},
			}, withHeader(header, right)); err != nil {
				t.Fatalf("through the door, %s %s: %v", header, right, err)
			}
			if got, token, ok := d.stored(t, key); !ok || got != string(body) || token != "4" {
				t.Errorf("%s: stored %q (token %q, present %v); want the body, token 4", key, got, token, ok)
			}

			key = "wrong-" + alg.Name
			_, err := door.PutObject(ctx, &s3.PutObjectInput{
				Bucket: aws.String(d.bucket), Key: aws.String(key), Body: bytes.NewReader(body),
				Metadata: map[string]string{"fence-token": "4"},
			}, withHeader(header, wrong))
			wantAPIError(t, err, http.StatusBadRequest, "BadDigest")
			if _, _, ok := d.stored(t, key); ok {
				t.Errorf("%s with a wrong %s was stored", key, header)
			}
		})
	}

	for i, header := range []string{"X-Amz-Checksum-Sha384", "X-Amz-Checksum-Crc16"} {
		key := fmt.Sprintf("unknown-%d", i)
		_, err := door.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(d.bucket), Key: aws.String(key), Body: bytes.NewReader(body),
			Metadata: map[string]string{"fence-token": "4"},
		}, withHeader(header, "AAAA"))
		wantAPIError(t, err, http.StatusBadRequest, "InvalidRequest")
		if _, _, ok := d.stored(t, key); ok {
			t.Errorf("a PUT with %s was stored", header)
		}
	}
}
