package sigv4

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"

	"fencegate/internal/s3checksum"
	"fencegate/internal/sigv4core"
)

const (
	// maxChunkHeaderLine bounds an aws-chunked chunk header or trailer line
	// ("<hex size>;chunk-signature=<64 hex>" is under 100 bytes). A longer
	// line is refused without buffering it.
	maxChunkHeaderLine = 4 << 10
	// maxTrailerLines bounds the trailer section: the checksum, the trailer
	// signature and the blank lines clients put around them.
	maxTrailerLines = 8
	// chunkReadBuffer is the read buffer of the aws-chunked decoder; chunk
	// data streams through it, however large the chunk.
	chunkReadBuffer = 32 << 10
)

// checksum is one x-amz-checksum-<algorithm> being computed over the body.
type checksum struct {
	algorithm string // "crc32", ...
	hash      hash.Hash
	want      string // base64, from the header; from the trailer if empty
	verified  bool   // the body matched want
}

func newChecksum(a s3checksum.Algorithm) *checksum {
	return &checksum{algorithm: strings.ToLower(a.Name), hash: a.New()}
}

func (c *checksum) header() string { return "x-amz-checksum-" + c.algorithm }

// validValue reports whether v is base64 of a digest of the right size.
func (c *checksum) validValue(v string) bool {
	b, err := base64.StdEncoding.DecodeString(v)
	return err == nil && len(b) == c.hash.Size()
}

func (c *checksum) verify() error {
	got := base64.StdEncoding.EncodeToString(c.hash.Sum(nil))
	if got != c.want {
		return newError(ErrBadDigest, "The "+c.header()+" you specified did not match the calculated checksum.")
	}
	c.verified = true
	return nil
}

// notChecksumValue reports whether the x-amz-checksum-<name> header names
// no checksum value but says something about checksums: the type of an
// upload's, the mode of a read, the algorithm of an upload.
func notChecksumValue(name string) bool {
	return strings.EqualFold(name, "type") || strings.EqualFold(name, "mode") || strings.EqualFold(name, "algorithm")
}

// headerChecksum finds the one x-amz-checksum-<algorithm> header of r, if any.
func headerChecksum(r *http.Request) (*checksum, error) {
	var found *checksum
	const prefix = "x-amz-checksum-"
	for k, vs := range r.Header {
		lk := k
		if hasNonASCII(k) {
			lk = strings.ToLower(k) // as long as the prefix, perhaps
		}
		if len(lk) <= len(prefix) || !strings.EqualFold(lk[:len(prefix)], prefix) {
			continue // without lowering every header's name
		}
		name := lk[len(prefix):]
		if notChecksumValue(name) {
			continue
		}
		alg, known := s3checksum.Lookup(name)
		if !known {
			// Ignored, the body would be stored unchecked although its
			// client asked for a check.
			return nil, newError(ErrInvalidRequest, "x-amz-checksum-"+strings.ToLower(name)+" names no checksum algorithm: S3's are "+s3checksum.Names()+".")
		}
		if found != nil || len(vs) != 1 {
			return nil, newError(ErrInvalidRequest, "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.")
		}
		found = newChecksum(alg)
		if !found.validValue(vs[0]) {
			return nil, newError(ErrInvalidRequest, "Value for "+found.header()+" header is invalid.")
		}
		found.want = vs[0]
	}
	return found, nil
}

// chunkSigning is what the chunk and trailer signatures of a
// STREAMING-AWS4-HMAC-SHA256-* body are computed from. Each signature is
// HMAC-SHA256(key, string to sign), with the string to sign chaining the
// previous signature (the seed is the request's own signature):
//
//	AWS4-HMAC-SHA256-PAYLOAD\n<amz date>\n<scope>\n<previous>\n<sha256("")>\n<sha256(chunk data)>
//	AWS4-HMAC-SHA256-TRAILER\n<amz date>\n<scope>\n<previous>\n<sha256(trailer lines)>
//
// The SDK's v4.StreamSigner computes the first form, but only from the whole
// chunk held in memory ([]byte); here the chunk's hash is computed while it
// streams, so the string to sign is built here (and tested against the
// StreamSigner's output).
type chunkSigning struct {
	key       []byte
	amzDate   string
	scope     string
	seed      string
	algorithm string // the x-amz-content-sha256 value
}

func (s *chunkSigning) chunkSignature(previous string, chunkSHA256 []byte) string {
	return hex.EncodeToString(sigv4core.HMACSHA256(s.key, "AWS4-HMAC-SHA256-PAYLOAD\n"+s.amzDate+"\n"+s.scope+"\n"+previous+"\n"+emptySHA256+"\n"+hex.EncodeToString(chunkSHA256)))
}

func (s *chunkSigning) trailerSignature(previous string, trailer []byte) string {
	sum := sha256.Sum256(trailer)
	return hex.EncodeToString(sigv4core.HMACSHA256(s.key, "AWS4-HMAC-SHA256-TRAILER\n"+s.amzDate+"\n"+s.scope+"\n"+previous+"\n"+hex.EncodeToString(sum[:])))
}

// buildBody sets res.Body, res.DecodedContentLength and
// res.ChecksumAlgorithm for the payload mode the request declared.
func buildBody(r *http.Request, res *Result, payloadHash string, signing chunkSigning) error {
	body := r.Body
	if body == nil {
		body = http.NoBody
	}
	sum, err := headerChecksum(r)
	if err != nil {
		return err
	}
	trailerName := strings.ToLower(strings.TrimSpace(r.Header.Get("X-Amz-Trailer")))

	switch payloadHash {
	case StreamingSignedPayload, StreamingSignedTrailer, StreamingUnsignedTrailer:
	default:
		if trailerName != "" {
			return newError(ErrInvalidRequest, "x-amz-trailer needs a STREAMING-*-TRAILER x-amz-content-sha256")
		}
		p := &plainBody{r: body, checksum: sum, remaining: r.ContentLength}
		if payloadHash != UnsignedPayload {
			p.sha256 = sha256.New()
			p.wantSHA256 = r.Header.Get("X-Amz-Content-Sha256")
			p.wantSHA256 = strings.ToLower(p.wantSHA256)
		}
		res.Body = &holdback{r: p}
		res.DecodedContentLength = r.ContentLength
		if sum != nil {
			res.ChecksumAlgorithm, res.checksum = sum.algorithm, sum
		}
		return nil
	}

	decoded, err := strconv.ParseInt(r.Header.Get("X-Amz-Decoded-Content-Length"), 10, 64)
	if err != nil || decoded < 0 {
		return newError(ErrMissingContentLength, "An aws-chunked body needs a valid x-amz-decoded-content-length header.")
	}
	if r.ContentLength >= 0 && decoded > r.ContentLength {
		return newError(ErrIncompleteBody, "x-amz-decoded-content-length is larger than the aws-chunked body's Content-Length.")
	}
	c := &chunkedBody{
		br:        bufio.NewReaderSize(body, chunkReadBuffer),
		signed:    payloadHash != StreamingUnsignedTrailer,
		remaining: decoded,
		signing:   signing,
		previous:  signing.seed,
		checksum:  sum,
	}
	if payloadHash != StreamingSignedPayload {
		name, ok := strings.CutPrefix(trailerName, "x-amz-checksum-")
		alg, known := s3checksum.Lookup(name)
		if !ok || !known || strings.Contains(trailerName, ",") {
			return newError(ErrInvalidRequest, "x-amz-trailer must name one x-amz-checksum-<algorithm>, of "+s3checksum.Names()+".")
		}
		if sum != nil {
			return newError(ErrInvalidRequest, "Expecting a single x-amz-checksum- header or trailer, not both.")
		}
		c.checksum = newChecksum(alg)
		c.trailer = true
	} else if trailerName != "" {
		return newError(ErrInvalidRequest, "x-amz-trailer needs a STREAMING-*-TRAILER x-amz-content-sha256")
	}
	if c.signed {
		c.chunkSHA256 = sha256.New()
	}
	res.Body = &holdback{r: c}
	res.DecodedContentLength = decoded
	if c.checksum != nil {
		res.ChecksumAlgorithm, res.checksum = c.checksum.algorithm, c.checksum
	}
	return nil
}

// plainBody verifies a body sent as is: its SHA-256 against
// x-amz-content-sha256 (unless UNSIGNED-PAYLOAD) and its x-amz-checksum-*
// header, at EOF. It returns io.EOF only when both match.
type plainBody struct {
	r          io.Reader
	remaining  int64 // Content-Length left, or negative if unknown
	sha256     hash.Hash
	wantSHA256 string
	checksum   *checksum
	err        error
}

func (p *plainBody) Read(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	n, err := p.r.Read(b)
	if n > 0 {
		if p.sha256 != nil {
			p.sha256.Write(b[:n])
		}
		if p.checksum != nil {
			p.checksum.hash.Write(b[:n])
		}
		if p.remaining >= 0 {
			p.remaining -= int64(n)
		}
	}
	switch {
	case err == io.EOF || (err == nil && p.remaining == 0):
		// The end: verify before handing over the last bytes.
		if p.remaining > 0 {
			p.err = ErrIncompleteBody
		} else {
			p.err = p.verify()
		}
		if p.err != nil {
			return 0, p.err
		}
		p.err = io.EOF
		return n, nil
	case err != nil:
		p.err = fmt.Errorf("%w: reading body: %w", ErrIncompleteBody, err)
		return 0, p.err
	}
	return n, nil
}

func (p *plainBody) verify() error {
	if p.sha256 != nil && hex.EncodeToString(p.sha256.Sum(nil)) != p.wantSHA256 {
		return ErrXAmzContentSHA256Mismatch
	}
	if p.checksum != nil {
		return p.checksum.verify()
	}
	return nil
}

// chunkedBody decodes and verifies an aws-chunked body:
//
//	<hex size>[;chunk-signature=<sig>]\r\n<data>\r\n ... 0[;chunk-signature=<sig>]\r\n<trailer>\r\n
//
// Chunk data streams through a fixed buffer; no allocation depends on a
// size the client sent.
type chunkedBody struct {
	br          *bufio.Reader
	signed      bool // chunk signatures present (STREAMING-AWS4-HMAC-SHA256-*)
	trailer     bool // a checksum trailer follows the last chunk
	remaining   int64
	signing     chunkSigning
	previous    string // the previous signature in the chain
	checksum    *checksum
	chunkSHA256 hash.Hash // signed only

	inChunk      bool
	chunkLeft    int64
	chunkWantSig string
	err          error
}

func (c *chunkedBody) fail(err error) (int, error) {
	if err == io.EOF {
		// Only the verified end of the body may be io.EOF.
		err = newError(ErrIncompleteBody, "The aws-chunked body ended early.")
	}
	c.err = err
	return 0, err
}

func (c *chunkedBody) Read(b []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	for {
		if c.inChunk && c.chunkLeft > 0 {
			if int64(len(b)) > c.chunkLeft {
				b = b[:c.chunkLeft]
			}
			n, err := c.br.Read(b)
			if n > 0 {
				c.chunkLeft -= int64(n)
				if c.chunkSHA256 != nil {
					c.chunkSHA256.Write(b[:n])
				}
				if c.checksum != nil {
					c.checksum.hash.Write(b[:n])
				}
			}
			if err == io.EOF {
				return c.fail(newError(ErrIncompleteBody, "The aws-chunked body ended inside a chunk."))
			}
			if err != nil {
				return c.fail(fmt.Errorf("%w: reading body: %w", ErrIncompleteBody, err))
			}
			return n, nil
		}
		if c.inChunk {
			// End of a data chunk: its CRLF, then its signature.
			line, err := c.line()
			if err != nil {
				return c.fail(err)
			}
			if len(line) != 0 {
				return c.fail(newError(ErrIncompleteBody, "An aws-chunked chunk is longer than its header says."))
			}
			if err := c.checkChunkSignature(); err != nil {
				return c.fail(err)
			}
			c.inChunk = false
		}
		size, sig, err := c.chunkHeader()
		if err != nil {
			return c.fail(err)
		}
		if size > c.remaining {
			return c.fail(newError(ErrIncompleteBody, "The aws-chunked body is longer than x-amz-decoded-content-length."))
		}
		c.remaining -= size
		c.chunkWantSig = sig
		if size > 0 {
			c.inChunk, c.chunkLeft = true, size
			continue
		}
		// The last chunk.
		if err := c.checkChunkSignature(); err != nil {
			return c.fail(err)
		}
		if c.remaining != 0 {
			return c.fail(newError(ErrIncompleteBody, "The aws-chunked body is shorter than x-amz-decoded-content-length."))
		}
		if c.trailer {
			err = c.readTrailer()
		} else {
			err = c.readFinalCRLF()
		}
		if err == nil {
			err = c.readEnd()
		}
		if err == nil && c.checksum != nil {
			err = c.checksum.verify()
		}
		if err != nil {
			return c.fail(err)
		}
		c.err = io.EOF
		return 0, io.EOF
	}
}

// line reads one line of at most maxChunkHeaderLine bytes, without its
// CRLF (or LF). io.EOF before any byte is returned as is.
func (c *chunkedBody) line() ([]byte, error) {
	line, err := c.br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull) || len(line) > maxChunkHeaderLine:
		return nil, newError(ErrInvalidRequest, "An aws-chunked header or trailer line is too long.")
	case err == io.EOF && len(line) == 0:
		return nil, io.EOF
	case err == io.EOF:
		return nil, newError(ErrIncompleteBody, "The aws-chunked body ended inside a line.")
	case err != nil:
		return nil, fmt.Errorf("%w: reading body: %w", ErrIncompleteBody, err)
	}
	line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
	return line, nil
}

// chunkHeader parses "<hex size>;chunk-signature=<sig>" (signed) or
// "<hex size>[;extension...]" (unsigned).
func (c *chunkedBody) chunkHeader() (size int64, signature string, err error) {
	line, err := c.line()
	if err == io.EOF {
		return 0, "", newError(ErrIncompleteBody, "The aws-chunked body ended before its last chunk.")
	}
	if err != nil {
		return 0, "", err
	}
	sizeText, ext, hasExt := bytes.Cut(line, []byte(";"))
	if len(sizeText) == 0 || len(sizeText) > 15 {
		return 0, "", newError(ErrIncompleteBody, "An aws-chunked chunk size is malformed.")
	}
	size, perr := strconv.ParseInt(string(sizeText), 16, 64)
	if perr != nil || size < 0 {
		return 0, "", newError(ErrIncompleteBody, "An aws-chunked chunk size is malformed.")
	}
	if !c.signed {
		return size, "", nil
	}
	sig, ok := bytes.CutPrefix(ext, []byte("chunk-signature="))
	if !hasExt || !ok || !isHexSignature(string(sig)) {
		return 0, "", newError(ErrSignatureDoesNotMatch, "An aws-chunked chunk has no valid chunk-signature.")
	}
	return size, string(sig), nil
}

func (c *chunkedBody) checkChunkSignature() error {
	if !c.signed {
		return nil
	}
	want := c.signing.chunkSignature(c.previous, c.chunkSHA256.Sum(nil))
	c.chunkSHA256.Reset()
	if !hmac.Equal([]byte(want), []byte(c.chunkWantSig)) {
		return newError(ErrSignatureDoesNotMatch, "An aws-chunked chunk signature does not match.")
	}
	c.previous = want
	return nil
}

// readFinalCRLF reads the CRLF that ends the empty last chunk of a body
// without trailer.
func (c *chunkedBody) readFinalCRLF() error {
	line, err := c.line()
	if err == io.EOF {
		return nil // some clients end right after the last chunk header
	}
	if err != nil {
		return err
	}
	if len(line) != 0 {
		return newError(ErrIncompleteBody, "Unexpected data after the last aws-chunked chunk.")
	}
	return nil
}

// readEnd checks that nothing but blank lines follows the last chunk
// (and its trailer): bytes there are covered by no chunk signature, no
// decoded length and no checksum, so a body that carries them is not the
// body the client signed.
func (c *chunkedBody) readEnd() error {
	for range maxTrailerLines {
		line, err := c.line()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if len(line) != 0 {
			break
		}
	}
	return newError(ErrIncompleteBody, "Unexpected data after the end of the aws-chunked body.")
}

// readTrailer reads the trailer section: the checksum line and, for signed
// trailers, "x-amz-trailer-signature:<sig>", with the blank lines clients
// put around them (AWS SDKs end lines with CRLF, minio-go ends the checksum
// line with LF and adds a blank line).
func (c *chunkedBody) readTrailer() error {
	var (
		gotChecksum bool
		signature   string
		canonical   []byte
	)
	complete := func() bool { return gotChecksum && (!c.signed || signature != "") }
	for range maxTrailerLines {
		line, err := c.line()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if len(line) == 0 {
			if complete() {
				break
			}
			continue
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return ErrMalformedTrailer
		}
		lname := strings.ToLower(strings.TrimSpace(string(name)))
		value = bytes.TrimSpace(value)
		switch {
		case lname == c.checksum.header() && !gotChecksum && signature == "":
			if !c.checksum.validValue(string(value)) {
				return newError(ErrInvalidRequest, "Value for "+c.checksum.header()+" trailing header is invalid.")
			}
			c.checksum.want = string(value)
			gotChecksum = true
			canonical = append(canonical, lname+":"...)
			canonical = append(canonical, value...)
			canonical = append(canonical, '\n')
		case lname == "x-amz-trailer-signature" && c.signed && gotChecksum && signature == "":
			signature = string(value)
		default:
			return newError(ErrMalformedTrailer, "Unexpected trailing header "+lname+".")
		}
	}
	if !complete() {
		return newError(ErrMalformedTrailer, "The trailer section is incomplete.")
	}
	if c.signed {
		want := c.signing.trailerSignature(c.previous, canonical)
		if !hmac.Equal([]byte(want), []byte(signature)) {
			return newError(ErrSignatureDoesNotMatch, "The trailer signature does not match.")
		}
	}
	return nil
}

// holdback passes on what r yields but always keeps the last byte back
// until r returns io.EOF, and drops it when r fails. The verifying readers
// above return io.EOF only after every check passed, so a consumer of a
// failed body never receives its last byte: a destination that counts
// Content-Length bytes cannot complete.
type holdback struct {
	r    io.Reader
	held byte
	has  bool
	one  [1]byte
	err  error
}

func (h *holdback) Read(p []byte) (int, error) {
	if h.err != nil {
		if h.err == io.EOF && h.has && len(p) > 0 {
			p[0], h.has = h.held, false
			return 1, io.EOF
		}
		return 0, h.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	buf, off := p, 0
	if h.has {
		if len(p) == 1 {
			buf = h.one[:]
		} else {
			p[0], off = h.held, 1
			buf = p[1:]
		}
	}
	n, err := h.r.Read(buf)
	if err != nil && err != io.EOF {
		h.err, h.has = err, false
		return 0, err
	}
	if len(p) == 1 && h.has {
		// One byte of room: hand over the held byte, hold the new one.
		if n == 1 {
			p[0], h.held = h.held, h.one[0]
			if err == io.EOF {
				h.err = io.EOF
			}
			return 1, nil
		}
		if err == io.EOF {
			p[0], h.has, h.err = h.held, false, io.EOF
			return 1, io.EOF
		}
		return 0, nil
	}
	total := off + n
	if err == io.EOF {
		h.err, h.has = io.EOF, false
		return total, io.EOF
	}
	if total == 0 {
		return 0, nil
	}
	h.held, h.has = p[total-1], true
	return total - 1, nil
}
