package robustness

import (
	"context"
	"testing"
	"time"

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
