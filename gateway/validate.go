package gateway

import (
	"errors"
	"fencegate/api"
	"fencegate/internal/fielderr"
	"time"
)

// Validate checks c as New would use it, zero fields taking their
// defaults: no limit is negative but those documented so, the buffered
// body fits the largest body (BufferBytes at most MaxBodyBytes), and the
// budget of buffered bodies holds one (BufferBudgetBytes at least
// BufferBytes). Errors are *fielderr.Error, joined; their Field is the
// field's name in the config file's terms (buffer_bytes). name, when not
// nil, maps such a name to the one the caller's users know (a flag, a
// path in the file) where a message names another field.
func (c Config) Validate(name func(field string) string) error {
	if name == nil {
		name = func(field string) string { return field }
	}
	c = c.withDefaults()
	var errs []error
	for _, f := range []struct {
		name string
		n    int64
	}{
		{"buffer_bytes", c.BufferBytes}, {"buffer_budget_bytes", c.BufferBudgetBytes}, {"max_body_bytes", c.MaxBodyBytes},
		{"max_header_bytes", int64(c.MaxHeaderBytes)}, {"max_target_bytes", int64(c.MaxTargetBytes)},
		{"write_attempts", int64(c.WriteAttempts)}, {"auth_refusal_log_burst", int64(c.AuthRefusalLogBurst)},
		{"max_requests_per_client", int64(c.MaxRequestsPerClient)},
		{"transfer_chunk_timeout", int64(c.TransferChunkTimeout)}, {"readiness_timeout", int64(c.ReadinessTimeout)}, {"readiness_cache", int64(c.ReadinessCache)},
	} {
		if f.n < 0 {
			errs = append(errs, fielderr.Errorf(f.name, "%d: must not be negative", f.n))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if c.BufferBytes > c.MaxBodyBytes {
		return fielderr.Errorf("buffer_bytes", "%s must not exceed %s %s", fielderr.Size(c.BufferBytes), name("max_body_bytes"), fielderr.Size(c.MaxBodyBytes))
	}
	if c.BufferBudgetBytes < c.BufferBytes {
		return fielderr.Errorf("buffer_budget_bytes", "%s must be at least %s %s", fielderr.Size(c.BufferBudgetBytes), name("buffer_bytes"), fielderr.Size(c.BufferBytes))
	}
	if err := c.validateTicketExpiry(); err != nil {
		return err
	}
	return c.validateMultipart()
}

// validateTicketExpiry checks c.TicketExpiry (with its default): whole
// seconds from 1s to api.MaxTicketExpiry, as a presigned URL counts them.
func (c Config) validateTicketExpiry() error {
	d := c.TicketExpiry
	if d < time.Second || d > api.MaxTicketExpiry || d%time.Second != 0 {
		return fielderr.Errorf("ticket_expiry", "%v: must be whole seconds from 1s to %v", d, api.MaxTicketExpiry)
	}
	return nil
}

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
		return fielderr.Errorf("multipart_part_size", "%s: must be 5MiB to 5GiB, S3's limits on a part", fielderr.Size(c.MultipartPartSize))
	case c.UploadTTL < time.Second:
		return fielderr.Errorf("upload_ttl", "%v: must be at least a second", c.UploadTTL)
	case c.MaxMultipartBodyBytes < 0:
		return fielderr.Errorf("max_multipart_body_bytes", "%d: must not be negative", c.MaxMultipartBodyBytes)
	case c.MaxMultipartBodyBytes > c.MultipartPartSize*api.MaxParts:
		return fielderr.Errorf("max_multipart_body_bytes", "%s: must not exceed 10000 parts of multipart_part_size %s", fielderr.Size(c.MaxMultipartBodyBytes), fielderr.Size(c.MultipartPartSize))
	}
	return nil
}
