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
}

// sentinelPrefix starts keys the harness writes under the watched prefix
// to learn that the watcher has caught up. No resource starts with "~".
const sentinelPrefix = HWMPrefix + "~sentinel/"

// Watcher records every change of every high-water mark from revision 1
// on, live, through member crashes and partitions (it resumes after the
// last revision it saw). Compactions never pass it (the nemesis compacts
// at most to Progress), so the record is complete; if a resume ever finds
// its revision compacted, Err says so and the checks that need the record
// fail.
type Watcher struct {
	client *clientv3.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	events   map[string][]HWMEvent // by etcd key
	progress int64
	err      error
	waiters  map[int64][]chan struct{}
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
					w.mu.Lock()
					w.err = fmt.Errorf("watch from revision %d: %w", next, err)
					w.mu.Unlock()
					cancel()
					return
				}
				break // resume below
			}
			w.mu.Lock()
			for _, ev := range resp.Events {
				key := string(ev.Kv.Key)
				if !strings.HasPrefix(key, sentinelPrefix) {
					e := HWMEvent{Revision: ev.Kv.ModRevision, Deleted: ev.Type == clientv3.EventTypeDelete}
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
			if next-1 > w.progress {
				w.progress = next - 1
				for rev, chans := range w.waiters {
					if rev <= w.progress {
						for _, c := range chans {
							close(c)
						}
						delete(w.waiters, rev)
					}
				}
			}
			w.mu.Unlock()
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
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
func (w *Watcher) Sync(ctx context.Context, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	resp, err := w.client.Put(ctx, sentinelPrefix+"sync", time.Now().String())
	if err != nil {
		return fmt.Errorf("watcher sync: %w", err)
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
