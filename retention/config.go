package retention

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of Config.
const (
	// DefaultRetention is how long after its last raise a mark that its
	// object records may be evicted.
	DefaultRetention = 24 * time.Hour
	// DefaultInterval is the pause between two passes over the marks.
	DefaultInterval = time.Minute
	// DefaultHeadsPerSecond bounds the HEADs an evictor sends to S3:
	// about 4.3 million a day, a few dollars a day on AWS.
	DefaultHeadsPerSecond = 50
	// DefaultPageSize is how many marks each etcd read returns.
	DefaultPageSize = 100
	// MinTombstoneRetention is the shortest tombstone retention other
	// than zero (for ever). A PUT that creates an object raises its mark
	// before its conditional write (If-None-Match: *) reaches the store,
	// so until the write lands or fails for good the mark is a tombstone
	// that alone refuses writers below its token; and a write the gateway
	// gave up on (a timeout) may still land. The longest that can take is
	// the gateway's whole-request bound (the HTTP read timeout, 10
	// minutes by default) and S3's answer timeout (30 seconds) plus the
	// time S3 takes to apply a request whose sender has gone (seconds); a
	// multipart completion's is 15 minutes. An hour is well above both.
	// Uploads in progress are kept by their bindings, whatever their age
	// (see the package documentation).
	MinTombstoneRetention = time.Hour
)

// Config configures an Evictor. The zero Config is valid: it evicts marks
// that their objects record after a day, keeps tombstones for ever, and
// sends at most 50 HEADs a second.
type Config struct {
	// Retention is how long after its last raise a mark whose token its
	// object records may be evicted. Zero means DefaultRetention;
	// negative turns eviction off (Run returns at once).
	Retention time.Duration
	// TombstoneRetention is how long after its last raise a mark whose
	// object is absent (a tombstone) may be evicted, when no multipart
	// upload of the object is in progress. Zero, the default, keeps
	// tombstones for ever; otherwise it must be at least
	// MinTombstoneRetention. See the package documentation for what it
	// gives up.
	TombstoneRetention time.Duration
	// Interval is the pause between the end of one pass over the marks
	// and the start of the next. Zero means DefaultInterval.
	Interval time.Duration
	// HeadsPerSecond bounds the object observations (S3 HEADs) the
	// evictor makes. Zero means DefaultHeadsPerSecond.
	HeadsPerSecond float64
	// PageSize is how many marks each read of etcd returns. Zero means
	// DefaultPageSize.
	PageSize int
	// Holder names this evictor in the evictors' turn (see Evictor), for
	// operators reading etcd. Empty means a random name.
	Holder string
	// Logger receives a line per pass and per failure. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock that ages marks (see "Age without timestamps" in
	// the package documentation). Nil means time.Now; tests set a clock
	// of their own.
	Now func() time.Time
}

// withDefaults returns c with its zero fields set to their defaults, or
// an error naming the first invalid field.
func (c Config) withDefaults() (Config, error) {
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.TombstoneRetention < 0 {
		return c, fmt.Errorf("retention: negative tombstone retention %v (zero keeps tombstones for ever)", c.TombstoneRetention)
	}
	if c.TombstoneRetention > 0 && c.TombstoneRetention < MinTombstoneRetention {
		return c, fmt.Errorf("retention: tombstone retention %v is below %v: a write the gateway gave up on may still reach the store that long after its mark was raised (zero keeps tombstones for ever)",
			c.TombstoneRetention, MinTombstoneRetention)
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Interval < 0 {
		return c, fmt.Errorf("retention: negative interval %v", c.Interval)
	}
	if c.HeadsPerSecond == 0 {
		c.HeadsPerSecond = DefaultHeadsPerSecond
	}
	if c.HeadsPerSecond < 0 {
		return c, fmt.Errorf("retention: negative HEAD rate %v", c.HeadsPerSecond)
	}
	if c.PageSize == 0 {
		c.PageSize = DefaultPageSize
	}
	if c.PageSize < 0 {
		return c, errors.New("retention: negative page size")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Holder == "" {
		c.Holder = "evictor-" + rand.Text()[:10]
	}
	return c, nil
}

// Validate reports whether New would accept c.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// ETagCacheMaxAge is the bound to set as the gateway's ETagCacheMaxAge
// while marks are evicted with c: half the retention. An observation the
// gateway serves from its ETag cache is as old as the write that left it,
// and an old observation is what widens the ETag ABA case once marks are
// evicted (see the package documentation); half leaves room for the time
// from the cache to the fence check and for the clocks of two processes.
// It is zero (the gateway's default) when c turns eviction off.
func (c Config) ETagCacheMaxAge() time.Duration {
	switch {
	case c.Retention < 0:
		return 0
	case c.Retention == 0:
		return DefaultRetention / 2
	case c.Retention < 2:
		return 1 // serve nothing from the cache: 0 would be the gateway's default
	}
	return c.Retention / 2
}
