package sigv4_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"

	"fencegate/s3api/sigv4"
)

func minioClient(t *testing.T, s *s3Server, tls bool) *minio.Client {
	t.Helper()
	u, _ := url.Parse(s.URL)
	c, err := minio.New(u.Host, &minio.Options{
		Creds:        miniocreds.NewStaticV4(testAccessKey, testSecret, ""),
		Secure:       tls,
		Region:       testRegion,
		BucketLookup: minio.BucketLookupPath,
		Transport:    s.Client().Transport,
		// Checksums travel as (signed) trailers, as minio-go sends them to AWS.
		TrailingHeaders: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestMinioPutObject sends real minio-go PutObject requests: over HTTP it
// signs aws-chunked bodies chunk by chunk (STREAMING-AWS4-HMAC-SHA256-PAYLOAD,
// with a signed checksum trailer when a checksum is asked for); the verifier
// must accept each and yield the exact bytes (minio-go sends no checksum
// for an empty body). A presigned GET of the object
// made by minio-go must then be accepted too.
func TestMinioPutObject(t *testing.T) {
	checksums := []minio.ChecksumType{minio.ChecksumNone, minio.ChecksumCRC32, minio.ChecksumCRC32C, minio.ChecksumCRC64NVME, minio.ChecksumSHA1, minio.ChecksumSHA256}
	for _, tls := range []bool{false, true} {
		s := newS3Server(t, tls, sigv4.Config{Region: testRegion})
		client := minioClient(t, s, tls)
		for _, sum := range checksums {
			for _, size := range []int{0, 1, 70_000, 300_001} {
				for _, disableSHA := range []bool{false, true} {
					name := fmt.Sprintf("tls=%v/%s/%d/disableContentSha256=%v", tls, sum, size, disableSHA)
					t.Run(name, func(t *testing.T) {
						payload := testPayload(size)
						key := "dir/a b+c~d*é=%.txt"
						_, err := client.PutObject(context.Background(), "bucket", key, bytes.NewReader(payload), int64(size), minio.PutObjectOptions{
							Checksum:             sum,
							DisableContentSha256: disableSHA,
							UserMetadata:         map[string]string{"fence-token": "33"},
						})
						o := s.last(t)
						if err != nil {
							t.Fatalf("PutObject: %v (server: %v)", err, o.Err)
						}
						if !o.Complete || !bytes.Equal(o.Body, payload) {
							t.Fatalf("verified body: complete=%v, %d bytes; want the %d bytes sent", o.Complete, len(o.Body), size)
						}
						if want := strings.ToLower(sum.String()); sum.IsSet() && size > 0 && o.Checksum != want {
							t.Errorf("checksum verified %q; want %q", o.Checksum, want)
						}
						t.Logf("x-amz-content-sha256=%s checksum=%s", o.ContentSHA256, o.Checksum)

						u, err := client.PresignedGetObject(context.Background(), "bucket", key, time.Hour, nil)
						if err != nil {
							t.Fatal(err)
						}
						resp, err := s.Client().Get(u.String())
						if err != nil {
							t.Fatal(err)
						}
						got, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK || !bytes.Equal(got, payload) {
							t.Fatalf("presigned GET: %d, %d bytes (server: %v); want 200 and the object", resp.StatusCode, len(got), s.last(t).Err)
						}
					})
				}
			}
		}
	}
}
