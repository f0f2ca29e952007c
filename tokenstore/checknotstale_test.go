package tokenstore_test

import (
	"context"
	"errors"
	"testing"

	"fencegate/api"
	"fencegate/internal/testenv"
)

// TestCheckNotStaleWritesNothing: CheckNotStale refuses a token below the
// mark as FenceCheck does, accepts one at or above it, and writes nothing
// (no mark created or raised: etcd's revision does not move), under each
// token check: "held" still refuses a token that is not the holder's,
// "plausible" one above etcd's revision.
func TestCheckNotStaleWritesNothing(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	s := newCheckedStore(t, client)
	ctx := context.Background()
	holder := mustAcquire(t, s, "report", newSession(t, s, 60))
	for _, bucket := range []string{"open", "plausible", "held"} {
		absent := api.Resource("s3/" + bucket + "/absent")
		marked := api.Resource("s3/" + bucket + "/marked")
		if err := s.FenceCheck(ctx, marked, holder); err != nil {
			t.Fatalf("FenceCheck(%s, %d) = %v", marked, holder, err)
		}
		before := etcdRevision(t, client)
		var stale *api.StaleTokenError
		if err := s.CheckNotStale(ctx, marked, holder-1); !errors.As(err, &stale) || stale.HighWaterMark != holder {
			if bucket != "held" || !errors.Is(err, api.ErrLockNotHeld) {
				t.Fatalf("%s: CheckNotStale(%s, %d) = %v; want stale at %d", bucket, marked, holder-1, err, holder)
			}
		}
		for _, res := range []api.Resource{absent, marked} {
			if err := s.CheckNotStale(ctx, res, holder); err != nil {
				t.Fatalf("%s: CheckNotStale(%s, holder's %d) = %v; want accepted", bucket, res, holder, err)
			}
		}
		if after := etcdRevision(t, client); after != before {
			t.Fatalf("%s: CheckNotStale moved etcd's revision from %d to %d; want no write", bucket, before, after)
		}
		if hwm, err := s.HighWaterMark(ctx, absent); err != nil || hwm != 0 {
			t.Fatalf("%s: HighWaterMark(%s) = %d, %v; want 0: no mark", bucket, absent, hwm, err)
		}
		if _, ok := s.CachedHighWaterMark(absent); ok {
			t.Fatalf("%s: CheckNotStale taught the cache a mark that does not exist", bucket)
		}
	}
	// The token checks still apply.
	if err := s.CheckNotStale(ctx, "s3/held/absent", holder+1); !errors.Is(err, api.ErrLockNotHeld) {
		t.Fatalf("CheckNotStale(held, not the holder's) = %v; want lock not held", err)
	}
	if err := s.CheckNotStale(ctx, "s3/plausible/absent", api.MaxToken); !errors.Is(err, api.ErrImplausibleToken) {
		t.Fatalf("CheckNotStale(plausible, MaxToken) = %v; want implausible", err)
	}
}
