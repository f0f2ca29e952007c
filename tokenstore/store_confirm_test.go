package tokenstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// TestConcurrentConfirmations runs many holders' repeated fence checks at
// once while another gateway moves some of their marks on: every check of
// an unmoved mark is accepted, every check of a moved one is refused with
// the new mark, etcd's revision moves only by the other gateway's writes,
// and the confirmations took fewer requests than there were checks (they
// share read-only transactions).
func TestConcurrentConfirmations(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client, requests := etcd.CountingClient(t)
	s := newStore(t, client)
	other := newStore(t, etcd.Client(t))
	ctx := context.Background()
	const holders, rounds = 32, 20
	resource := func(i int) api.Resource { return api.Resource(fmt.Sprintf("s3/b/holder-%d", i)) }
	for i := range holders {
		if err := s.FenceCheck(ctx, resource(i), 5); err != nil {
			t.Fatal(err)
		}
	}
	// The other gateway takes every fourth resource with token 6.
	for i := 0; i < holders; i += 4 {
		if err := other.FenceCheck(ctx, resource(i), 6); err != nil {
			t.Fatal(err)
		}
	}
	revision, err := client.Get(ctx, "any")
	if err != nil {
		t.Fatal(err)
	}
	before := requests.Count()
	var wg sync.WaitGroup
	for i := range holders {
		wg.Go(func() {
			for range rounds {
				err := s.FenceCheck(ctx, resource(i), 5)
				var stale *api.StaleTokenError
				switch {
				case i%4 != 0 && err != nil:
					t.Errorf("%s: FenceCheck(5) = %v, want accepted", resource(i), err)
					return
				case i%4 == 0 && (!errors.As(err, &stale) || stale.HighWaterMark != 6):
					t.Errorf("%s: FenceCheck(5) = %v, want stale with mark 6", resource(i), err)
					return
				}
			}
		})
	}
	wg.Wait()
	checks := int64(holders * rounds)
	if used := requests.Count() - before; used >= checks {
		t.Errorf("%d concurrent fence checks took %d etcd requests; want fewer (shared confirmations)", checks, used)
	}
	after, err := client.Get(ctx, "any")
	if err != nil {
		t.Fatal(err)
	}
	if after.Header.Revision != revision.Header.Revision {
		t.Errorf("etcd's revision moved from %d to %d: a repeated token was written", revision.Header.Revision, after.Header.Revision)
	}
}
