package robustness

import (
	"context"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

// TestEvictorTurnSwitchesTheGatewaysEvictors: with the switch off, a
// gateway's evictor (tokenstore.Store.HoldTurn, as package retention
// calls it) cannot hold the turn, even one that held it before; with it
// on again, the evictor takes it.
func TestEvictorTurnSwitchesTheGatewaysEvictors(t *testing.T) {
	client := testenv.StartEtcd(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := tokenstore.New(client, tokenstore.Config{Prefix: EtcdPrefix})
	if err != nil {
		t.Fatal(err)
	}
	hold := func() bool {
		t.Helper()
		held, err := store.HoldTurn(ctx, "mark-evictor", "gateway-1", 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return held
	}
	if !hold() {
		t.Fatal("the gateway's evictor could not take a free turn")
	}
	turn := NewEvictorTurn(client)
	if err := turn.Off(ctx); err != nil {
		t.Fatal(err)
	}
	if hold() {
		t.Error("with eviction switched off, the gateway's evictor still holds the turn")
	}
	resp, err := client.Get(ctx, evictorTurnKey)
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != harnessHolder {
		t.Errorf("turn key %s = %v, %v; want held by %s", evictorTurnKey, resp, err, harnessHolder)
	}
	if err := turn.On(ctx); err != nil {
		t.Fatal(err)
	}
	if !hold() {
		t.Error("with eviction switched on, the gateway's evictor cannot take the turn")
	}
}

// TestEvictorTurnOffAgainstAnEagerEvictor: Off takes the turn from a
// gateway's evictor that takes the turn again the moment it finds it
// free (an evictor whose tick falls between a delete of its hold and the
// harness's put, which a 300 ms tick on three gateways often does). The
// turn must never be free on the way: Off replaces the hold in one
// transaction. The gateway's lease is gone too, so that a renewal that
// read the key before Off does not keep the turn.
func TestEvictorTurnOffAgainstAnEagerEvictor(t *testing.T) {
	client := testenv.StartEtcd(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := tokenstore.New(client, tokenstore.Config{Prefix: EtcdPrefix})
	if err != nil {
		t.Fatal(err)
	}
	if held, err := store.HoldTurn(ctx, "mark-evictor", "gateway-1", 30*time.Second); err != nil || !held {
		t.Fatalf("HoldTurn(free turn) = %v, %v; want true", held, err)
	}
	before, err := client.Get(ctx, evictorTurnKey)
	if err != nil || len(before.Kvs) != 1 {
		t.Fatalf("turn key after HoldTurn = %v, %v", before, err)
	}
	gatewayLease := clientv3.LeaseID(before.Kvs[0].Lease)

	// The eager evictor: it watches the turn and takes it whenever it
	// is deleted, noting each time it found it free.
	watchCtx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	freed := 0
	watch := client.Watch(watchCtx, evictorTurnKey, clientv3.WithRev(before.Header.Revision+1))
	wg.Go(func() {
		for resp := range watch {
			for _, e := range resp.Events {
				if e.Type != clientv3.EventTypeDelete {
					continue
				}
				mu.Lock()
				freed++
				mu.Unlock()
				_, _ = store.HoldTurn(watchCtx, "mark-evictor", "gateway-1", 30*time.Second)
			}
		}
	})
	defer func() { stopWatch(); wg.Wait() }()

	offCtx, offCancel := context.WithTimeout(ctx, 5*time.Second)
	defer offCancel()
	turn := NewEvictorTurn(client)
	if err := turn.Off(offCtx); err != nil {
		t.Fatalf("Off against an eager evictor: %v", err)
	}
	resp, err := client.Get(ctx, evictorTurnKey)
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != harnessHolder {
		t.Fatalf("turn key %s = %v, %v; want held by %s", evictorTurnKey, resp, err, harnessHolder)
	}
	mu.Lock()
	if freed != 0 {
		t.Errorf("the turn was free %d times on the way to Off; want never", freed)
	}
	mu.Unlock()
	if ttl, err := client.TimeToLive(ctx, gatewayLease); err != nil || ttl.TTL != -1 {
		t.Errorf("TimeToLive(the gateway's turn lease) = %v, %v; want revoked (TTL -1)", ttl, err)
	}
	if held, err := store.HoldTurn(ctx, "mark-evictor", "gateway-1", 30*time.Second); err != nil || held {
		t.Errorf("HoldTurn(gateway-1) after Off = %v, %v; want false", held, err)
	}
}

// TestEvictorTurnOffAfterItsLeaseExpired: a harness whose hold expired
// (a long run of histories without retention outlives its lease) takes
// the turn again at the next Off, rather than believing it still holds
// it.
func TestEvictorTurnOffAfterItsLeaseExpired(t *testing.T) {
	client := testenv.StartEtcd(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := tokenstore.New(client, tokenstore.Config{Prefix: EtcdPrefix})
	if err != nil {
		t.Fatal(err)
	}
	turn := NewEvictorTurn(client)
	if err := turn.Off(ctx); err != nil {
		t.Fatal(err)
	}
	// The lease expires: revoking it does what expiry does.
	if _, err := client.Revoke(ctx, turn.lease); err != nil {
		t.Fatal(err)
	}
	if held, err := store.HoldTurn(ctx, "mark-evictor", "gateway-1", 30*time.Second); err != nil || !held {
		t.Fatalf("HoldTurn(turn freed by expiry) = %v, %v; want true", held, err)
	}
	if err := turn.Off(ctx); err != nil {
		t.Fatal(err)
	}
	if held, err := store.HoldTurn(ctx, "mark-evictor", "gateway-1", 30*time.Second); err != nil || held {
		t.Errorf("HoldTurn(gateway-1) after a second Off = %v, %v; want false", held, err)
	}
}

// TestRetentionHistoriesAreAHalf: retentionHistory picks about half of
// the seeds, as a function of the seed, and not the same ones as
// compactionHistory: some histories have both.
func TestRetentionHistoriesAreAHalf(t *testing.T) {
	n, both := 0, 0
	for seed := range uint64(600) {
		on := retentionHistory(seed)
		if on != retentionHistory(seed) {
			t.Fatalf("retentionHistory(%d) changed", seed)
		}
		if on {
			n++
			if compactionHistory(seed) {
				both++
			}
		}
	}
	if n < 250 || n > 350 {
		t.Errorf("retentionHistory picks %d of 600 seeds; want about 300", n)
	}
	if both < 60 || both > 140 {
		t.Errorf("%d of 600 seeds have retention and compaction; want about 100", both)
	}
}

// TestRevisionClockBounds: a revision above a sample's had not happened
// when that sample was sent; one at or below it had when it was answered.
func TestRevisionClockBounds(t *testing.T) {
	c := &RevisionClock{samples: []revisionSample{
		{sent: at(0), received: at(0.1), revision: 10},
		{sent: at(1), received: at(1.1), revision: 12},
		{sent: at(2), received: at(2.1), revision: 12},
		{sent: at(3), received: at(3.1), revision: 20},
	}}
	for _, tc := range []struct {
		rev           int64
		after, before time.Time
	}{
		{5, time.Time{}, at(0.1)},
		{10, time.Time{}, at(0.1)},
		{11, at(0), at(1.1)},
		{13, at(2), at(3.1)},
		{21, at(3), time.Time{}},
	} {
		after, before := c.Bounds(tc.rev)
		if !after.Equal(tc.after) || !before.Equal(tc.before) {
			t.Errorf("Bounds(%d) = %v, %v; want %v, %v", tc.rev, after, before, tc.after, tc.before)
		}
	}
}
