package fence

import (
	"hash/maphash"
	"sync"
	"time"

	"fencegate/api"
)

// etagCacheShards spreads the ETag cache's lock over this many shards.
const etagCacheShards = 64

// DefaultETagCacheMaxAge is the default of Config.ETagCacheMaxAge: far
// below the retention of evicted marks that operators choose (a day by default,
// whose half is what they should set), and long enough for a writer's
// burst of writes to one object.
const DefaultETagCacheMaxAge = 10 * time.Minute

// DefaultETagCacheEntries is the default of Config.ETagCacheEntries:
// about 10 MiB of entries for short keys.
const DefaultETagCacheEntries = 1 << 16

// etagCacheMaxBody is the largest body whose write may take its
// observation from the ETag cache. A conditional write with an out-of-date
// If-Match is refused, and a server may refuse it before reading the body
// and close the connection: if the body does not fit in the sockets'
// buffers, the writer gets a connection reset instead of the 412, cannot
// tell that it lost a race, and answers 502 where a HEAD would have let it
// succeed. versitygw does this from about 1 MiB. Up to 64 KiB the body fits
// the receive buffer of Linux's defaults, and a HEAD is a large share of
// the work; above it, the HEAD is a small share.
const etagCacheMaxBody = 64 << 10

// etagCache remembers, per resource, the object version that this
// gateway's own last successful write left: the ETag and token of a PUT
// it made, or "absent" after a DELETE it made. A write may use it instead
// of a HEAD as its observation (protocol step 3).
//
// That is safe by the write path's ordering argument (observe, then
// fence: see observeAndFence), which needs only that the version a write
// replaces was current at some moment before the write's fence check: an entry is stored after S3 answered the write
// that made it, and read before the fence check of the write that uses
// it. An entry that is out of date (another gateway wrote since, or a
// direct writer) costs one 412 from S3's conditional write, after which
// the write observes again with a real HEAD; it never makes a write blind.
//
// The token is kept with the ETag, so that the check "the object records
// a larger token than the request's" works on a cache hit as on a HEAD.
//
// An entry is served only while it is younger than maxAge (from the
// write that made it), since an entry is an observation as old as that
// write. The ordering argument holds at any age, but once high-water
// marks are evicted (package retention evicts a mark its object records,
// some time after its last raise), an old observation is a writer paused
// between its observation and its fence check: a stale writer whose
// cached version's bytes came back (the same ETag) after a newer writer's
// mark was evicted would pass the fence check and the If-Match. Keeping
// maxAge below the retention (half of it) keeps the cache from widening
// that case.
//
// The cache holds about max entries; a full shard forgets an arbitrary
// entry, which costs only a HEAD later. It is safe for concurrent use.
type etagCache struct {
	seed     maphash.Seed
	perShard int
	maxAge   time.Duration // no bound when negative
	now      func() time.Time
	shards   [etagCacheShards]etagShard
}

type etagShard struct {
	mu sync.Mutex
	m  map[api.Resource]etagEntry
	// held are the resources with a ticket outstanding, until when (see
	// hold); nil until the shard's first.
	held map[api.Resource]time.Time
}

// etagEntry is a version and when the write that left it was answered.
type etagEntry struct {
	version api.ObjectVersion
	learned time.Time
}

// newETagCache returns a cache of about max entries that serves none
// older than maxAge (any age when negative), on clock now, or nil (a
// cache that never hits) when max is not positive.
func newETagCache(max int, maxAge time.Duration, now func() time.Time) *etagCache {
	if max <= 0 {
		return nil
	}
	c := &etagCache{seed: maphash.MakeSeed(), perShard: max/etagCacheShards + 1, maxAge: maxAge, now: now}
	for i := range c.shards {
		c.shards[i].m = make(map[api.Resource]etagEntry)
	}
	return c
}

func (c *etagCache) shard(r api.Resource) *etagShard {
	return &c.shards[maphash.String(c.seed, string(r))%etagCacheShards]
}

// get returns the version this gateway last wrote for r, if it knows one
// learned less than maxAge ago. An older entry is dropped.
func (c *etagCache) get(r api.Resource) (api.ObjectVersion, bool) {
	if c == nil {
		return api.ObjectVersion{}, false
	}
	s := c.shard(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[r]
	if !ok {
		return api.ObjectVersion{}, false
	}
	now := c.now()
	if s.heldAt(r, now) || (c.maxAge >= 0 && now.Sub(e.learned) >= c.maxAge) {
		delete(s.m, r)
		return api.ObjectVersion{}, false
	}
	return e.version, true
}

// learn records that a write of this gateway left r at version v. Versions
// of an object carry non-decreasing tokens, so an entry with a larger
// token than v's is newer (two answers for one object can arrive out of
// order) and is kept. Equal tokens cannot be ordered; the later answer
// wins, and if it is the older version, the next write pays a 412.
//
// A version that exists without an ETag is never learned, so never
// served: no conditional write can name it (an If-Match with an empty
// ETag is no condition at all, see api.ObjectVersion.Named), and a write
// that took it as its observation would be refused by the backend at
// best, blind at worst. The write that left it has made r's entry out of
// date, so learning it drops that entry: the next write observes with a
// HEAD.
func (c *etagCache) learn(r api.Resource, v api.ObjectVersion) {
	if c == nil {
		return
	}
	s := c.shard(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := c.now()
	if !v.Named() || s.heldAt(r, now) {
		delete(s.m, r)
		return
	}
	e := etagEntry{version: v, learned: now}
	if old, ok := s.m[r]; ok {
		if old.version.Token <= v.Token {
			s.m[r] = e
		}
		return
	}
	if len(s.m) >= c.perShard {
		for k := range s.m {
			delete(s.m, k)
			break
		}
	}
	s.m[r] = e
}

// forget drops r's entry if it is still v: a conditional write that used v
// lost a race, so v is no longer current.
func (c *etagCache) forget(r api.Resource, v api.ObjectVersion) {
	if c == nil {
		return
	}
	s := c.shard(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[r]; ok && old.version == v {
		delete(s.m, r)
	}
}

// hold forgets r's entry and learns nothing of r until until: a ticket
// (Engine.Ticket) may write r meanwhile, straight to the store, and the
// engine never sees that write, so no version it learns before the
// ticket expires is known to be current. A later hold of r extends an
// earlier one; neither ever shortens.
//
// Holds are not bounded by the cache's size: each is a ticket issued
// within its expiry, and an expired one is dropped by the next hold in
// its shard once they are as many as the shard's entries.
func (c *etagCache) hold(r api.Resource, until time.Time) {
	if c == nil {
		return
	}
	s := c.shard(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, r)
	if s.held == nil {
		s.held = make(map[api.Resource]time.Time)
	}
	if len(s.held) >= c.perShard {
		now := c.now()
		for k, t := range s.held {
			if !now.Before(t) {
				delete(s.held, k)
			}
		}
	}
	if until.After(s.held[r]) {
		s.held[r] = until
	}
}

// heldAt reports whether r is held (hold) at now, dropping a hold that
// has ended. The shard's lock is held.
func (s *etagShard) heldAt(r api.Resource, now time.Time) bool {
	until, ok := s.held[r]
	if !ok {
		return false
	}
	if !now.Before(until) {
		delete(s.held, r)
		return false
	}
	return true
}
