package robustness

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"fencegate/api"
	"fencegate/internal/testenv"
)

// TestWatcherResyncsAfterCompaction compacts etcd past the watcher twice:
// once before it starts (its watch from revision 1 is refused), once
// while its link to etcd is down (its resumed watch is refused). Each time
// the watcher must resynchronize from a read of the marks, record what it
// read as resync events (so that the checkers know changes were lost
// there), keep no error, and go on recording live changes.
func TestWatcherResyncsAfterCompaction(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	admin := etcd.Client(t)
	link, err := NewProxy(ProxyConfig{Name: "watcher", Target: strings.TrimPrefix(etcd.Endpoints()[0], "http://"), Source: "watcher"})
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{link.URL()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k1, k2 := HWMPrefix+"s3/b/k1", HWMPrefix+"s3/b/k2"
	put := func(key string, token api.Token) {
		t.Helper()
		if _, err := admin.Put(ctx, key, fmt.Sprintf("%020d", token)); err != nil {
			t.Fatal(err)
		}
	}
	compact := func() {
		t.Helper()
		resp, err := admin.Get(ctx, "compaction-probe")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Compact(ctx, resp.Header.Revision); err != nil {
			t.Fatal(err)
		}
	}
	var watcher *Watcher
	check := func(when string, want map[string][]HWMEvent) {
		t.Helper()
		w := watcher
		if err := w.Sync(ctx, 15*time.Second); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if err := w.Err(); err != nil {
			t.Fatalf("%s: Err() = %v; want nil (resynchronized)", when, err)
		}
		got := w.Events(HWMPrefix + "s3/")
		for key, events := range want {
			if len(got[key]) != len(events) {
				t.Fatalf("%s: events of %s = %+v; want %+v", when, key, got[key], events)
			}
			for i, e := range events {
				g := got[key][i]
				if g.Token != e.Token || g.Deleted != e.Deleted || g.Resync != e.Resync {
					t.Errorf("%s: event %d of %s = %+v; want token %d deleted %t resync %t", when, i, key, g, e.Token, e.Deleted, e.Resync)
				}
			}
		}
	}

	put(k1, 5)
	put(k1, 7)
	put(k2, 3)
	compact()
	watcher = StartWatcher(client)
	defer watcher.Close()
	check("started after a compaction", map[string][]HWMEvent{k1: {{Token: 7, Resync: true}}, k2: {{Token: 3, Resync: true}}})
	put(k1, 8)
	check("live after the resync", map[string][]HWMEvent{k1: {{Token: 7, Resync: true}, {Token: 8}}})

	link.SetFault(LinkFault{Drop: true})
	put(k1, 9)
	put(k1, 11)
	if _, err := admin.Delete(ctx, k2); err != nil {
		t.Fatal(err)
	}
	compact()
	link.Heal()
	check("resumed past a compaction", map[string][]HWMEvent{
		k1: {{Token: 7, Resync: true}, {Token: 8}, {Token: 11, Resync: true}},
		k2: {{Token: 3, Resync: true}, {Deleted: true, Resync: true}},
	})
	if got := watcher.Resyncs(); got != 2 {
		t.Errorf("Resyncs() = %d; want 2", got)
	}
}

// TestWatcherSyncAfterItsConnectionDied: Sync's sentinel write reaches
// etcd, its answer does not, and the connection dies under it (as it does
// when a link is dropped, a member restarts, or a busy machine lets the
// client notice a dropped connection only once it has sent the next
// request on it). etcd's client does not repeat a write whose connection
// died after it was sent; Sync's write is safe to repeat (the sentinel's
// value does not matter, only the revision of a write the watcher must
// reach), so Sync must repeat it on the new connection and succeed.
func TestWatcherSyncAfterItsConnectionDied(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	admin := etcd.Client(t)
	link, err := NewProxy(ProxyConfig{Name: "watcher", Target: strings.TrimPrefix(etcd.Endpoints()[0], "http://"), Source: "watcher"})
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{link.URL()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	watcher := StartWatcher(client)
	defer watcher.Close()
	if err := watcher.Sync(ctx, 15*time.Second); err != nil {
		t.Fatalf("Sync on a healthy link: %v", err)
	}
	before, err := admin.Get(ctx, sentinelPrefix+"sync")
	if err != nil || len(before.Kvs) != 1 {
		t.Fatalf("sentinel after the first Sync = %v, %v", before, err)
	}

	link.SetFault(LinkFault{BlackholeRx: true})
	synced := make(chan error, 1)
	go func() { synced <- watcher.Sync(ctx, 30*time.Second) }()
	// Wait until the sentinel write has landed: its answer is held.
	for {
		resp, err := admin.Get(ctx, sentinelPrefix+"sync")
		if err != nil {
			t.Fatal(err)
		}
		if resp.Kvs[0].ModRevision > before.Kvs[0].ModRevision {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the sentinel write never reached etcd")
		}
		time.Sleep(20 * time.Millisecond)
	}
	link.SetFault(LinkFault{Drop: true})
	link.Heal()
	if err := <-synced; err != nil {
		t.Fatalf("Sync whose write's connection died: %v; want it to write again and succeed", err)
	}
	if err := watcher.Err(); err != nil {
		t.Errorf("Err() = %v; want nil", err)
	}
}
