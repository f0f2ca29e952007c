package sigv4_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	miniosigner "github.com/minio/minio-go/v7/pkg/signer"
)

// The helpers below build requests signed by the SDK's and minio-go's
// signers (never by this package), then let a test tamper with them.

// newSigner returns a fresh SDK signer: a shared one would cache the key
// derived from the first secret it saw for an access key id and sign with it
// whatever secret it is given later the same day.
func newSigner() *v4.Signer {
	return v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
}

func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func crc32Base64(b []byte) string {
	h := crc32.NewIEEE()
	h.Write(b)
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// request describes a request to sign with the SDK's v4 signer.
type request struct {
	method      string
	target      string // path and query, as sent on the wire
	header      http.Header
	body        []byte
	payloadHash string // x-amz-content-sha256; "" means the body's hex SHA-256
	at          time.Time
	accessKey   string
	secret      string
	region      string
}

func (r request) build(t *testing.T, base string) *http.Request {
	t.Helper()
	if r.method == "" {
		r.method = http.MethodPut
	}
	req, err := http.NewRequest(r.method, base+r.target, bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if r.body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	hash := r.payloadHash
	if hash == "" {
		hash = hexSHA256(r.body)
	}
	req.Header.Set("X-Amz-Content-Sha256", hash)
	if r.at.IsZero() {
		r.at = time.Now()
	}
	if r.accessKey == "" {
		r.accessKey = testAccessKey
	}
	if r.secret == "" {
		r.secret = testSecret
	}
	if r.region == "" {
		r.region = testRegion
	}
	creds := aws.Credentials{AccessKeyID: r.accessKey, SecretAccessKey: r.secret}
	if err := newSigner().SignHTTP(context.Background(), creds, req, hash, "s3", r.region, r.at); err != nil {
		t.Fatal(err)
	}
	return req
}

// presign returns a URL presigned by the SDK's v4 signer.
func presign(t *testing.T, base, method, target string, expires time.Duration, at time.Time) string {
	t.Helper()
	sep := "?"
	if strings.Contains(target, "?") {
		sep = "&"
	}
	req, err := http.NewRequest(method, base+target+sep+"X-Amz-Expires="+strconv.Itoa(int(expires/time.Second)), nil)
	if err != nil {
		t.Fatal(err)
	}
	u, _, err := newSigner().PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: testAccessKey, SecretAccessKey: testSecret}, req, "UNSIGNED-PAYLOAD", "s3", testRegion, at)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// chunked describes an aws-chunked STREAMING-AWS4-HMAC-SHA256-PAYLOAD
// request: the seed signature from the SDK's v4 signer, each chunk
// signature from the SDK's v4.StreamSigner.
type chunked struct {
	payload    []byte
	chunkSize  int
	decodedLen int64 // x-amz-decoded-content-length; 0 means len(payload)
	at         time.Time
}

func (c chunked) build(t *testing.T, base string, tamper func([]byte) []byte) *http.Request {
	t.Helper()
	if c.at.IsZero() {
		c.at = time.Now()
	}
	decoded := c.decodedLen
	if decoded == 0 {
		decoded = int64(len(c.payload))
	}
	creds := aws.Credentials{AccessKeyID: testAccessKey, SecretAccessKey: testSecret}
	// The seed request: sign the headers first, then build the body with
	// the chained chunk signatures.
	seed, _ := http.NewRequest(http.MethodPut, base+"/bucket/chunked", nil)
	seed.Header.Set("Content-Encoding", "aws-chunked")
	seed.Header.Set("X-Amz-Decoded-Content-Length", strconv.FormatInt(decoded, 10))
	seed.Header.Set("X-Amz-Content-Sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
	if err := newSigner().SignHTTP(context.Background(), creds, seed, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "s3", testRegion, c.at); err != nil {
		t.Fatal(err)
	}
	auth := seed.Header.Get("Authorization")
	seedSig, _ := hex.DecodeString(auth[strings.Index(auth, "Signature=")+len("Signature="):])
	stream := v4.NewStreamSigner(creds, "s3", testRegion, seedSig)
	var body bytes.Buffer
	rest := c.payload
	for {
		n := min(c.chunkSize, len(rest))
		sig, err := stream.GetSignature(context.Background(), nil, rest[:n], c.at)
		if err != nil {
			t.Fatal(err)
		}
		body.WriteString(strconv.FormatInt(int64(n), 16) + ";chunk-signature=" + hex.EncodeToString(sig) + "\r\n")
		body.Write(rest[:n])
		body.WriteString("\r\n")
		rest = rest[n:]
		if n == 0 {
			break
		}
	}
	b := body.Bytes()
	if tamper != nil {
		b = tamper(b)
	}
	req, _ := http.NewRequest(http.MethodPut, seed.URL.String(), bytes.NewReader(b))
	req.Header = seed.Header
	return req
}

// sha256Hasher is what minio-go's streaming signer hashes with.
type sha256Hasher struct{ hash.Hash }

func (sha256Hasher) Close() {}

// minioTrailer builds a request signed by minio-go's streaming signer: with
// signed=true STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER, else
// STREAMING-UNSIGNED-PAYLOAD-TRAILER, carrying trailerValue as
// x-amz-checksum-crc32 (the signature covers whatever value is given).
func minioTrailer(t *testing.T, base string, payload []byte, trailerValue string, signed bool, tamper func([]byte) []byte) *http.Request {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, base+"/bucket/trailer", bytes.NewReader(payload))
	req.Trailer = http.Header{"x-amz-checksum-crc32": {trailerValue}}
	if signed {
		req = miniosigner.StreamingSignV4(req, testAccessKey, testSecret, "", testRegion, int64(len(payload)), time.Now().UTC(), sha256Hasher{sha256.New()})
	} else {
		req.Header.Set("X-Amz-Content-Sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
		req = miniosigner.SignV4Trailer(*req, testAccessKey, testSecret, "", testRegion, req.Trailer)
	}
	b, err := io.ReadAll(req.Body)
	if err != nil {
		t.Fatal(err)
	}
	if tamper != nil {
		b = tamper(b)
	}
	out, _ := http.NewRequest(http.MethodPut, req.URL.String(), bytes.NewReader(b))
	out.Header = req.Header
	return out
}
