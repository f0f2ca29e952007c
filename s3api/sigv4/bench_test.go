package sigv4_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"fencegate/s3api/sigv4"
)

// BenchmarkVerifyPutObject verifies the PutObject that fencebench's S3 API
// cell sends (aws-sdk-go-v2 as fencebench sets it up: unsigned payload,
// no checksum, the token in the metadata, 1 KiB), read off the wire as
// the gateway's server reads it, and reads its body.
func BenchmarkVerifyPutObject(b *testing.B) {
	v, err := sigv4.New(sigv4.Config{Keys: keys{testAccessKey: testSecret}, Region: testRegion})
	if err != nil {
		b.Fatal(err)
	}
	body := strings.Repeat("x", 1<<10)
	r, err := http.NewRequest(http.MethodPut, "http://127.0.0.1:9000/bench/run-1/s3api/w7?x-id=PutObject", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	r.Header.Set("X-Amz-Meta-Fence-Token", "1")
	r.Header.Set("User-Agent", "aws-sdk-go-v2/1.41.0 ua/2.1 os/linux lang/go#1.26 md/GOOS#linux md/GOARCH#amd64 api/s3#1.95.0 m/E,Z")
	r.Header.Set("Amz-Sdk-Invocation-Id", "0b6c6c4e-1f7a-4a3e-9a55-6d1c1a0e7f11")
	r.Header.Set("Amz-Sdk-Request", "attempt=1; max=1")
	r.Header.Set("Accept-Encoding", "identity")
	r.Header.Set("X-Amz-Content-Sha256", sigv4.UnsignedPayload)
	creds := aws.Credentials{AccessKeyID: testAccessKey, SecretAccessKey: testSecret}
	if err := newSigner().SignHTTP(context.Background(), creds, r, sigv4.UnsignedPayload, "s3", testRegion, time.Now()); err != nil {
		b.Fatal(err)
	}
	var wire bytes.Buffer
	if err := r.Write(&wire); err != nil {
		b.Fatal(err)
	}
	raw := wire.Bytes()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			b.Fatal(err)
		}
		res, err := v.Verify(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, res.Body); err != nil || n != 1<<10 {
			b.Fatalf("body: %d bytes, %v", n, err)
		}
	}
}
