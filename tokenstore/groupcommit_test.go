package tokenstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// batchSizes records what Config.ObserveFenceBatch is called with.
type batchSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (b *batchSizes) observe(size int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sizes = append(b.sizes, size)
}

func (b *batchSizes) observed() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.sizes)
}

// TestGroupCommitObservesBatchSizes: Config.ObserveFenceBatch sees 1 for
// a lone raise, and, under many concurrent raises, at least one batch of
// more than one check, the sizes adding up to the raises that wrote.
func TestGroupCommitObservesBatchSizes(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	var batches batchSizes
	s, err := tokenstore.New(etcd.Client(t), tokenstore.Config{Prefix: "test/", RequestTimeout: 10 * time.Second, ObserveFenceBatch: batches.observe})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.FenceCheck(ctx, "s3/b/alone", 1); err != nil {
		t.Fatalf("FenceCheck(1) = %v", err)
	}
	if got := batches.observed(); !slices.Equal(got, []int{1}) {
		t.Fatalf("a lone raise observed batch sizes %v; want [1]", got)
	}

	const writers, rounds = 128, 4
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			resource := api.Resource(fmt.Sprintf("s3/b/raiser-%d", i))
			for round := range rounds {
				if err := s.FenceCheck(ctx, resource, api.Token(round+1)); err != nil {
					t.Errorf("%s: FenceCheck(%d) = %v, want accepted", resource, round+1, err)
					return
				}
			}
		})
	}
	wg.Wait()
	sizes := batches.observed()[1:]
	total, largest := 0, 0
	for _, size := range sizes {
		total += size
		largest = max(largest, size)
	}
	t.Logf("%d concurrent raises went in %d transactions, the largest of %d checks", writers*rounds, len(sizes), largest)
	if total != writers*rounds {
		t.Errorf("observed batch sizes add up to %d; want %d (one per raise)", total, writers*rounds)
	}
	if largest < 2 {
		t.Errorf("largest observed batch = %d; want more than 1 (group commit)", largest)
	}
}
