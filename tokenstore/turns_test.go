package tokenstore_test

import (
	"context"
	"testing"
	"time"

	"fencegate/internal/testenv"
)

// TestHoldTurn: one holder at a time holds a turn; it keeps it by calling
// again, and when it stops, the turn passes to another holder once its
// lease has expired.
func TestHoldTurn(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	a, b := newStore(t, etcd.Client(t)), newStore(t, etcd.Client(t))
	ctx := context.Background()
	hold := func(s interface {
		HoldTurn(context.Context, string, string, time.Duration) (bool, error)
	}, holder string, want bool) {
		t.Helper()
		got, err := s.HoldTurn(ctx, "evictor", holder, 2*time.Second)
		if err != nil || got != want {
			t.Fatalf("HoldTurn(%s) = %v, %v; want %v", holder, got, err, want)
		}
	}
	hold(a, "a", true)
	hold(b, "b", false)
	hold(a, "a", true) // kept
	hold(b, "b", false)
	if got, err := a.HoldTurn(ctx, "other", "b", 2*time.Second); !got || err != nil {
		t.Fatalf("HoldTurn of another turn = %v, %v; want true", got, err)
	}
	// a stops calling: its lease expires, and b takes the turn.
	testenv.WaitUntil(t, 10*time.Second, "b takes the turn", func() bool {
		got, err := b.HoldTurn(ctx, "evictor", "b", 2*time.Second)
		return err == nil && got
	})
	hold(a, "a", false)
}
