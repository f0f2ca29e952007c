package rest

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"fencegate/api"
	"fencegate/fence"
)

// Fenced multipart uploads are the engine's (see fence.Engine.CreateUpload
// and the methods after it): the REST API's PUT hands bodies above
// Config.MultipartThreshold to putInParts, which uploads them with those
// methods, as the S3 API's multipart operations do.

// putInParts serves a REST PUT whose body is larger than
// Config.MultipartThreshold as a multipart upload fenced at completion,
// and reports whether it did (false: the PUT goes on as a single PUT).
// The body streams from the client to S3 one part at a time, each of
// Config.MultipartPartSize but the last, so memory stays bounded whatever
// its size; each part is checked against the mark first (UploadPart), and
// the completion is fenced (CompleteUpload). Anything that fails aborts
// the upload: the object is written by the completion or not at all.
func (g *API) putInParts(w http.ResponseWriter, r *http.Request, fr fence.Request) bool {
	n := r.ContentLength
	if !g.engine.HasMultipart() || g.cfg.MultipartThreshold < 0 || n <= g.cfg.MultipartThreshold ||
		(fr.Path.Store != "" && fr.Path.Store != api.StoreS3) {
		return false
	}
	if n > g.cfg.MaxMultipartBodyBytes {
		g.writeError(w, r, fmt.Errorf("%w: %d bytes, limit %d", api.ErrBodyTooLarge, n, g.cfg.MaxMultipartBodyBytes))
		return true
	}
	ctx := r.Context()
	b, err := g.engine.CreateUpload(ctx, fr.Path, fr.Token, r.Header.Get("Content-Type"), api.ObjectMetadata{})
	if err != nil {
		g.writeError(w, r, err)
		return true
	}
	body, client := g.clientReader(w, r)
	fail := func(err error) bool {
		if stalled := client.Stalled(); stalled != nil {
			err = fmt.Errorf("%w: %w", api.ErrInvalidRequest, stalled)
		}
		if !errors.Is(err, api.ErrStaleToken) { // a stale upload was aborted already
			g.engine.Abandon(ctx, fr.Path, b, fence.AbortFailed, "the upload failed")
		}
		g.writeError(w, r, err)
		return true
	}
	size := g.cfg.MultipartPartSize
	parts := make([]api.Part, 0, (n+size-1)/size)
	for number, left := int32(1), n; left > 0; number++ {
		part := min(size, left)
		counted := &countingReader{r: io.LimitReader(body, part)}
		etag, err := g.engine.UploadPart(ctx, api.UploadPartInput{Path: fr.Path, UploadID: b.Capability(), Number: number, Body: counted, Size: part}, 0)
		if err == nil && counted.n != part {
			err = fmt.Errorf("%w: reading body: %d bytes of %d", api.ErrInvalidRequest, n-left+counted.n, n)
		}
		if err != nil {
			return fail(err)
		}
		parts = append(parts, api.Part{Number: number, ETag: etag})
		left -= part
	}
	res, err := g.engine.CompleteUpload(ctx, fr.Path, b.Capability(), 0, parts)
	if err != nil {
		return fail(err)
	}
	answerWrite(w, res)
	return true
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
