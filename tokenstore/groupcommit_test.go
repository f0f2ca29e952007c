package tokenstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

// TestGroupCommitBatchesConcurrentRaises: many writers raising their own
// marks at once, each with a new, larger token every time, are all
// accepted, and their raises take fewer etcd requests than there are
// raises: they share transactions. Every mark ends at the last token.
func TestGroupCommitBatchesConcurrentRaises(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client, requests := etcd.CountingClient(t)
	s := newGroupStore(t, client, false)
	ctx := context.Background()
	const writers, rounds = 128, 4
	resource := func(i int) api.Resource { return api.Resource(fmt.Sprintf("s3/b/raiser-%d", i)) }
	before := requests.Count()
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			for round := range rounds {
				if err := s.FenceCheck(ctx, resource(i), api.Token(round+1)); err != nil {
					t.Errorf("%s: FenceCheck(%d) = %v, want accepted", resource(i), round+1, err)
					return
				}
			}
		})
	}
	wg.Wait()
	raises := int64(writers * rounds)
	used := requests.Count() - before
	t.Logf("%d concurrent raises took %d etcd requests", raises, used)
	if used >= raises {
		t.Errorf("%d concurrent raises took %d etcd requests; want fewer (group commit)", raises, used)
	}
	for i := range writers {
		if hwm, err := s.HighWaterMark(ctx, resource(i)); err != nil || hwm != rounds {
			t.Errorf("HighWaterMark(%s) = %d, %v; want %d", resource(i), hwm, err, rounds)
		}
	}
}

// TestGroupCommitLoneWriterSendsAlone: a writer alone sends its raise at
// once, in one transaction of its own: one etcd request per raise, and
// no waiting for company (the call returns without any other check
// coming along).
func TestGroupCommitLoneWriterSendsAlone(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client, requests := etcd.CountingClient(t)
	s := newStore(t, client)
	ctx := context.Background()
	for token := api.Token(1); token <= 5; token++ {
		before := requests.Count()
		if err := s.FenceCheck(ctx, "s3/b/alone", token); err != nil {
			t.Fatalf("FenceCheck(%d) = %v", token, err)
		}
		if used := requests.Count() - before; used != 1 {
			t.Fatalf("a lone raise to %d took %d etcd requests; want 1", token, used)
		}
	}
	var stale *api.StaleTokenError
	if err := s.FenceCheck(ctx, "s3/b/alone", 3); !errors.As(err, &stale) || stale.HighWaterMark != 5 {
		t.Fatalf("FenceCheck(3) after 5 = %v; want stale with mark 5", err)
	}
}

// TestGroupCommitDisabled: with DisableGroupCommit, concurrent raises
// take one transaction each, as before group commit.
func TestGroupCommitDisabled(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client, requests := etcd.CountingClient(t)
	s := newGroupStore(t, client, true)
	ctx := context.Background()
	const writers = 64
	before := requests.Count()
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			if err := s.FenceCheck(ctx, api.Resource(fmt.Sprintf("s3/b/w%d", i)), 1); err != nil {
				t.Errorf("FenceCheck = %v", err)
			}
		})
	}
	wg.Wait()
	if used := requests.Count() - before; used != writers {
		t.Errorf("%d concurrent raises without group commit took %d etcd requests; want %d", writers, used, writers)
	}
}

// newGroupStore is newStore with a longer request timeout, for tests that
// run many checks at once on a shared machine, with or without group
// commit.
func newGroupStore(tb testing.TB, client *clientv3.Client, disable bool) *tokenstore.Store {
	tb.Helper()
	s, err := tokenstore.New(client, tokenstore.Config{Prefix: "test/", RequestTimeout: 10 * time.Second, DisableGroupCommit: disable})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
