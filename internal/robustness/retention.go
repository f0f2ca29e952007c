package robustness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
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
	// evictorInterval is every gateway's --mark-eviction-interval: the
	// pause between two ticks of its evictor (a pass when it holds the
	// turn, a sample of etcd's revision when not).
	evictorInterval = 300 * time.Millisecond
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
// holds it: no gateway starts a page of marks after Off returns, save one
// whose renewal etcd answered before (see take). A pass that read its
// page before may still evict marks of that page (not of objects first
// written after Off).
//
// A hold that has expired (the harness's lease outlived: a long run of
// histories without retention) is taken again, not assumed.
func (t *EvictorTurn) Off(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if t.lease != 0 {
		if _, err := t.client.KeepAliveOnce(ctx, t.lease); err == nil {
			return nil
		}
		// Expired or unknown: the turn may be a gateway's now.
		t.lease = 0
	}
	var lastErr error
	for ctx.Err() == nil {
		if err := t.take(ctx); err == nil {
			// A gateway whose turn was renewed just before may read one
			// more page: let it read that page before the history's
			// objects have marks.
			time.Sleep(200 * time.Millisecond)
			return nil
		} else {
			lastErr = err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("take the evictors' turn: %w", lastErr)
}

// take makes one attempt at Off: it reads the turn, and replaces what it
// read with the harness's hold in one transaction, compared on the key's
// mod revision (0 when it is free). The turn is never free on the way,
// so that a gateway's evictor cannot take it in between; a renewal does
// not change the mod revision, so a holder that only renews cannot make
// the transaction fail, only a new holder can (then take fails and Off
// tries again).
//
// A gateway's evictor renews its turn before each page
// (tokenstore.Store.HoldTurn: a read of the key, then a keep-alive of the
// lease the key names): after the transaction it reads the harness's
// name and stops its pass. The previous holder's lease is revoked too, so
// that a renewal that read the key before the transaction and keeps its
// lease alive after it fails (its lease is not found, and the key is
// taken). Only a renewal that etcd answered wholly before the revoke can
// still start one page.
func (t *EvictorTurn) take(ctx context.Context) error {
	read, err := t.client.Get(ctx, evictorTurnKey)
	if err != nil {
		return err
	}
	var modRevision int64
	var previous clientv3.LeaseID
	if len(read.Kvs) == 1 {
		modRevision, previous = read.Kvs[0].ModRevision, clientv3.LeaseID(read.Kvs[0].Lease)
	}
	lease, err := t.client.Grant(ctx, 600)
	if err != nil {
		return err
	}
	resp, err := t.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(evictorTurnKey), "=", modRevision)).
		Then(clientv3.OpPut(evictorTurnKey, harnessHolder, clientv3.WithLease(lease.ID))).
		Commit()
	if err != nil || !resp.Succeeded {
		_, _ = t.client.Revoke(ctx, lease.ID)
		if err != nil {
			return err
		}
		return errors.New("a gateway took the turn between the read and the transaction")
	}
	t.lease = lease.ID
	// The key is on the harness's lease now: revoking the previous one
	// deletes nothing. It may be gone already (expired).
	for previous != 0 {
		_, err := t.client.Revoke(ctx, previous)
		if err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("revoke the previous holder's lease: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
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

// evictionWait bounds how long a retention history waits, once its
// workload is over, for the gateways to evict the marks its objects record
// (awaitEvictions): a retention, then an evictor's tick and pass, with
// room to spare.
var evictionWait = 3*markRetention + evictorInterval + 5*time.Second

// awaitEvictions waits, at most evictionWait, until no object of the
// workload records its mark any more: each such mark is evicted, or the
// object changed. It returns how many such marks it found at the start,
// and how many remain.
func awaitEvictions(ctx context.Context, cluster *Cluster, objects *minio.Client, workload *Workload) (before, after int) {
	deadline := time.Now().Add(evictionWait)
	first := true
	for {
		n := 0
		for _, key := range workload.Keys() {
			if evictable(ctx, cluster, objects, key) {
				n++
			}
		}
		if first {
			before, first = n, false
		}
		if n == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return before, n
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// evictable reports whether key's mark is in etcd and its object records
// it.
func evictable(ctx context.Context, cluster *Cluster, objects *minio.Client, key string) bool {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := cluster.Client.Get(rctx, HWMPrefix+"s3/"+Bucket+"/"+key)
	if err != nil || len(resp.Kvs) == 0 {
		return false
	}
	mark, err := decodeStoredToken(resp.Kvs[0].Value)
	if err != nil {
		return false
	}
	state, err := readObject(rctx, objects, key)
	return err == nil && state.Exists && state.Token == mark
}

// probeEvicted writes, through each gateway, with a stale token to every
// object of the workload whose mark is gone while the object records a
// token: the smallest token an acked write to it carried, when below the
// object's. Each must be refused (the checkers see the probes as the
// history's writes): with the mark evicted, the token on the object is
// what refuses them. It returns how many probes it sent.
func probeEvicted(ctx context.Context, cluster *Cluster, objects *minio.Client, workload *Workload) int {
	smallest := make(map[string]api.Token)
	for _, op := range workload.History().Ops() {
		if op.Kind == OpWrite && op.Outcome == Acked && (smallest[op.Key] == 0 || op.Token < smallest[op.Key]) {
			smallest[op.Key] = op.Token
		}
	}
	probes := 0
	for _, key := range workload.Keys() {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := cluster.Client.Get(rctx, HWMPrefix+"s3/"+Bucket+"/"+key)
		state, serr := readObject(rctx, objects, key)
		cancel()
		if err != nil || serr != nil || len(resp.Kvs) > 0 || !state.Exists || smallest[key] == 0 || smallest[key] >= state.Token {
			continue
		}
		for _, g := range cluster.Gateways {
			workload.StaleProbe(ctx, g, key, smallest[key])
			probes++
		}
	}
	return probes
}

// rogueEvictor deletes every mark of the workload's objects every 100 ms
// until stop, without looking at the objects: an evictor that breaks the
// rule, for the mutation run (SuiteConfig.RogueEviction). Some of its
// deletes come between a fence check that raised a mark and the write
// that records it on the object.
func rogueEvictor(ctx context.Context, cluster *Cluster, workload *Workload, stop <-chan struct{}) {
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		_, _ = cluster.Client.Delete(dctx, HWMPrefix+"s3/"+Bucket+"/"+workload.prefix, clientv3.WithPrefix())
		cancel()
	}
}
