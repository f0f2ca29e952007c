package sigv4_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"fencegate/s3api/sigv4"
)

func sdkClient(s *s3Server, secret string) *s3.Client {
	return s3.New(s3.Options{
		Region:       testRegion,
		BaseEndpoint: aws.String(s.URL),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(testAccessKey, secret, ""),
		HTTPClient:   s.Client(),
		// What config.LoadDefaultConfig sets: checksums on by default.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
	})
}

// onlyReader hides Seek, so the SDK cannot hash the body up front.
type onlyReader struct{ io.Reader }

func testPayload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// TestSDKPutObject sends real aws-sdk-go-v2 PutObject requests, with its
// default checksum (CRC32, as config.LoadDefaultConfig sets it up) and each
// algorithm, seekable and streaming bodies, over HTTP and HTTPS; the
// verifier must accept each and yield the exact bytes. Over HTTP the SDK
// signs the payload's SHA-256 and sends the checksum as a header; over HTTPS
// it sends aws-chunked STREAMING-UNSIGNED-PAYLOAD-TRAILER with the checksum
// in the trailer (an empty body: UNSIGNED-PAYLOAD and a checksum header).
// (The SDK refuses a body it cannot seek over plain HTTP.)
func TestSDKPutObject(t *testing.T) {
	for _, tls := range []bool{false, true} {
		s := newS3Server(t, tls, sigv4.Config{Region: testRegion})
		client := sdkClient(s, testSecret)
		for _, alg := range []types.ChecksumAlgorithm{"", types.ChecksumAlgorithmCrc32, types.ChecksumAlgorithmCrc32c, types.ChecksumAlgorithmCrc64nvme, types.ChecksumAlgorithmSha1, types.ChecksumAlgorithmSha256} {
			wantChecksum := strings.ToLower(string(alg))
			if alg == "" {
				wantChecksum = "crc32"
			}
			for _, size := range []int{0, 1, 65536, 200_001} {
				for _, streaming := range []bool{false, true} {
					if streaming && !tls {
						continue
					}
					scheme, wantMode := "http", "hex"
					if tls {
						scheme, wantMode = "https", sigv4.UnsignedPayload
					}
					if tls && size > 0 {
						wantMode = sigv4.StreamingUnsignedTrailer
					}
					t.Run(fmt.Sprintf("%s/%s/%d/streaming=%v", scheme, wantChecksum, size, streaming), func(t *testing.T) {
						payload := testPayload(size)
						var body io.Reader = bytes.NewReader(payload)
						if streaming {
							body = onlyReader{body}
						}
						in := &s3.PutObjectInput{
							Bucket:            aws.String("bucket"),
							Key:               aws.String("dir/a b+c~d*é=%.txt"),
							Body:              body,
							ChecksumAlgorithm: alg,
							Metadata:          map[string]string{"fence-token": "33"},
						}
						if streaming {
							in.ContentLength = aws.Int64(int64(size))
						}
						_, err := client.PutObject(context.Background(), in)
						o := s.last(t)
						if err != nil {
							t.Fatalf("PutObject: %v (server: %v)", err, o.Err)
						}
						if !o.Complete || !bytes.Equal(o.Body, payload) {
							t.Fatalf("verified body: complete=%v, %d bytes, equal=%v; want the %d bytes sent", o.Complete, len(o.Body), bytes.Equal(o.Body, payload), size)
						}
						mode := o.ContentSHA256
						if len(mode) == 64 {
							mode = "hex"
						}
						if mode != wantMode || o.Checksum != wantChecksum {
							t.Errorf("the SDK sent x-amz-content-sha256 %s with checksum %q; this case is meant to cover %s with %q", o.ContentSHA256, o.Checksum, wantMode, wantChecksum)
						}
						// An empty body is verified by Verify itself.
						if (o.ChecksumBefore != "") != (size == 0) || o.ChecksumAfter == "" {
							t.Errorf("Result.Checksum() = %q before the body, %q after it; want empty (but for an empty body), then the %s the SDK sent", o.ChecksumBefore, o.ChecksumAfter, wantChecksum)
						}
						if o.Path != "/bucket/dir/a b+c~d*é=%.txt" || o.Identity != "identity-"+testAccessKey {
							t.Errorf("path %q identity %q", o.Path, o.Identity)
						}
					})
				}
			}
		}
	}
}
