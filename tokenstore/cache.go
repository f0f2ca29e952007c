package tokenstore

import (
	"hash/maphash"
	"sync"

	"fencegate/api"
)

const cacheShards = 64

// hwmCache remembers high-water marks learned from etcd. Because a
// high-water mark never decreases, a remembered value is a lower bound of
// the true one: a token below it is certainly stale. The cache is never used
// to accept a token (confirmMark only uses it to choose which etcd request
// decides).
//
// It is bounded in bytes, not entries, since clients choose the resource
// names (up to about 1 KiB each): it holds at most about maxBytes, counting
// each entry's name and overhead (cacheEntryOverhead). When a shard is full
// it forgets arbitrary entries until the new one fits. Forgetting is always
// safe: a missing entry only means that the next write of that resource
// asks etcd, which decides as if the cache did not exist; it can never make
// a stale token pass.
type hwmCache struct {
	seed          maphash.Seed
	perShardBytes int64
	shards        [cacheShards]cacheShard
}

type cacheShard struct {
	mu    sync.Mutex
	m     map[api.Resource]api.Token
	bytes int64 // accounted bytes of m's entries (cacheEntryBytes)
}

// cacheEntryOverhead estimates what an entry costs beyond its name's
// bytes: the map slot (a string header and a token, 24 bytes, at a load
// of up to 7/8, plus its control byte), and the round-up of the name's
// allocation to its size class (at most an eighth of the name for the
// sizes of resource names). The map's slots are not given back when
// entries are deleted, but there are never more of them than the entries
// the budget let in at once, each of which was counted.
func cacheEntryOverhead(nameBytes int) int { return 48 + nameBytes/8 }

// cacheEntryBytes is what the entry of resource r is counted as.
func cacheEntryBytes(r api.Resource) int64 {
	return int64(len(r) + cacheEntryOverhead(len(r)))
}

func newHWMCache(maxBytes int64) *hwmCache {
	c := &hwmCache{seed: maphash.MakeSeed(), perShardBytes: maxBytes / cacheShards}
	for i := range c.shards {
		c.shards[i].m = make(map[api.Resource]api.Token)
	}
	return c
}

func (c *hwmCache) shard(r api.Resource) *cacheShard {
	return &c.shards[maphash.String(c.seed, string(r))%cacheShards]
}

// get returns the largest high-water mark seen for r.
func (c *hwmCache) get(r api.Resource) (api.Token, bool) {
	s := c.shard(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.m[r]
	return t, ok
}

// raise records that r's high-water mark is at least t. An entry larger
// than a shard's share of the budget is not kept.
func (c *hwmCache) raise(r api.Resource, t api.Token) {
	s := c.shard(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[r]; ok {
		if t > old {
			s.m[r] = t
		}
		return
	}
	size := cacheEntryBytes(r)
	if size > c.perShardBytes {
		return
	}
	for k := range s.m { // an arbitrary order: Go randomises it
		if s.bytes+size <= c.perShardBytes {
			break
		}
		delete(s.m, k)
		s.bytes -= cacheEntryBytes(k)
	}
	s.m[r] = t
	s.bytes += size
}

// heldBytes is the bytes the cache accounts for its entries.
func (c *hwmCache) heldBytes() int64 {
	var total int64
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		total += s.bytes
		s.mu.Unlock()
	}
	return total
}
