package clients_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"hash/crc32"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// httpClient is an HTTP client for d: trusting its certificate over
// HTTPS.
func httpClient(t *testing.T, d *door) *http.Client {
	t.Helper()
	if d.certFile == "" {
		return &http.Client{}
	}
	pemBytes, err := os.ReadFile(d.certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatal("the door's certificate does not parse")
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// TestGoSDKPresignedURLs: URLs from aws-sdk-go-v2's presigner with the
// settings config.LoadDefaultConfig gives (a GET's query asks for
// checksums: X-Amz-Checksum-Mode=ENABLED), sent with a plain HTTP client
// over HTTP and HTTPS: a PUT with the file's CRC32 signed as a header and
// the token as metadata (in the query) stores the file with its token; a
// stale one is 409 StaleFenceToken; the GET reads the bytes back; a URL
// whose checksum mode is sent twice is 400 and reaches nothing.
func TestGoSDKPresignedURLs(t *testing.T) {
	for _, scheme := range []string{"http", "https"} {
		t.Run(scheme, func(t *testing.T) {
			d := newDoor(t)
			if scheme == "https" {
				d = newTLSDoor(t)
			}
			hc := httpClient(t, d)
			cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion("us-east-1"),
				config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(accessKeyID, secretKey, "")))
			if err != nil {
				t.Fatal(err)
			}
			presign := s3.NewPresignClient(s3.NewFromConfig(cfg, func(o *s3.Options) {
				o.BaseEndpoint, o.UsePathStyle = aws.String(d.endpoint), true
			}))
			key := "go-presigned/obj"
			_, want := writeFile(t, t.TempDir(), "obj", 70<<10, "go presigned")
			send := func(req *v4Request, body []byte) (int, []byte) {
				t.Helper()
				r, err := http.NewRequest(req.Method, req.URL, bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				for k, vs := range req.SignedHeader {
					if k != "Host" && k != "Content-Length" {
						r.Header[k] = vs
					}
				}
				resp, err := hc.Do(r)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, b
			}
			put := func(token string, body []byte) (int, []byte) {
				sum := crc32.ChecksumIEEE(body)
				p, err := presign.PresignPutObject(context.Background(), &s3.PutObjectInput{
					Bucket: aws.String(d.bucket), Key: aws.String(key), Metadata: map[string]string{"fence-token": token},
					ChecksumCRC32: aws.String(base64.StdEncoding.EncodeToString([]byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)})),
				})
				if err != nil {
					t.Fatal(err)
				}
				return send(&v4Request{p.Method, p.URL, p.SignedHeader}, body)
			}
			if status, b := put("3", want); status != http.StatusOK {
				t.Fatalf("presigned PUT with token 3: %d %s; want 200", status, b)
			}
			if status, b := put("2", []byte("stale")); status != http.StatusConflict || !bytes.Contains(b, []byte("<Code>StaleFenceToken</Code>")) {
				t.Errorf("presigned PUT with stale token 2: %d %s; want 409 StaleFenceToken", status, b)
			}
			if body, token, ok := d.stored(t, key); !ok || !bytes.Equal(body, want) || token != "3" {
				t.Errorf("versitygw holds %d bytes (the file's: %v) with token %q, present %v; want the file and 3", len(body), bytes.Equal(body, want), token, ok)
			}
			get, err := presign.PresignGetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(key)})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(get.URL, "X-Amz-Checksum-Mode=ENABLED") {
				t.Errorf("the SDK's presigned GET %s has no X-Amz-Checksum-Mode=ENABLED: this test is meant to cover it", get.URL)
			}
			if status, b := send(&v4Request{get.Method, get.URL, get.SignedHeader}, nil); status != http.StatusOK || !bytes.Equal(b, want) {
				t.Errorf("presigned GET: %d, %d bytes (the file's: %v); want 200 and the file", status, len(b), bytes.Equal(b, want))
			}
			if status, b := send(&v4Request{get.Method, get.URL + "&X-Amz-Checksum-Mode=ENABLED", get.SignedHeader}, nil); status != http.StatusBadRequest || !bytes.Contains(b, []byte("<Code>InvalidArgument</Code>")) {
				t.Errorf("presigned GET with X-Amz-Checksum-Mode twice: %d %s; want 400 InvalidArgument", status, b)
			}
		})
	}
}

// v4Request is a presigned request as the SDK's presigner returns it.
type v4Request struct {
	Method       string
	URL          string
	SignedHeader http.Header
}
