package robustness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"fencegate/api"
)

// HWMEvent is one change of a high-water mark key, as etcd's watch
// reported it.
type HWMEvent struct {
	Revision int64
	// Deleted says the key was deleted (a mark gone back to zero).
	Deleted bool
	Token   api.Token
	// Raw is the stored value, when it does not decode.
	Raw string
	// Resync says the event is the key's value as read after the watch
	// met a compacted revision: changes between the previous event and
	// this one were compacted away before the watcher saw them.
	Resync bool
	// After and Before bound when the change happened: it was not yet
	// in etcd at After, and was by Before. Zero means unknown (no bound).
	After, Before time.Time
}

// sentinelPrefix starts keys the harness writes under the watched prefix
// to learn that the watcher has caught up. No resource starts with "~".
const sentinelPrefix = HWMPrefix + "~sentinel/"

// Watcher records every change of every high-water mark from revision 1
// on, live, through member crashes and partitions (it resumes after the
// last revision it saw). A live watch is not disturbed by compaction, but
// a resume can find its revision compacted (the compaction histories
// compact at etcd's current revision, whatever the watcher has seen):
// then the watcher resynchronizes. It reads every mark, records as a
// Resync event each one changed since the last revision it saw (and a
// Resync delete for each one it knew that is gone), and watches on from
// the read's revision. The changes in between are lost to the record, and
// the Resync events say where; Resyncs counts them. Err is set only if the
// watcher stops for another reason.
type Watcher struct {
	client *clientv3.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	events   map[string][]HWMEvent // by etcd key
	progress int64
	err      error
	waiters  map[int64][]chan struct{}
	resyncs  int
}

// StartWatcher starts watching every key under HWMPrefix from revision 1.
func StartWatcher(client *clientv3.Client) *Watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{client: client, cancel: cancel, done: make(chan struct{}), events: make(map[string][]HWMEvent)}
	go w.run(ctx)
	return w
}

func (w *Watcher) run(ctx context.Context) {
	defer close(w.done)
	next := int64(1)
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		ch := w.client.Watch(wctx, HWMPrefix, clientv3.WithPrefix(), clientv3.WithRev(next))
		for resp := range ch {
			if err := resp.Err(); err != nil {
				if errors.Is(err, rpctypes.ErrCompacted) {
					if rev, err := w.resync(ctx, next); err == nil {
						next = rev + 1
					}
				}
				break // resume below (a failed resync meets the compaction again)
			}
			received := time.Now() // every event below had happened by now
			w.mu.Lock()
			for _, ev := range resp.Events {
				key := string(ev.Kv.Key)
				if !strings.HasPrefix(key, sentinelPrefix) {
					e := HWMEvent{Revision: ev.Kv.ModRevision, Deleted: ev.Type == clientv3.EventTypeDelete, Before: received}
					if !e.Deleted {
						t, err := decodeStoredToken(ev.Kv.Value)
						if err != nil {
							e.Raw = string(ev.Kv.Value)
						}
						e.Token = t
					}
					w.events[key] = append(w.events[key], e)
				}
				if ev.Kv.ModRevision >= next {
					next = ev.Kv.ModRevision + 1
				}
			}
			w.advance(next - 1)
			w.mu.Unlock()
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// advance notes that the record is complete up to revision rev, and wakes
// the Syncs waiting for it. w.mu must be held.
func (w *Watcher) advance(rev int64) {
	if rev <= w.progress {
		return
	}
	w.progress = rev
	for r, chans := range w.waiters {
		if r <= w.progress {
			for _, c := range chans {
				close(c)
			}
			delete(w.waiters, r)
		}
	}
}

// resync reads every mark after a watch from revision from was refused as
// compacted, records what changed since (see Watcher), and returns the
// read's revision, from which the record goes on.
func (w *Watcher) resync(ctx context.Context, from int64) (int64, error) {
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := w.client.Get(gctx, HWMPrefix, clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	received := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	present := make(map[string]bool)
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		present[key] = true
		if strings.HasPrefix(key, sentinelPrefix) || kv.ModRevision < from {
			continue // unchanged since the last revision seen: nothing lost
		}
		e := HWMEvent{Revision: kv.ModRevision, Resync: true, Before: received}
		t, err := decodeStoredToken(kv.Value)
		if err != nil {
			e.Raw = string(kv.Value)
		}
		e.Token = t
		w.events[key] = append(w.events[key], e)
	}
	for key, events := range w.events {
		if !present[key] && !events[len(events)-1].Deleted {
			w.events[key] = append(w.events[key], HWMEvent{Revision: resp.Header.Revision, Deleted: true, Resync: true, Before: received})
		}
	}
	w.resyncs++
	w.advance(resp.Header.Revision)
	return resp.Header.Revision, nil
}

// Progress returns the last revision the watcher has seen.
func (w *Watcher) Progress() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.progress
}

// Err returns why the record is incomplete, or nil.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Sync writes a sentinel key and waits, at most bound, until the watcher
// has seen it: then every change before it is recorded.
//
// The write is repeated while etcd is unavailable to it: a connection
// that dies after the write was sent (a link dropped, a member restarted,
// or on a busy machine a dropped connection the client has not noticed
// yet when it sends the write) leaves the write's outcome unknown, and
// etcd's client does not repeat a write then. Repeating this one is safe:
// the sentinel's value does not matter, only that the watcher reaches the
// revision of a write that was answered.
func (w *Watcher) Sync(ctx context.Context, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var resp *clientv3.PutResponse
	for {
		var err error
		resp, err = w.client.Put(ctx, sentinelPrefix+"sync", time.Now().String())
		if err == nil {
			break
		}
		if !unavailable(err) || ctx.Err() != nil {
			return fmt.Errorf("watcher sync: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("watcher sync: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	rev := resp.Header.Revision
	w.mu.Lock()
	if w.progress >= rev {
		w.mu.Unlock()
		return nil
	}
	if w.waiters == nil {
		w.waiters = make(map[int64][]chan struct{})
	}
	c := make(chan struct{})
	w.waiters[rev] = append(w.waiters[rev], c)
	w.mu.Unlock()
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("watcher sync: not at revision %d after %v (at %d; err %v)", rev, bound, w.Progress(), w.Err())
	}
}

// unavailable reports whether err says etcd was unreachable or lost the
// connection (gRPC's Unavailable, as a status or as one of etcd's own
// errors, such as no leader): the request may or may not have been
// applied.
func unavailable(err error) bool {
	var etcdErr rpctypes.EtcdError
	if errors.As(err, &etcdErr) {
		return etcdErr.Code() == codes.Unavailable
	}
	return status.Code(err) == codes.Unavailable
}

// Events returns the recorded events of every key that starts with
// prefix, by key.
func (w *Watcher) Events(prefix string) map[string][]HWMEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string][]HWMEvent)
	for k, evs := range w.events {
		if strings.HasPrefix(k, prefix) {
			out[k] = append([]HWMEvent(nil), evs...)
		}
	}
	return out
}

// Resyncs returns how many times the watcher met a compacted revision
// and resynchronized.
func (w *Watcher) Resyncs() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.resyncs
}

// Close stops the watcher.
func (w *Watcher) Close() {
	w.cancel()
	<-w.done
}

// decodeStoredToken reads a mark stored as a 20-digit zero-padded decimal,
// as tokenstore writes it.
func decodeStoredToken(b []byte) (api.Token, error) {
	if len(b) != 20 {
		return 0, fmt.Errorf("stored mark %q: want 20 digits", b)
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("stored mark %q: not digits", b)
		}
		n = n*10 + uint64(c-'0')
	}
	return api.Token(n), nil
}
