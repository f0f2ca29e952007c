package sigv4_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"fencegate/s3api/sigv4"
)

// TestEmptyBodyVerifiedByVerify: a body of zero bytes has no last byte
// for Result.Body to withhold, and a consumer that reads exactly its
// length reads nothing, so the body's checks must run in Verify itself.
// Each bad empty body is refused by Verify, before any Read of
// Result.Body; a good one is accepted with a Body at EOF.
func TestEmptyBodyVerifiedByVerify(t *testing.T) {
	v, err := sigv4.New(sigv4.Config{Keys: keys{testAccessKey: testSecret}, Region: testRegion})
	if err != nil {
		t.Fatal(err)
	}
	const base = "http://gateway.example"
	tests := []struct {
		name     string
		req      func(t *testing.T) *http.Request
		wantCode string // "" accepts
	}{
		{"payload hash of the empty body", func(t *testing.T) *http.Request {
			return request{target: "/bucket/key"}.build(t, base)
		}, ""},
		{"payload hash of other bytes", func(t *testing.T) *http.Request {
			return request{target: "/bucket/key", payloadHash: hexSHA256([]byte("other"))}.build(t, base)
		}, "XAmzContentSHA256Mismatch"},
		{"x-amz-checksum-crc32 of other bytes", func(t *testing.T) *http.Request {
			return request{target: "/bucket/key", payloadHash: sigv4.UnsignedPayload, header: http.Header{"X-Amz-Checksum-Crc32": {crc32Base64([]byte("other"))}}}.build(t, base)
		}, "BadDigest"},
		{"aws-chunked, signed chunks", func(t *testing.T) *http.Request {
			return chunked{payload: []byte{}, chunkSize: 1024, decodedLen: 0}.build(t, base, nil)
		}, ""},
		{"aws-chunked, bytes after the last chunk", func(t *testing.T) *http.Request {
			return chunked{payload: []byte{}, chunkSize: 1024}.build(t, base, func(b []byte) []byte { return append(b, "smuggled"...) })
		}, "IncompleteBody"},
		{"aws-chunked, last chunk signature tampered", func(t *testing.T) *http.Request {
			return chunked{payload: []byte{}, chunkSize: 1024}.build(t, base, func(b []byte) []byte {
				i := bytes.Index(b, []byte("chunk-signature=")) + len("chunk-signature=")
				b[i] ^= 1 // a hex digit to another
				return b
			})
		}, "SignatureDoesNotMatch"},
		{"signed trailer of other bytes", func(t *testing.T) *http.Request {
			return minioTrailer(t, base, []byte{}, crc32Base64([]byte("other")), true, nil)
		}, "BadDigest"},
		{"unsigned trailer missing", func(t *testing.T) *http.Request {
			return minioTrailer(t, base, []byte{}, crc32Base64(nil), false, func(b []byte) []byte {
				return b[:bytes.Index(b, []byte("x-amz-checksum-crc32:"))]
			})
		}, "MalformedTrailerError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req(t)
			res, err := v.Verify(context.Background(), req)
			if tt.wantCode == "" {
				if err != nil {
					t.Fatalf("Verify = %v; want it accepted", err)
				}
				if n, err := res.Body.Read(make([]byte, 1)); n != 0 || err != io.EOF {
					t.Fatalf("Body.Read = %d, %v; want 0, io.EOF", n, err)
				}
				return
			}
			var refusal *sigv4.Error
			if !errors.As(err, &refusal) || refusal.Code != tt.wantCode {
				t.Fatalf("Verify = %v, %v; want %s from Verify itself, before the body is read", res, err, tt.wantCode)
			}
		})
	}
}
