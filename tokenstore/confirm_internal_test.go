package tokenstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"fencegate/internal/testenv"
)

// TestConfirmerBatchesWaitingConfirmations holds every transaction slot,
// queues confirmations of marks that are equal, moved, missing and
// repeated, and checks that the transaction that ends sends them all in
// one more, each with its own answer.
func TestConfirmerBatchesWaitingConfirmations(t *testing.T) {
	ctx := context.Background()
	_, c := startConfirmer(t, 5*time.Second, map[string]string{"equal": "7", "moved": "9"})
	c.inFlight = confirmInFlight // every slot busy: whoever comes queues

	asks := []struct {
		key, value string
		want       bool
	}{
		{"equal", "7", true},
		{"moved", "8", false},
		{"missing", "1", false},
		{"equal", "7", true},
		{"equal", "6", false},
	}
	got := make([]chan bool, len(asks))
	for i, a := range asks {
		got[i] = make(chan bool, 1)
		go func() {
			equal, revision := c.confirm(ctx, a.key, a.value)
			if equal && revision == 0 {
				t.Errorf("confirm(%s) equal at revision 0", a.key)
			}
			got[i] <- equal
		}()
	}
	testenv.WaitUntil(t, 10*time.Second, "every confirmation is queued", func() bool { return c.queued() == len(asks) })
	if n := c.transactions.Load(); n != 0 {
		t.Fatalf("%d transactions sent while every slot was busy", n)
	}
	c.next() // the transaction holding a slot ended
	for i, a := range asks {
		if equal := <-got[i]; equal != a.want {
			t.Errorf("confirm(%s, %s) = %v, want %v", a.key, a.value, equal, a.want)
		}
	}
	if n := c.transactions.Load(); n != 1 {
		t.Errorf("%d transactions for %d queued confirmations, want 1", n, len(asks))
	}
	testenv.WaitUntil(t, 10*time.Second, "the slot is given back", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.inFlight == confirmInFlight-1
	})
}

// TestConfirmerSplitsLongQueues checks that no transaction reads more
// than confirmBatchMax marks.
func TestConfirmerSplitsLongQueues(t *testing.T) {
	_, c := startConfirmer(t, 5*time.Second, nil)
	c.inFlight = confirmInFlight
	const n = 2*confirmBatchMax + 1
	done := make(chan bool, n)
	for i := range n {
		go func() {
			equal, _ := c.confirm(context.Background(), fmt.Sprint("missing/", i), "1")
			done <- equal
		}()
	}
	testenv.WaitUntil(t, 10*time.Second, "every confirmation is queued", func() bool { return c.queued() == n })
	c.next()
	for range n {
		if <-done {
			t.Fatal("a missing mark was confirmed")
		}
	}
	if got := c.transactions.Load(); got != 3 {
		t.Errorf("%d queued confirmations took %d transactions, want 3 (at most %d marks each)", n, got, confirmBatchMax)
	}
}

// TestConfirmerQueuedGivesUpWithItsContext: a queued confirmation whose
// request ends stops waiting at once, and the batch still answers the
// others.
func TestConfirmerQueuedGivesUpWithItsContext(t *testing.T) {
	_, c := startConfirmer(t, 5*time.Second, map[string]string{"k": "3"})
	c.inFlight = confirmInFlight
	stays := make(chan bool, 1)
	go func() {
		equal, _ := c.confirm(context.Background(), "k", "3")
		stays <- equal
	}()
	ctx, cancel := context.WithCancel(context.Background())
	leaves := make(chan bool, 1)
	go func() {
		equal, revision := c.confirm(ctx, "k", "3")
		leaves <- equal || revision != 0
	}()
	testenv.WaitUntil(t, 10*time.Second, "both confirmations are queued", func() bool { return c.queued() == 2 })
	cancel()
	select {
	case learnt := <-leaves:
		if learnt {
			t.Fatal("a confirmation whose context ended reported an answer")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a confirmation whose context ended still waits for its batch after 10s")
	}
	if n := c.transactions.Load(); n != 0 {
		t.Fatalf("%d transactions before the queue was sent", n)
	}
	c.next()
	if !<-stays {
		t.Error("the confirmation that stayed was not confirmed")
	}
}

// TestConfirmerAloneSendsAtOnce: with a slot free, a confirmation sends
// its own transaction and gives the slot back.
func TestConfirmerAloneSendsAtOnce(t *testing.T) {
	_, c := startConfirmer(t, 5*time.Second, map[string]string{"k": "3"})
	if equal, revision := c.confirm(context.Background(), "k", "3"); !equal || revision == 0 {
		t.Fatalf("confirm = %v at revision %d, want true at a revision", equal, revision)
	}
	if n := c.transactions.Load(); n != 1 || c.inFlight != 0 {
		t.Errorf("after one confirmation: %d transactions, %d in flight; want 1 and 0", n, c.inFlight)
	}
}

// TestConfirmerEtcdDown: when etcd does not answer, every confirmation
// of the batch learns nothing, within the timeout.
func TestConfirmerEtcdDown(t *testing.T) {
	etcd, c := startConfirmer(t, 300*time.Millisecond, map[string]string{"k": "3"})
	etcd.Stop(t)
	c.inFlight = confirmInFlight
	done := make(chan bool, 3)
	for range 3 {
		go func() {
			equal, revision := c.confirm(context.Background(), "k", "3")
			done <- equal || revision != 0
		}()
	}
	testenv.WaitUntil(t, 10*time.Second, "every confirmation is queued", func() bool { return c.queued() == 3 })
	c.next()
	for range 3 {
		if <-done {
			t.Fatal("a confirmation learnt something from a stopped etcd")
		}
	}
}

// startConfirmer starts an etcd holding marks and returns it and a
// confirmer of it whose queued transactions time out after timeout.
func startConfirmer(t *testing.T, timeout time.Duration, marks map[string]string) (*testenv.Etcd, *confirmer) {
	t.Helper()
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	for k, v := range marks {
		if _, err := client.Put(context.Background(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	return etcd, newConfirmer(client, timeout)
}

// queued returns how many confirmations wait.
func (c *confirmer) queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}
