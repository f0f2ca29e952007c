package robustness

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// compactEvery is how often a compaction history compacts etcd.
const compactEvery = 100 * time.Millisecond

// compactionHistory reports whether the history of seed runs with
// aggressive compaction: a seeded third of the histories. It draws from a
// source of its own, so that a seed draws the same plan and workload
// either way.
func compactionHistory(seed uint64) bool {
	return rand.New(rand.NewPCG(seed, 0xc0a1)).IntN(3) == 0
}

// Compactor compacts etcd at its current revision, again and again, while
// a history runs: etcd's auto-compaction with a retention of nothing, and
// more often than etcd's own compactor would run. Every watch that
// resumes, and every watch that starts from a revision read a moment
// earlier, may then find its revision compacted: the gateways' waiters
// (partner calls waiting for the one in flight) and the suite's HWM
// watcher must resynchronize. The compactor does not wait for the
// watcher, unlike the nemesis's compaction fault.
type Compactor struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu          sync.Mutex
	compactions int
	last        int64
}

// StartCompactor compacts through client every interval until Stop.
// Compactions that fail (etcd has no leader, the revision was compacted
// already) are skipped.
func StartCompactor(client *clientv3.Client, every time.Duration) *Compactor {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Compactor{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		ticker := time.NewTicker(every)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			c.compact(ctx, client)
		}
	}()
	return c
}

// compact compacts etcd at the revision a read sees now.
func (c *Compactor) compact(ctx context.Context, client *clientv3.Client) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := client.Get(ctx, "compaction-probe", clientv3.WithCountOnly())
	if err != nil {
		return
	}
	rev := resp.Header.Revision
	c.mu.Lock()
	last := c.last
	c.mu.Unlock()
	if rev <= last {
		return // nothing new to compact
	}
	if _, err := client.Compact(ctx, rev); err != nil {
		return
	}
	c.mu.Lock()
	c.compactions++
	c.last = rev
	c.mu.Unlock()
}

// made returns how many compactions the compactor has made so far: etcd
// may have applied one whose answer it has not read yet.
func (c *Compactor) made() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.compactions
}

// Stop stops the compactor and returns how many compactions it made.
func (c *Compactor) Stop() int {
	c.cancel()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.compactions
}
