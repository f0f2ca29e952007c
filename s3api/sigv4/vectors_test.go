package sigv4

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fencegate/internal/s3checksum"
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/minio/crc64nvme"
)

type oneKey struct{ id, secret string }

func (k oneKey) SecretKey(_ context.Context, id string) (string, string, error) {
	if id != k.id {
		return "", "", ErrUnknownAccessKey
	}
	return k.secret, "example", nil
}

// TestAWSChunkedExample runs the whole verifier on AWS's published example
// of a STREAMING-AWS4-HMAC-SHA256-PAYLOAD upload ("Signature calculations
// for the Authorization header: transferring payload in multiple chunks",
// S3 API reference): 66560 bytes of 'a' in chunks of 65536 and 1024.
func TestAWSChunkedExample(t *testing.T) {
	const (
		seed   = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
		chunk1 = "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648"
		chunk2 = "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497"
		final  = "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"
	)
	payload := bytes.Repeat([]byte("a"), 66560)
	var body bytes.Buffer
	body.WriteString("10000;chunk-signature=" + chunk1 + "\r\n")
	body.Write(payload[:65536])
	body.WriteString("\r\n400;chunk-signature=" + chunk2 + "\r\n")
	body.Write(payload[65536:])
	body.WriteString("\r\n0;chunk-signature=" + final + "\r\n\r\n")
	if body.Len() != 66824 {
		t.Fatalf("example body is %d bytes; AWS says 66824", body.Len())
	}
	build := func(b []byte) *Result {
		r := httptest.NewRequest("PUT", "http://s3.amazonaws.com/examplebucket/chunkObject.txt", bytes.NewReader(b))
		r.Header.Set("X-Amz-Date", "20130524T000000Z")
		r.Header.Set("X-Amz-Storage-Class", "REDUCED_REDUNDANCY")
		r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,Signature="+seed)
		r.Header.Set("X-Amz-Content-Sha256", StreamingSignedPayload)
		r.Header.Set("Content-Encoding", "aws-chunked")
		r.Header.Set("X-Amz-Decoded-Content-Length", "66560")
		r.Header.Set("Content-Length", strconv.Itoa(len(b)))
		v, _ := New(Config{
			Keys:   oneKey{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
			Region: "us-east-1",
			Now:    func() time.Time { return time.Date(2013, 5, 24, 0, 5, 0, 0, time.UTC) },
		})
		res, err := v.Verify(context.Background(), r)
		if err != nil {
			t.Fatalf("Verify(AWS example) = %v; want accepted", err)
		}
		return res
	}
	got, err := io.ReadAll(build(body.Bytes()).Body)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("AWS example body: %d bytes, %v; want the 66560 bytes", len(got), err)
	}
	// The same example with the second chunk's signature from the first.
	bad := bytes.Replace(body.Bytes(), []byte(chunk2), []byte(chunk1), 1)
	got, err = io.ReadAll(build(bad).Body)
	if !errors.Is(err, ErrSignatureDoesNotMatch) || len(got) >= len(payload) {
		t.Fatalf("AWS example with a wrong chunk signature: %d bytes, %v; want SignatureDoesNotMatch short of the body", len(got), err)
	}
}

// TestChunkSignatureMatchesSDK: the streaming chunk signature computed here
// equals the SDK's v4.StreamSigner's for the same chain.
func TestChunkSignatureMatchesSDK(t *testing.T) {
	at := time.Date(2026, 12, 3, 20, 0, 0, 0, time.UTC)
	seed := strings.Repeat("ab", 32)
	seedBytes, _ := hex.DecodeString(seed)
	cs := chunkSigning{
		key:     signingKey("secret", at.Format(scopeFormat), "eu-west-1"),
		amzDate: at.Format(amzDateFormat),
		scope:   at.Format(scopeFormat) + "/eu-west-1/s3/aws4_request",
	}
	sdk := v4.NewStreamSigner(aws.Credentials{AccessKeyID: "AK", SecretAccessKey: "secret"}, "s3", "eu-west-1", seedBytes)
	previous := seed
	for i, chunk := range [][]byte{bytes.Repeat([]byte{1}, 8192), []byte("x"), nil} {
		want, err := sdk.GetSignature(context.Background(), nil, chunk, at)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		h.Write(chunk)
		got := cs.chunkSignature(previous, h.Sum(nil))
		if got != hex.EncodeToString(want) {
			t.Fatalf("chunk %d: signature %s; the SDK's StreamSigner says %x", i, got, want)
		}
		previous = got
	}
}

// TestCRC64NVME: the CRC64-NVME implementation gives the algorithm's check
// value (CRC of "123456789"), the value AWS documents for it.
func TestCRC64NVME(t *testing.T) {
	h := crc64nvme.New()
	h.Write([]byte("123456789"))
	if got := h.Sum64(); got != 0xae8b14860a799888 {
		t.Fatalf("crc64nvme(123456789) = %#x; want 0xae8b14860a799888", got)
	}
	crc64, _ := s3checksum.Lookup("crc64nvme")
	c := newChecksum(crc64)
	c.hash.Write([]byte("123456789"))
	if got := hex.EncodeToString(c.hash.Sum(nil)); got != "ae8b14860a799888" {
		t.Fatalf("x-amz-checksum-crc64nvme bytes %s; want big-endian ae8b14860a799888", got)
	}
}

// failAtEOF yields data, then fails instead of io.EOF, as a verifying
// reader does when a check fails.
type failAtEOF struct {
	r   io.Reader
	err error
}

func (f *failAtEOF) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

// TestHoldback: through holdback, a good stream arrives whole whatever the
// read sizes, and a failing one never arrives whole.
func TestHoldback(t *testing.T) {
	data := []byte("the body of the object")
	readers := map[string]func(io.Reader) io.Reader{
		"plain":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
		"eof":      iotest.DataErrReader,
	}
	for name, wrap := range readers {
		for _, bufSize := range []int{1, 2, 3, 64} {
			t.Run(name+"/"+strconv.Itoa(bufSize), func(t *testing.T) {
				read := func(r io.Reader) ([]byte, error) {
					var out []byte
					buf := make([]byte, bufSize)
					for {
						n, err := r.Read(buf)
						out = append(out, buf[:n]...)
						if err != nil {
							return out, err
						}
					}
				}
				got, err := read(&holdback{r: wrap(bytes.NewReader(data))})
				if err != io.EOF || !bytes.Equal(got, data) {
					t.Errorf("good stream: %q, %v; want %q, EOF", got, err, data)
				}
				got, err = read(&holdback{r: &failAtEOF{r: wrap(bytes.NewReader(data)), err: ErrBadDigest}})
				if !errors.Is(err, ErrBadDigest) || len(got) >= len(data) {
					t.Errorf("failing stream: %d of %d bytes, %v; want BadDigest short of the data", len(got), len(data), err)
				}
			})
		}
	}
}
