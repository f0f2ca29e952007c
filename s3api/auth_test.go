package s3api_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"fencegate/gateway"
)

// TestSignaturesWithoutAuth: with auth off in the gateway (as fencegate
// dev), signatures are still verified: an unknown key, a wrong secret and
// temporary credentials are refused, and nothing reaches S3 or raises a
// mark; a signed request writes.
func TestSignaturesWithoutAuth(t *testing.T) {
	d := newDoor(t, doorOptions{noAuth: true})
	ctx := context.Background()
	tests := []struct {
		name        string
		key, secret string
		session     string
		status      int
		code        string
	}{
		{name: "unknown key", key: "AKIAUNKNOWN", secret: "whatever", status: 403, code: "InvalidAccessKeyId"},
		{name: "wrong secret", key: writerKey, secret: "wrong", status: 403, code: "SignatureDoesNotMatch"},
		{name: "session token", key: writerKey, secret: secretOf + writerKey, session: "FwoGZXIvYXdzE", status: 400, code: "InvalidToken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d.s3.Reset()
			c := d.client(writerKey, func(o *s3.Options) {
				o.Credentials = credentials.NewStaticCredentialsProvider(tt.key, tt.secret, tt.session)
			})
			_, err := d.put(t, c, "k", 5, "x")
			wantAPIError(t, err, tt.status, tt.code)
			if n := d.s3.Count(); n != 0 {
				t.Errorf("%d requests reached S3", n)
			}
			if hwm := d.mark(t, "k"); hwm != 0 {
				t.Errorf("mark raised to %d", hwm)
			}
		})
	}
	if _, err := d.put(t, d.client(readerKey), "k", 5, "x"); err != nil {
		t.Fatalf("without auth any known key writes: %v", err)
	}
	if _, err := d.client(writerKey).ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(d.bucket)}); err != nil {
		t.Fatalf("list: %v", err)
	}
}

// TestContentMD5: a body that does not match its Content-MD5 is refused
// (BadDigest) and nothing is stored, whether the gateway buffers it or
// streams it to S3 (BufferBytes 1 KiB: the 4 KiB body streams, and its
// held-back last byte keeps S3 from completing it).
func TestContentMD5(t *testing.T) {
	d := newDoor(t, doorOptions{gateway: gateway.Config{BufferBytes: 1024}})
	for _, size := range []int{10, 4096} {
		body := bytes.Repeat([]byte("m"), size)
		wrong := md5.Sum([]byte("something else"))
		right := md5.Sum(body)
		for _, tt := range []struct {
			name string
			sum  []byte
			ok   bool
		}{{"wrong", wrong[:], false}, {"right", right[:], true}} {
			key := tt.name + strings.Repeat("x", size%7)
			req, _ := http.NewRequest(http.MethodPut, d.url+"/"+d.bucket+"/"+key, bytes.NewReader(body))
			req.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString(tt.sum))
			req.Header.Set("X-Amz-Meta-Fence-Token", "2")
			resp := d.rawRequest(t, writerKey, req, body)
			_, _, stored := d.stored(t, key)
			if tt.ok {
				if resp.StatusCode != http.StatusOK || !stored {
					t.Errorf("%d bytes, right MD5: %d, stored %v", size, resp.StatusCode, stored)
				}
				continue
			}
			e := readS3Error(t, resp)
			if resp.StatusCode/100 == 2 || stored {
				t.Errorf("%d bytes, wrong MD5: %d %s, stored %v; want a refusal and nothing stored", size, resp.StatusCode, e.Code, stored)
			}
			if e.Code != "BadDigest" {
				t.Errorf("%d bytes, wrong MD5: code %s; want BadDigest", size, e.Code)
			}
		}
	}
}

// TestErrorDocument: the XML error names the code, a message, the
// resource and the request id, which X-Amz-Request-Id repeats.
func TestErrorDocument(t *testing.T) {
	d := newDoor(t, doorOptions{})
	if _, err := d.put(t, d.client(writerKey), "k", 8, "x"); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPut, d.url+"/"+d.bucket+"/k", strings.NewReader("y"))
	req.Header.Set("X-Amz-Meta-Fence-Token", "7")
	resp := d.rawRequest(t, writerKey, req, []byte("y"))
	e := readS3Error(t, resp)
	if resp.StatusCode != 409 || e.Code != "StaleFenceToken" || e.HighWaterMark != "8" || e.Resource != "/"+d.bucket+"/k" ||
		e.RequestID == "" || e.RequestID != resp.Header.Get("X-Amz-Request-Id") || !strings.Contains(e.Message, "high-water mark is 8") {
		t.Fatalf("got %d %+v (request id header %q)", resp.StatusCode, e, resp.Header.Get("X-Amz-Request-Id"))
	}
}

// TestPayloadHashMismatch: a body that does not hash to its signed
// x-amz-content-sha256 is refused XAmzContentSHA256Mismatch, buffered or
// streamed, and nothing is stored; its mark may be raised (the fence
// check precedes the body's end), but no version is written.
func TestPayloadHashMismatch(t *testing.T) {
	d := newDoor(t, doorOptions{gateway: gateway.Config{BufferBytes: 1024}})
	for _, size := range []int{10, 4096} {
		body := bytes.Repeat([]byte("p"), size)
		signed := bytes.Repeat([]byte("q"), size)
		key := "hash" + strings.Repeat("x", size%7)
		req, _ := http.NewRequest(http.MethodPut, d.url+"/"+d.bucket+"/"+key, bytes.NewReader(body))
		req.Header.Set("X-Amz-Meta-Fence-Token", "2")
		signRequest(t, req, writerKey, secretOf+writerKey, signed)
		resp, err := d.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		e := readS3Error(t, resp)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || e.Code != "XAmzContentSHA256Mismatch" {
			t.Errorf("%d bytes: %d %s; want 400 XAmzContentSHA256Mismatch", size, resp.StatusCode, e.Code)
		}
		if _, _, ok := d.stored(t, key); ok {
			t.Errorf("%d bytes: stored", size)
		}
	}
}

// TestStalledUpload: a client that stops sending its body is cut off
// after the gateway's TransferChunkTimeout, and nothing is stored.
func TestStalledUpload(t *testing.T) {
	d := newDoor(t, doorOptions{gateway: gateway.Config{TransferChunkTimeout: 300 * time.Millisecond}})
	pr, pw := io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequest(http.MethodPut, d.url+"/"+d.bucket+"/stalled", pr)
	req.ContentLength = 10
	req.Header.Set("X-Amz-Meta-Fence-Token", "2")
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := signer.SignHTTP(context.Background(), aws.Credentials{AccessKeyID: writerKey, SecretAccessKey: secretOf + writerKey}, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = pw.Write([]byte("12345")) }() // half the body, then nothing
	resp, err := d.srv.Client().Do(req)
	if err == nil {
		defer resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			t.Fatalf("a stalled upload got %d", resp.StatusCode)
		}
	}
	if _, _, ok := d.stored(t, "stalled"); ok {
		t.Fatalf("a stalled upload was stored")
	}
}
