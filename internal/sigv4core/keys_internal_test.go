package sigv4core

import (
	"bytes"
	"strconv"
	"testing"
)

// TestKeyCacheBounded: past maxCachedKeys access key ids the cache starts
// again empty, and still gives each its key.
func TestKeyCacheBounded(t *testing.T) {
	var c KeyCache
	for i := range 3 * maxCachedKeys {
		id := "AK" + strconv.Itoa(i)
		k := c.Get(id, "secret-"+id, "20261203", "us-east-1")
		if !bytes.Equal(k.Bytes(), DeriveKey("secret-"+id, "20261203", "us-east-1")) {
			t.Fatalf("Get(%s) gave another key", id)
		}
		if n := c.count.Load(); n > maxCachedKeys {
			t.Fatalf("after %d access key ids the cache counts %d keys; at most %d", i+1, n, maxCachedKeys)
		}
	}
	n := 0
	c.keys.Range(func(any, any) bool { n++; return true })
	if n > maxCachedKeys {
		t.Errorf("the cache holds %d keys; at most %d", n, maxCachedKeys)
	}
}
