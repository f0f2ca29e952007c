package s3

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/smithy-go/encoding/httpbinding"

	"fencegate/api"
	"fencegate/internal/s3checksum"
)

// A part with a checksum. An upload created with x-amz-checksum-algorithm
// wants each part's checksum, which the store keeps and combines into the
// object's at completion. The gateway has no checksum to send before it has
// streamed the part (a client over TLS sends its own in a trailer, after the
// body), and the SDK computes one only for a seekable body or over TLS; the
// store is often reached over plain HTTP. So the part goes as S3's
// aws-chunked body with an unsigned payload and a trailer
// (STREAMING-UNSIGNED-PAYLOAD-TRAILER), as the SDKs send it over TLS: the
// part's bytes in chunks, then the checksum computed as they streamed.
// The checksum is sent only once the body's last Read reported io.EOF, which
// for the door's bodies means verified against the client's own checksum:
// a body that fails sends an error instead, the request is cut short, and
// the store keeps no part.

// streamingUnsignedTrailer is the payload hash of an unsigned aws-chunked
// body with a trailer.
const streamingUnsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"

// trailerChunkSize is the size of each chunk of a part's aws-chunked body
// but the last, as the SDK frames its own (64 KiB).
const trailerChunkSize = 64 << 10

// trailingChecksumBody is the aws-chunked encoding of size bytes of body,
// unsigned, with the trailer header: base64 of sum over those bytes.
type trailingChecksumBody struct {
	body      io.Reader
	left      int64 // bytes of body not yet read
	chunkLeft int64 // bytes of the current chunk not yet read
	sum       hash.Hash
	header    string // "x-amz-checksum-crc32"
	pending   []byte // framing to hand out before anything else
	done      bool   // the trailer is in pending: nothing after it
}

func newTrailingChecksumBody(body io.Reader, size int64, algorithm string, sum hash.Hash) *trailingChecksumBody {
	return &trailingChecksumBody{body: body, left: size, sum: sum, header: "x-amz-checksum-" + strings.ToLower(algorithm)}
}

// encodedLength is the length of the aws-chunked body of size bytes with
// a trailer of sum's checksum under header: each chunk is its size in hex,
// CRLF, its bytes, CRLF; then "0" CRLF, the trailer line, CRLF, CRLF.
func encodedLength(size int64, header string, sum hash.Hash) int64 {
	chunk := func(n int64) int64 { return int64(len(strconv.FormatInt(n, 16))) + 2 + n + 2 }
	n := size / trailerChunkSize * chunk(trailerChunkSize)
	if rest := size % trailerChunkSize; rest > 0 {
		n += chunk(rest)
	}
	trailer := len(header) + 1 + base64.StdEncoding.EncodedLen(sum.Size())
	return n + 3 + int64(trailer) + 4
}

func (b *trailingChecksumBody) Read(p []byte) (int, error) {
	for len(b.pending) == 0 {
		switch {
		case b.done:
			return 0, io.EOF
		case b.chunkLeft > 0:
			n, err := b.body.Read(p[:min(int64(len(p)), b.chunkLeft)])
			b.sum.Write(p[:n])
			b.chunkLeft -= int64(n)
			b.left -= int64(n)
			if b.chunkLeft == 0 {
				b.pending = append(b.pending[:0], "\r\n"...)
			}
			if errors.Is(err, io.EOF) && b.chunkLeft > 0 {
				err = io.ErrUnexpectedEOF
			} else if errors.Is(err, io.EOF) {
				err = nil
			}
			if n > 0 || err != nil {
				return n, err
			}
		case b.left > 0:
			b.chunkLeft = min(b.left, trailerChunkSize)
			b.pending = strconv.AppendInt(b.pending[:0], b.chunkLeft, 16)
			b.pending = append(b.pending, "\r\n"...)
		default:
			// Every byte is read: the body's end (io.EOF, after its
			// checks) decides whether the checksum goes out.
			var extra [1]byte
			n, err := b.body.Read(extra[:])
			for n == 0 && err == nil {
				n, err = b.body.Read(extra[:])
			}
			if n > 0 {
				return 0, errors.New("the part's body is longer than its size")
			}
			if !errors.Is(err, io.EOF) {
				return 0, err
			}
			b.pending = append(b.pending[:0], "0\r\n"...)
			b.pending = append(b.pending, b.header...)
			b.pending = append(b.pending, ':')
			b.pending = base64.StdEncoding.AppendEncode(b.pending, b.sum.Sum(nil))
			b.pending = append(b.pending, "\r\n\r\n"...)
			b.done = true
		}
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

// uploadPart is Client.UploadPart of a part with a checksum on the signed
// path (see above); see put for sdk.
func (s *signedHTTP) uploadPart(ctx context.Context, in api.UploadPartInput) (etag string, sdk bool, err error) {
	ep := s.endpoint(ctx, in.Path.Bucket)
	if ep.sdk {
		return "", true, nil
	}
	alg, ok := s3checksum.Lookup(in.ChecksumAlgorithm)
	if !ok {
		return "", false, fmt.Errorf("%w: unknown checksum algorithm %q", api.ErrInvalidRequest, in.ChecksumAlgorithm)
	}
	sum := alg.New()
	body := newTrailingChecksumBody(in.Body, in.Size, in.ChecksumAlgorithm, sum)
	query := "partNumber=" + strconv.FormatInt(int64(in.Number), 10) + "&uploadId=" + httpbinding.EscapePath(in.UploadID, true) + "&x-id=UploadPart"
	req, err := s.newRequest(ctx, ep, http.MethodPut, in.Path.Key, query, body, encodedLength(in.Size, body.header, sum), func(h http.Header) {
		h["Content-Encoding"] = []string{"aws-chunked"}
		h["X-Amz-Content-Sha256"] = []string{streamingUnsignedTrailer}
		h["X-Amz-Decoded-Content-Length"] = []string{strconv.FormatInt(in.Size, 10)}
		h["X-Amz-Trailer"] = []string{body.header}
		setCustomerKeyHeaders(h, in.Customer)
		if in.Size >= continueThreshold {
			h["Expect"] = []string{"100-continue"}
		}
	})
	if err != nil {
		return "", false, err
	}
	h, err := s.send(req, "UploadPart")
	if err != nil {
		return "", false, err
	}
	return h.Get("ETag"), false, nil
}
