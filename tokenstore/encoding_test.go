package tokenstore

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"fencegate/api"
)

// TestEncodingOrder checks what the fence-check transaction relies on: etcd
// compares values as bytes, so byte order must be numeric order.
func TestEncodingOrder(t *testing.T) {
	edges := []api.Token{1, 9, 10, 99, 100, 1 << 32, api.MaxToken - 1, api.MaxToken}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		edges = append(edges, api.Token(rng.Int64N(int64(api.MaxToken))+1))
	}
	for i := range edges {
		a, b := edges[i], edges[(i*7+3)%len(edges)]
		ea, eb := encodeToken(a), encodeToken(b)
		if len(ea) != encodedWidth {
			t.Fatalf("encodeToken(%d) = %q; want %d bytes", a, ea, encodedWidth)
		}
		if got, want := bytes.Compare([]byte(ea), []byte(eb)), cmp(a, b); got != want {
			t.Fatalf("byte order of %q vs %q = %d; numeric order of %d vs %d = %d", ea, eb, got, a, b, want)
		}
		if back, err := decodeToken([]byte(ea)); err != nil || back != a {
			t.Fatalf("decodeToken(%q) = %d, %v; want %d", ea, back, err, a)
		}
	}
}

func TestDecodeTokenRejectsCorruption(t *testing.T) {
	for _, v := range []string{"", "34", "0000000000000000003x", "000000000000000000034"} {
		if _, err := decodeToken([]byte(v)); err == nil {
			t.Errorf("decodeToken(%q) succeeded; want an error", v)
		}
	}
}

func cmp(a, b api.Token) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestCacheKeepsLargestAndStaysBounded(t *testing.T) {
	const budget = 64 << 10 // 1 KiB a shard: a dozen or so 20-byte names each
	c := newHWMCache(budget)
	c.raise("r", 5)
	c.raise("r", 3)
	if got, ok := c.get("r"); !ok || got != 5 {
		t.Fatalf("get(r) = %d, %v after raise(5), raise(3); want 5", got, ok)
	}
	for i := range 100000 {
		c.raise(api.Resource(encodeToken(api.Token(i+1))), 1)
	}
	if got := c.heldBytes(); got > budget {
		t.Fatalf("cache accounts %d bytes; limit %d", got, budget)
	}
}
