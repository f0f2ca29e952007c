package tokenstore

import (
	"fmt"
	"strings"
	"testing"

	"fencegate/api"
)

// heldNameBytes is the bytes of the resource names c holds, counted by
// the test itself rather than by the cache's own accounting.
func heldNameBytes(c *hwmCache) (names, entries int) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for r := range s.m {
			names += len(r)
			entries++
		}
		s.mu.Unlock()
	}
	return names, entries
}

// TestCacheBoundedInBytes: long resource names cannot make the cache
// hold more than its budget, however many there are, and what it holds
// still serves the fast reject.
func TestCacheBoundedInBytes(t *testing.T) {
	const budget = 1 << 20
	c := newHWMCache(budget)
	long := strings.Repeat("k", 1024) // a key near S3's 1,024-byte limit
	var last api.Resource
	for i := range 20000 { // about 20 MiB of names
		last = api.Resource(fmt.Sprintf("s3/bucket/%08d-%s", i, long))
		c.raise(last, api.Token(i+1))
	}
	names, entries := heldNameBytes(c)
	if names > budget {
		t.Fatalf("cache holds %d entries with %d bytes of names; want at most the %d-byte budget", entries, names, budget)
	}
	if got := c.heldBytes(); got > budget {
		t.Errorf("cache accounts %d bytes; want at most %d", got, budget)
	}
	if got := c.heldBytes(); got < int64(names) {
		t.Errorf("cache accounts %d bytes for %d bytes of names; it must count the names", got, names)
	}
	if entries < budget/2/(len(last)+cacheEntryOverhead(len(last))) {
		t.Errorf("cache holds %d entries; it evicts far more than its budget needs", entries)
	}
	// The newest entry is always kept: the fast reject refuses a token
	// below it.
	if hwm, ok := c.get(last); !ok || hwm != 20000 {
		t.Errorf("get(newest) = %d, %v; want 20000, true", hwm, ok)
	}
	c.raise(last, 5)
	if hwm, _ := c.get(last); hwm != 20000 {
		t.Errorf("get(newest) = %d after raise(5); want 20000 (a mark never goes down)", hwm)
	}
}
