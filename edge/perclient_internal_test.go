package edge

import "testing"

// TestClientCounts checks the per-client counts: a client gets max
// requests in, no more, others are counted apart, a release lets one more
// in, and a client with nothing in flight takes no entry.
func TestClientCounts(t *testing.T) {
	c := &clientCounts{max: 2, n: make(map[string]int)}
	steps := []struct {
		op     string // "acquire" or "release"
		client string
		want   bool // acquire's answer
	}{
		{"acquire", "a", true},
		{"acquire", "a", true},
		{"acquire", "a", false},
		{"acquire", "b", true},
		{"release", "a", false},
		{"acquire", "a", true},
		{"acquire", "a", false},
		{"release", "a", false},
		{"release", "a", false},
		{"release", "b", false},
	}
	for i, s := range steps {
		if s.op == "release" {
			c.release(s.client)
			continue
		}
		if got := c.acquire(s.client); got != s.want {
			t.Fatalf("step %d: acquire(%q) = %v; want %v", i, s.client, got, s.want)
		}
	}
	if len(c.n) != 0 {
		t.Errorf("counts left after every release: %v; want none", c.n)
	}
}
