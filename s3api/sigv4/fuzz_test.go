package sigv4

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fencegate/internal/s3checksum"
	"io"
	"testing"
)

// FuzzChunkedBody feeds arbitrary aws-chunked bodies to the decoder, signed
// and unsigned with a checksum trailer: it must never panic, never yield
// more than x-amz-decoded-content-length bytes, and reach io.EOF only with
// exactly that many.
func FuzzChunkedBody(f *testing.F) {
	f.Add([]byte("5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n"), false, int64(5))
	f.Add([]byte("5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\n\r\n\r\n"), false, int64(5))
	f.Add([]byte("5;chunk-signature="+string(bytes.Repeat([]byte("a"), 64))+"\r\nhello\r\n0;chunk-signature="+string(bytes.Repeat([]byte("b"), 64))+"\r\nx-amz-checksum-crc32:NhCmhg==\r\nx-amz-trailer-signature:"+string(bytes.Repeat([]byte("c"), 64))+"\r\n\r\n"), true, int64(5))
	f.Add([]byte("fffffffffffffff\r\n"), false, int64(1<<62))
	f.Fuzz(func(t *testing.T, body []byte, signed bool, decoded int64) {
		if decoded < 0 {
			decoded = -decoded
		}
		c := &chunkedBody{
			br:        bufio.NewReaderSize(bytes.NewReader(body), chunkReadBuffer),
			signed:    signed,
			trailer:   true,
			remaining: decoded,
			signing:   chunkSigning{key: signingKey("secret", "20261203", "us-east-1"), amzDate: "20261203T000000Z", scope: "20261203/us-east-1/s3/aws4_request", seed: "seed"},
			previous:  "seed",
			checksum:  newChecksum(s3checksum.Algorithms[0]),
		}
		if signed {
			c.chunkSHA256 = sha256.New()
		}
		n, err := io.Copy(io.Discard, &holdback{r: c})
		if n > decoded {
			t.Fatalf("yielded %d bytes; decoded length %d", n, decoded)
		}
		if err == nil && n != decoded {
			t.Fatalf("EOF after %d bytes; decoded length %d", n, decoded)
		}
	})
}
