package tokenstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

// compactionWait bounds every wait of the compaction tests: far longer
// than any of them takes when the waiter resynchronizes.
const compactionWait = 30 * time.Second

// hookedWatcher passes watches on to etcd, and for keys under prefix calls
// before (with the count of such watches so far, from 1) before the watch
// starts, and counts the watches etcd started and those it refused because
// their start revision was compacted.
type hookedWatcher struct {
	clientv3.Watcher
	prefix string
	before func(n int64)

	calls, created, compacted atomic.Int64
}

func (w *hookedWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	if !strings.HasPrefix(key, w.prefix) {
		return w.Watcher.Watch(ctx, key, opts...)
	}
	n := w.calls.Add(1)
	if w.before != nil {
		w.before(n)
	}
	in := w.Watcher.Watch(ctx, key, append(opts, clientv3.WithCreatedNotify())...)
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		defer func() {
			for range in { // until the client closes it
			}
		}()
		for wr := range in {
			if errors.Is(wr.Err(), rpctypes.ErrCompacted) {
				w.compacted.Add(1)
			}
			if wr.Created && wr.Err() == nil && len(wr.Events) == 0 {
				w.created.Add(1)
				continue // the caller did not ask for it
			}
			select {
			case out <- wr:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// hookWatches makes client's watches of keys under prefix go through a
// hookedWatcher, and returns it.
func hookWatches(client *clientv3.Client, prefix string, before func(n int64)) *hookedWatcher {
	w := &hookedWatcher{Watcher: client.Watcher, prefix: prefix, before: before}
	client.Watcher = w
	return w
}

// compactAll writes n revisions to an unrelated key, then compacts etcd's
// history up to the newest revision, waiting until the compaction is
// applied to the database, and returns that revision.
func compactAll(tb testing.TB, client *clientv3.Client, n int) int64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), compactionWait)
	defer cancel()
	var rev int64
	for i := range n {
		resp, err := client.Put(ctx, "filler", fmt.Sprint(i))
		if err != nil {
			tb.Fatalf("Put(filler): %v", err)
		}
		rev = resp.Header.Revision
	}
	if _, err := client.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		tb.Fatalf("Compact(%d): %v", rev, err)
	}
	return rev
}

type acquireResult struct {
	grant api.LockGrant
	err   error
}

// TestLockWaiterSurvivesCompaction: a waiter for a lock watches the
// deletion of the key ahead of it from a revision R. When etcd compacts
// past R, the waiter still gets the lock once it is released, and not
// before: whether the release itself was compacted away before the watch
// started (etcd refuses the watch as compacted: the waiter must look
// again), or the compaction came while the watch ran.
func TestLockWaiterSurvivesCompaction(t *testing.T) {
	for _, tc := range []struct {
		name string
		// releasedBeforeWatch: the holder releases, and etcd compacts
		// the release away, after the waiter read the queue but before
		// its watch starts. Otherwise the watch runs through the
		// compaction and the release comes after it.
		releasedBeforeWatch bool
	}{
		{name: "release compacted before the watch starts", releasedBeforeWatch: true},
		{name: "compaction while watching", releasedBeforeWatch: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			etcd := testenv.StartEtcd(t)
			client := etcd.Client(t)
			watching := make(chan struct{})
			proceed := make(chan struct{})
			watches := hookWatches(client, "test/locks/", func(n int64) {
				if n != 1 {
					return
				}
				close(watching)
				if tc.releasedBeforeWatch {
					<-proceed
				}
			})
			s, err := tokenstore.New(client, tokenstore.Config{Prefix: "test/", RequestTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			holder, waiter := newSession(t, s, 60), newSession(t, s, 60)
			held := mustAcquire(t, s, "l", holder)

			ctx, cancel := context.WithTimeout(context.Background(), compactionWait)
			defer cancel()
			result := make(chan acquireResult, 1)
			go func() {
				g, err := s.Acquire(ctx, "l", waiter, anonymous, compactionWait)
				result <- acquireResult{g, err}
			}()
			select {
			case <-watching:
			case r := <-result:
				t.Fatalf("Acquire(l, waiter) while held = %+v, %v; want it to wait", r.grant, r.err)
			case <-ctx.Done():
				t.Fatal("the waiter never watched the key ahead of it")
			}
			release := func() {
				if ok, err := s.Release(ctx, "l", held, anonymous); err != nil || !ok {
					t.Fatalf("Release(l, %d) = %v, %v; want true", held, ok, err)
				}
			}
			if tc.releasedBeforeWatch {
				compactAll(t, client, 20)
				release()
				compactAll(t, client, 20)
				close(proceed)
			} else {
				testenv.WaitUntil(t, compactionWait, "etcd started the waiter's watch", func() bool {
					return watches.created.Load() > 0
				})
				compactAll(t, client, 50)
				select {
				case r := <-result:
					t.Fatalf("Acquire(l, waiter) returned %+v, %v while the lock was held", r.grant, r.err)
				default:
				}
				if st := lockStateWith(t, s, "l", holder); st.Holder != held || st.QueueLength != 2 {
					t.Fatalf("LockState after the compaction = %+v; want held by token %d, one waiter", st, held)
				}
				release()
			}

			var r acquireResult
			select {
			case r = <-result:
			case <-ctx.Done():
				t.Fatalf("the waiter is still waiting %v after the release (%d watches, %d refused as compacted)",
					compactionWait, watches.calls.Load(), watches.compacted.Load())
			}
			if r.err != nil || r.grant.Session != waiter || r.grant.Token <= held {
				t.Fatalf("Acquire(l, waiter) = %+v, %v; want a grant to %s above token %d", r.grant, r.err, waiter, held)
			}
			if st := lockStateWith(t, s, "l", waiter); st.Holder != r.grant.Token || st.QueueLength != 1 {
				t.Fatalf("LockState after the grant = %+v; want held by the waiter's token %d alone", st, r.grant.Token)
			}
			if tc.releasedBeforeWatch && watches.compacted.Load() == 0 {
				t.Fatal("etcd did not refuse the waiter's watch as compacted: the test did not force what it tests")
			}
		})
	}
}

type admitResult struct {
	admission api.Admission
	err       error
}

// TestPartnerWaiterSurvivesCompaction: an admission waiting for the
// in-flight marker of a busy resource is admitted once the marker goes,
// when etcd compacted its history meanwhile: the deletion compacted away
// before the wait's watch starts, or the marker itself last written before
// the compaction (then a watch from the marker's own revision cannot
// start at all: the waiter must watch from its read, not spin).
func TestPartnerWaiterSurvivesCompaction(t *testing.T) {
	for _, tc := range []struct {
		name string
		// compactBeforeWait compacts past the marker's revision before
		// the waiter comes; otherwise the holder finishes and etcd
		// compacts that away after the waiter read the marker and before
		// its watch starts.
		compactBeforeWait bool
	}{
		{name: "finish compacted before the watch starts"},
		{name: "marker older than the compaction", compactBeforeWait: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			etcd := testenv.StartEtcd(t)
			client := etcd.Client(t)
			watching := make(chan struct{})
			proceed := make(chan struct{})
			watches := hookWatches(client, "test/inflight/", func(n int64) {
				if n != 1 {
					return
				}
				close(watching)
				if !tc.compactBeforeWait {
					<-proceed
				}
			})
			_, p := newPartners(t, client, 5*time.Second)
			first := admission(5, 0)
			first.Hold = time.Minute // the marker stays until Finish
			holder := mustAdmit(t, p, first)
			if tc.compactBeforeWait {
				compactAll(t, client, 50)
			}

			ctx, cancel := context.WithTimeout(context.Background(), compactionWait)
			defer cancel()
			result := make(chan admitResult, 1)
			go func() {
				adm, err := p.AdmitPartner(ctx, admission(7, compactionWait))
				result <- admitResult{adm, err}
			}()
			t.Cleanup(func() { // on failure: end the waiter before the client closes
				cancel()
				<-result
			})
			select {
			case <-watching:
			case r := <-result:
				t.Fatalf("AdmitPartner(7) while 5 is in flight = %+v, %v; want it to wait", r.admission, r.err)
			case <-ctx.Done():
				t.Fatal("the waiter never watched the marker")
			}
			if tc.compactBeforeWait {
				// The waiter read the marker (written before the
				// compaction) and watches for its deletion.
				mustFinish(t, holder, nil)
			} else {
				compactAll(t, client, 20)
				mustFinish(t, holder, nil)
				compactAll(t, client, 20)
				close(proceed)
			}

			var r admitResult
			select {
			case r = <-result:
			case <-ctx.Done():
				t.Fatalf("the waiter is still waiting %v after Finish (%d watches, %d refused as compacted)",
					compactionWait, watches.calls.Load(), watches.compacted.Load())
			}
			if r.err != nil || r.admission.Finish == nil {
				t.Fatalf("AdmitPartner(7) after Finish = %+v, %v; want admitted", r.admission, r.err)
			}
			mustFinish(t, r.admission, nil)
			result <- r // for the cleanup
			if !tc.compactBeforeWait && watches.compacted.Load() == 0 {
				t.Fatal("etcd did not refuse the waiter's watch as compacted: the test did not force what it tests")
			}
			// The waiter read the marker after the compaction: a watch
			// from that read starts within the history etcd kept. One
			// from the marker's own revision would be refused, again and
			// again, the waiter re-reading in a loop until Finish.
			if n := watches.compacted.Load(); tc.compactBeforeWait && n != 0 {
				t.Errorf("etcd refused %d of the waiter's %d watches of the marker as compacted; want it to watch once, from its read", n, watches.calls.Load())
			}
		})
	}
}
