package gateway

import (
	"errors"
	"fencegate/internal/fielderr"
	"strconv"
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
		return fielderr.Errorf("buffer_bytes", "%s must not exceed %s %s", formatSize(c.BufferBytes), name("max_body_bytes"), formatSize(c.MaxBodyBytes))
	}
	if c.BufferBudgetBytes < c.BufferBytes {
		return fielderr.Errorf("buffer_budget_bytes", "%s must be at least %s %s", formatSize(c.BufferBudgetBytes), name("buffer_bytes"), formatSize(c.BufferBytes))
	}
	return c.validateMultipart()
}

// formatSize formats n bytes with the largest binary suffix that divides
// it, as the size flags and the config file write sizes (8MiB, 65536).
func formatSize(n int64) string {
	if n == 0 {
		return "0"
	}
	for _, u := range []struct {
		suffix string
		factor int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n%u.factor == 0 {
			return strconv.FormatInt(n/u.factor, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
