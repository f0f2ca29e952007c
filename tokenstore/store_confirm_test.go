package tokenstore_test

import (
	"context"
	"errors"
	"testing"

	"fencegate/api"
	"fencegate/internal/testenv"
)

// TestRepeatedTokenWritesNothing: once a store has accepted a token, the
// same holder's next fence checks confirm the mark with a read-only
// transaction: accepted, and etcd's revision does not move (no Raft
// write). When the mark has moved on (another gateway accepted a newer
// token) or is gone (a lost etcd), the write transaction decides as
// before.
func TestRepeatedTokenWritesNothing(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	s := newStore(t, client)
	other := newStore(t, etcd.Client(t)) // another gateway
	ctx := context.Background()
	const res = api.Resource("s3/b/k")
	revision := func() int64 {
		t.Helper()
		resp, err := client.Get(ctx, "any")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}

	if err := s.FenceCheck(ctx, res, 7); err != nil {
		t.Fatalf("FenceCheck(7) = %v", err)
	}
	before := revision()
	for range 5 {
		if err := s.FenceCheck(ctx, res, 7); err != nil {
			t.Fatalf("FenceCheck(7) again = %v", err)
		}
	}
	if after := revision(); after != before {
		t.Fatalf("5 repeated fence checks moved etcd's revision from %d to %d; want no write", before, after)
	}

	if err := other.FenceCheck(ctx, res, 8); err != nil {
		t.Fatalf("other: FenceCheck(8) = %v", err)
	}
	var stale *api.StaleTokenError
	if err := s.FenceCheck(ctx, res, 7); !errors.As(err, &stale) || stale.HighWaterMark != 8 {
		t.Fatalf("FenceCheck(7) after another store accepted 8 = %v; want stale with mark 8", err)
	}

	// Lose the mark: the write transaction creates it again.
	if err := s.FenceCheck(ctx, "s3/b/lost", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Delete(ctx, "test/hwm/s3/b/lost"); err != nil {
		t.Fatal(err)
	}
	if err := s.FenceCheck(ctx, "s3/b/lost", 3); err != nil {
		t.Fatalf("FenceCheck(3) after the mark was lost = %v", err)
	}
	if hwm, err := s.HighWaterMark(ctx, "s3/b/lost"); err != nil || hwm != 3 {
		t.Fatalf("HighWaterMark after the check = %d, %v; want 3 (re-created)", hwm, err)
	}
}
