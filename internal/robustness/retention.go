package robustness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Mark retention in the suite. Every gateway runs with an aggressive
// retention (markRetention): each can evict the marks of objects that
// record them, one at a time, the one that holds the etcd key
// evictorTurnKey (package retention's turn). The cluster is shared by all
// histories, so retention is switched per history through that turn: in a
// history without retention the harness holds the turn itself, and every
// gateway's evictor only samples etcd's revision; in a history with it the
// harness lets go and a gateway's evictor takes the turn at its next tick.
// A switch needs no restart and changes nothing else in the gateways (in
// particular their ETag cache bound, set from the retention, stays the
// same in every history).
const (
	// markRetention is every gateway's --mark-retention: marks last raised
	// this long ago are evicted when their object records them.
	markRetention = 2 * time.Second
	// evictorTurnKey is the evictors' turn, under the gateways' prefix.
	evictorTurnKey = EtcdPrefix + "turns/mark-evictor"
	// harnessHolder is the harness's name in the turn.
	harnessHolder = "robustness-harness"
)

// retentionHistory reports whether the history of seed runs with mark
// retention: a seeded half do, drawn apart from compactionHistory, so
// that some histories have both.
func retentionHistory(seed uint64) bool {
	return rand.New(rand.NewPCG(seed, 0x2e7e)).IntN(2) == 0
}

// EvictorTurn switches the gateways' mark eviction on and off by holding
// the evictors' turn, or not.
type EvictorTurn struct {
	client *clientv3.Client
	lease  clientv3.LeaseID // the harness's hold, or 0
}

// NewEvictorTurn returns a switch that starts with eviction on.
func NewEvictorTurn(client *clientv3.Client) *EvictorTurn { return &EvictorTurn{client: client} }

// Off takes the turn for the harness, taking it from the gateway that
// holds it: no gateway starts a page of marks after Off returns. A pass
// that read its page before may still evict marks of that page (not of
// objects first written after Off).
func (t *EvictorTurn) Off(ctx context.Context) error {
	if t.lease != 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var lastErr error
	for ctx.Err() == nil {
		if err := t.take(ctx); err == nil {
			// A gateway whose turn was just renewed may read one more
			// page: let it read that page before the history's objects
			// have marks.
			time.Sleep(200 * time.Millisecond)
			return nil
		} else {
			lastErr = err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("take the evictors' turn: %w", lastErr)
}

// take makes one attempt at Off.
func (t *EvictorTurn) take(ctx context.Context) error {
	lease, err := t.client.Grant(ctx, 600)
	if err != nil {
		return err
	}
	resp, err := t.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(evictorTurnKey), "=", 0)).
		Then(clientv3.OpPut(evictorTurnKey, harnessHolder, clientv3.WithLease(lease.ID))).
		Else(clientv3.OpGet(evictorTurnKey)).
		Commit()
	if err == nil && resp.Succeeded {
		t.lease = lease.ID
		return nil
	}
	_, _ = t.client.Revoke(ctx, lease.ID)
	if err != nil {
		return err
	}
	// A gateway holds it: delete its hold (it finds the turn gone at its
	// next renewal), then try again.
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		if _, err := t.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(evictorTurnKey), "=", kvs[0].ModRevision)).
			Then(clientv3.OpDelete(evictorTurnKey)).
			Commit(); err != nil {
			return err
		}
	}
	return errors.New("a gateway held the turn")
}

// On lets go of the turn, if the harness holds it: a gateway's evictor
// takes it at its next tick.
func (t *EvictorTurn) On(ctx context.Context) error {
	if t.lease == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var err error
	for ctx.Err() == nil {
		if _, err = t.client.Revoke(ctx, t.lease); err == nil {
			t.lease = 0
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("let go of the evictors' turn: %w", err)
}

// RevisionClock samples etcd's revision with linearizable reads, every
// so often, noting when each read was sent and when it was answered; from
// them Bounds gives when a revision happened. A linearizable read is
// served at one moment between its sending and its answer, and reports
// the revision etcd had then: a revision above it had not happened when
// the read was sent, and one at or below it had when the answer came.
// The checkers use these bounds to judge a mark's delete against S3's
// record of the object (judgeMarkDeletes).
type RevisionClock struct {
	client *clientv3.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	samples []revisionSample
}

type revisionSample struct {
	sent, received time.Time
	revision       int64
}

// StartRevisionClock samples etcd's revision every interval until Close.
func StartRevisionClock(client *clientv3.Client, every time.Duration) *RevisionClock {
	ctx, cancel := context.WithCancel(context.Background())
	c := &RevisionClock{client: client, cancel: cancel, done: make(chan struct{})}
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
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			sent := time.Now()
			resp, err := client.Get(rctx, sentinelPrefix+"clock")
			received := time.Now()
			cancel()
			if err != nil {
				continue // no sample: the bounds around it are wider
			}
			c.mu.Lock()
			c.samples = append(c.samples, revisionSample{sent: sent, received: received, revision: resp.Header.Revision})
			c.mu.Unlock()
		}
	}()
	return c
}

// Bounds returns when revision rev happened, as the samples tell: not
// before after, and by before. A zero time is no bound.
func (c *RevisionClock) Bounds(rev int64) (after, before time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.samples {
		if s.revision < rev {
			if s.sent.After(after) {
				after = s.sent
			}
		} else if before.IsZero() || s.received.Before(before) {
			before = s.received
		}
	}
	return after, before
}

// Forget drops the samples sent before t.
func (c *RevisionClock) Forget(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := 0
	for i < len(c.samples) && c.samples[i].sent.Before(t) {
		i++
	}
	c.samples = append([]revisionSample(nil), c.samples[i:]...)
}

// Close stops the sampling.
func (c *RevisionClock) Close() {
	c.cancel()
	<-c.done
}
