package gateway

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"fencegate/api"
	"fencegate/fence"
	"fencegate/internal/fielderr"
)

// Fenced multipart uploads are the engine's (see fence.Engine.CreateUpload
// and the methods after it): the S3 front door reaches them through the
// delegations below, and the REST API's PUT hands bodies above
// Config.MultipartThreshold to putInParts, which uses the same methods.

// WithMultipart turns on fenced multipart uploads in store (S3 buckets
// only: the buckets that BucketStores names api.StoreS3), with their
// bindings in uploads: the exported multipart methods, and REST PUTs
// above Config.MultipartThreshold uploaded in parts.
func WithMultipart(store MultipartStore, uploads UploadStore) Option {
	if store == nil || uploads == nil {
		panic("gateway: WithMultipart(nil)")
	}
	return func(g *Gateway) {
		// Every round trip of an upload goes through the edge's
		// decorators (New): one span each, and the S3 requests in the S3
		// request metric.
		g.multipart = &multipart{store: store, uploads: uploads}
	}
}

// multipart is what WithMultipart gives a Gateway: the stores of fenced
// multipart uploads.
type multipart struct {
	store   MultipartStore
	uploads UploadStore
}

// Defaults of the multipart fields of Config.
const (
	defaultMultipartThreshold = 64 << 20
	defaultMultipartPartSize  = 16 << 20
	// A day, past which S3 users commonly let a lifecycle rule abort
	// incomplete uploads too.
	defaultUploadTTL = 24 * time.Hour
)

// withMultipartDefaults gives the multipart fields of cfg their defaults.
func (cfg Config) withMultipartDefaults() Config {
	if cfg.MultipartThreshold == 0 {
		cfg.MultipartThreshold = defaultMultipartThreshold
	}
	if cfg.MultipartPartSize == 0 {
		cfg.MultipartPartSize = defaultMultipartPartSize
	}
	if cfg.UploadTTL == 0 {
		cfg.UploadTTL = defaultUploadTTL
	}
	if cfg.MaxMultipartBodyBytes == 0 {
		cfg.MaxMultipartBodyBytes = cfg.MultipartPartSize * api.MaxParts
	}
	return cfg
}

// validateMultipart checks the multipart fields of c (with their
// defaults): parts within S3's limits, and no body larger than S3's most
// parts of that size.
func (c Config) validateMultipart() error {
	c = c.withMultipartDefaults()
	switch {
	case c.MultipartPartSize < api.MinPartSize || c.MultipartPartSize > api.MaxPartSize:
		return fielderr.Errorf("multipart_part_size", "%s: must be 5MiB to 5GiB, S3's limits on a part", formatSize(c.MultipartPartSize))
	case c.UploadTTL < time.Second:
		return fielderr.Errorf("upload_ttl", "%v: must be at least a second", c.UploadTTL)
	case c.MaxMultipartBodyBytes < 0:
		return fielderr.Errorf("max_multipart_body_bytes", "%d: must not be negative", c.MaxMultipartBodyBytes)
	case c.MaxMultipartBodyBytes > c.MultipartPartSize*api.MaxParts:
		return fielderr.Errorf("max_multipart_body_bytes", "%s: must not exceed 10000 parts of multipart_part_size %s", formatSize(c.MaxMultipartBodyBytes), formatSize(c.MultipartPartSize))
	}
	return nil
}

// putInParts serves a REST PUT whose body is larger than
// Config.MultipartThreshold as a multipart upload fenced at completion,
// and reports whether it did (false: the PUT goes on as a single PUT).
// The body streams from the client to S3 one part at a time, each of
// Config.MultipartPartSize but the last, so memory stays bounded whatever
// its size; each part is checked against the mark first (UploadPart), and
// the completion is fenced (CompleteUpload). Anything that fails aborts
// the upload: the object is written by the completion or not at all.
func (g *Gateway) putInParts(w http.ResponseWriter, r *http.Request, fr fence.Request) bool {
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
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
	}
	w.Header().Set("ETag", res.ETag)
	w.Header().Set(api.HeaderFenceToken, res.Token.String())
	writeJSON(w, status, res)
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
