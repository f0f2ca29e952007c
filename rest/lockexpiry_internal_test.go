package rest

import (
	"context"
	"sync"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/events"
)

// countingExpiries is a LockExpiries that reports nothing and records
// how many watches run at once, and the most ever.
type countingExpiries struct {
	mu            sync.Mutex
	running, most int
	live          []context.Context // of the watches running
	started       chan struct{}
	ended         chan struct{}
}

func (c *countingExpiries) WatchLockExpiries(ctx context.Context, _ func(api.LockGrant, string, bool)) error {
	c.mu.Lock()
	c.running++
	c.most = max(c.most, c.running)
	c.live = append(c.live, ctx)
	c.mu.Unlock()
	c.started <- struct{}{}
	<-ctx.Done()
	time.Sleep(10 * time.Millisecond) // a watch that takes a while to end
	c.mu.Lock()
	c.running--
	c.mu.Unlock()
	c.ended <- struct{}{}
	return ctx.Err()
}

// watching reports whether a watch runs that nobody stopped.
func (c *countingExpiries) watching() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ctx := range c.live {
		if ctx.Err() == nil {
			return true
		}
	}
	return false
}

// TestLockExpiryFeedWatchesWhileSubscribed: no watch runs before the
// first subscriber; two subscribers share one watch; it ends when the
// last leaves (leaving twice counts once); a subscriber that comes back
// starts a new one, never while the old one still runs.
func TestLockExpiryFeedWatchesWhileSubscribed(t *testing.T) {
	source := &countingExpiries{started: make(chan struct{}, 8), ended: make(chan struct{}, 8)}
	f := &lockExpiryFeed{source: source, hub: events.NewHub(events.Config{})}
	wait := func(c chan struct{}, what string) {
		t.Helper()
		select {
		case <-c:
		case <-time.After(10 * time.Second): // a bound on a hang
			t.Fatalf("no watch %s within 10 s", what)
		}
	}
	none := func(c chan struct{}, what string) {
		t.Helper()
		select {
		case <-c:
			t.Fatalf("a watch %s; want none", what)
		default:
		}
	}
	none(source.started, "started before any subscriber")
	leave1 := f.join()
	wait(source.started, "started")
	leave2 := f.join()
	leave1()
	leave1()
	none(source.ended, "ended while a subscriber remains")
	leave2()
	wait(source.ended, "ended")
	// Come back at once, repeatedly: a watch stopped before its turn
	// may never start, but the last one does.
	for range 3 {
		f.join()()
	}
	leave := f.join()
	for deadline := time.Now().Add(10 * time.Second); !source.watching(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) { // a bound on a hang
			t.Fatal("no watch started again within 10 s")
		}
	}
	f.mu.Lock()
	last := f.done
	f.mu.Unlock()
	leave()
	<-last
	source.mu.Lock()
	defer source.mu.Unlock()
	if source.running != 0 || source.most != 1 {
		t.Fatalf("%d watches run after the last subscriber left, and %d ran at once; want 0 and 1", source.running, source.most)
	}
	var nilFeed *lockExpiryFeed
	nilFeed.join()() // no source: nothing to do
}
