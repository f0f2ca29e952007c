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
// to accept a token. It holds at most about max entries; when a shard is
// full it forgets an arbitrary entry, which costs only a round trip later.
type hwmCache struct {
	seed     maphash.Seed
	perShard int
	shards   [cacheShards]cacheShard
}

type cacheShard struct {
	mu sync.Mutex
	m  map[api.Resource]api.Token
}

func newHWMCache(max int) *hwmCache {
	c := &hwmCache{seed: maphash.MakeSeed(), perShard: max/cacheShards + 1}
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

// raise records that r's high-water mark is at least t.
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
	if len(s.m) >= c.perShard {
		for k := range s.m {
			delete(s.m, k)
			break
		}
	}
	s.m[r] = t
}
