package tokenstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

// longWait is a lock wait that no passing test reaches.
const longWait = 60 * time.Second

// anonymous is the owner that a gateway without auth passes: "". Sessions
// that newSession creates belong to it.
var anonymous = new("")

func newSession(tb testing.TB, s *tokenstore.Store, ttl int64) api.SessionID {
	tb.Helper()
	sess, err := s.CreateSession(context.Background(), ttl, "")
	if err != nil {
		tb.Fatalf("CreateSession(%d): %v", ttl, err)
	}
	return sess.ID
}

func mustAcquire(tb testing.TB, s *tokenstore.Store, name string, session api.SessionID) api.Token {
	tb.Helper()
	g, err := s.Acquire(context.Background(), name, session, anonymous, longWait)
	if err != nil {
		tb.Fatalf("Acquire(%s, %s): %v", name, session, err)
	}
	if g.Name != name || g.Session != session || g.Token == 0 {
		tb.Fatalf("Acquire(%s, %s) = %+v", name, session, g)
	}
	return g.Token
}

func lockState(tb testing.TB, s *tokenstore.Store, name string) api.LockState {
	tb.Helper()
	return lockStateWith(tb, s, name, 0)
}

// lockStateWith reads lock name's state naming session, as an operator:
// with the holder's token when session holds the lock.
func lockStateWith(tb testing.TB, s *tokenstore.Store, name string, session api.SessionID) api.LockState {
	tb.Helper()
	st, err := s.LockState(context.Background(), name, session, nil)
	if err != nil {
		tb.Fatalf("LockState(%s, %s): %v", name, session, err)
	}
	return st
}

// waitForQueue polls until lock name's queue has n keys.
func waitForQueue(tb testing.TB, s *tokenstore.Store, name string, n int64) {
	tb.Helper()
	testenv.WaitUntil(tb, 30*time.Second, fmt.Sprintf("lock %s's queue has %d keys", name, n), func() bool { return lockState(tb, s, name).QueueLength == n })
}

// TestLockFIFOHundredAcquirers queues 100 acquirers on one lock, one after
// another, through two stores (two gateways) on one etcd. Each holder logs
// its interval on a logical clock. The grants must come in arrival order
// with strictly increasing tokens, no two intervals may overlap, and each
// release must wake exactly one waiter: 99 wake-ups for 100 grants, where a
// herd (every waiter watching the holder) would make thousands.
func TestLockFIFOHundredAcquirers(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	stores := []*tokenstore.Store{newStore(t, etcd.Client(t)), newStore(t, etcd.Client(t))}
	const n = 100
	type interval struct {
		arrival    int
		token      api.Token
		start, end int64 // on clock
	}
	var (
		clock     atomic.Int64
		holding   atomic.Int32
		mu        sync.Mutex
		intervals []interval
		allQueued = make(chan struct{})
		wg        sync.WaitGroup
	)
	for i := range n {
		s := stores[i%2]
		session := newSession(t, s, 120)
		wg.Go(func() {
			g, err := s.Acquire(context.Background(), "job", session, anonymous, longWait)
			if err != nil {
				t.Errorf("acquirer %d: Acquire: %v", i, err)
				return
			}
			iv := interval{arrival: i, token: g.Token, start: clock.Add(1)}
			if h := holding.Add(1); h != 1 {
				t.Errorf("acquirer %d (token %d): %d holders at once", i, g.Token, h)
			}
			if i == 0 {
				<-allQueued // hold until every acquirer is queued
			}
			time.Sleep(time.Millisecond)
			holding.Add(-1)
			iv.end = clock.Add(1)
			mu.Lock()
			intervals = append(intervals, iv)
			mu.Unlock()
			if ok, err := s.Release(context.Background(), "job", g.Token, anonymous); err != nil || !ok {
				t.Errorf("acquirer %d: Release(%d) = %v, %v; want true", i, g.Token, ok, err)
			}
		})
		// Arrival order: the next acquirer starts once this one is queued.
		waitForQueue(t, stores[0], "job", int64(i+1))
	}
	close(allQueued)
	wg.Wait()

	if len(intervals) != n {
		t.Fatalf("%d grants; want %d", len(intervals), n)
	}
	slices.SortFunc(intervals, func(a, b interval) int { return int(a.start - b.start) })
	for i, iv := range intervals {
		if iv.arrival != i {
			t.Fatalf("grant %d went to acquirer %d; want arrival order", i, iv.arrival)
		}
		if i == 0 {
			continue
		}
		prev := intervals[i-1]
		if iv.token <= prev.token {
			t.Errorf("grant %d has token %d after token %d; want strictly increasing", i, iv.token, prev.token)
		}
		if iv.start < prev.end {
			t.Errorf("holders overlap: acquirer %d held [%d, %d], acquirer %d from %d", prev.arrival, prev.start, prev.end, iv.arrival, iv.start)
		}
	}
	wakeups := stores[0].LockStats().Wakeups + stores[1].LockStats().Wakeups
	t.Logf("%d grants, tokens %d..%d, %d wake-ups", n, intervals[0].token, intervals[n-1].token, wakeups)
	if wakeups != n-1 {
		t.Errorf("%d wake-ups for %d grants; want %d: each release wakes exactly one waiter", wakeups, n, n-1)
	}
	if st := lockState(t, stores[1], "job"); st.QueueLength != 0 || st.Held {
		t.Errorf("LockState after all released = %+v; want free and empty", st)
	}
}

// TestLockSessionExpiryFreesLock leaves a holder's session to expire: the
// waiter gets the lock after the TTL, with a larger token.
func TestLockSessionExpiryFreesLock(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newStore(t, etcd.Client(t))
	first := mustAcquire(t, s, "job", newSession(t, s, 1)) // never kept alive
	start := time.Now()
	secondSession := newSession(t, s, 60)
	second := mustAcquire(t, s, "job", secondSession)
	t.Logf("token %d expired; token %d acquired after %v", first, second, time.Since(start))
	if second <= first {
		t.Fatalf("token after expiry %d; want above %d", second, first)
	}
	if st := lockStateWith(t, s, "job", secondSession); st.Holder != second || st.QueueLength != 1 {
		t.Fatalf("LockState = %+v; want holder %d alone", st, second)
	}
}

// TestLockKeepAliveKeepsLock keeps a 1 s session alive for 3 s: the lock
// stays held, and a waiter times out.
func TestLockKeepAliveKeepsLock(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newStore(t, etcd.Client(t))
	ctx := context.Background()
	session := newSession(t, s, 1)
	token := mustAcquire(t, s, "job", session)
	for range 12 {
		sess, err := s.KeepAlive(ctx, session, anonymous)
		if err != nil || sess.ID != session || sess.TTL < 1 {
			t.Fatalf("KeepAlive = %+v, %v", sess, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if st := lockStateWith(t, s, "job", session); st.Holder != token {
		t.Fatalf("LockState = %+v; want holder %d", st, token)
	}
}

// TestLockReleaseOnlyOwnGrant: a retried release never removes a newer
// holder's key.
func TestLockReleaseOnlyOwnGrant(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newStore(t, etcd.Client(t))
	ctx := context.Background()
	a := mustAcquire(t, s, "job", newSession(t, s, 60))
	if ok, err := s.Release(ctx, "job", a, anonymous); err != nil || !ok {
		t.Fatalf("Release(%d) = %v, %v; want true", a, ok, err)
	}
	bSession := newSession(t, s, 60)
	b := mustAcquire(t, s, "job", bSession)
	if ok, err := s.Release(ctx, "job", a, anonymous); err != nil || ok {
		t.Fatalf("retried Release(%d) = %v, %v; want false, nil", a, ok, err)
	}
	for _, bogus := range []api.Token{b - 1, b + 1, 1, api.MaxToken} {
		if ok, err := s.Release(ctx, "job", bogus, anonymous); err != nil || ok {
			t.Fatalf("Release(%d) = %v, %v; want false, nil", bogus, ok, err)
		}
	}
	if st := lockStateWith(t, s, "job", bSession); st.Holder != b {
		t.Fatalf("LockState = %+v; want holder %d untouched", st, b)
	}
}

// TestLockAcquireAgainFindsPlace: a session that acquires again (a retried
// request) gets its own grant back.
func TestLockAcquireAgainFindsPlace(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newStore(t, etcd.Client(t))
	session := newSession(t, s, 60)
	a := mustAcquire(t, s, "job", session)
	if again := mustAcquire(t, s, "job", session); again != a {
		t.Fatalf("second Acquire = token %d; want %d", again, a)
	}
	if st := lockState(t, s, "job"); st.QueueLength != 1 {
		t.Fatalf("LockState = %+v; want one key", st)
	}
}

// TestLockWaitTimeoutLeavesQueue: a wait that runs out answers
// ErrLockTimeout and removes the waiter's place; a zero wait does not wait.
func TestLockWaitTimeoutLeavesQueue(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newStore(t, etcd.Client(t))
	ctx := context.Background()
	holderSession := newSession(t, s, 60)
	holder := mustAcquire(t, s, "job", holderSession)
	for _, wait := range []time.Duration{0, 200 * time.Millisecond} {
		_, err := s.Acquire(ctx, "job", newSession(t, s, 60), anonymous, wait)
		if !errors.Is(err, api.ErrLockTimeout) {
			t.Fatalf("Acquire(wait %v) on a held lock = %v; want ErrLockTimeout", wait, err)
		}
		if st := lockStateWith(t, s, "job", holderSession); st.QueueLength != 1 || st.Holder != holder {
			t.Fatalf("LockState after a timed-out wait = %+v; want only the holder %d", st, holder)
		}
	}
}

// TestLockCancelledWaitLeavesQueue: a waiter whose request is cancelled
// (the HTTP client went away) leaves the queue.
func TestLockCancelledWaitLeavesQueue(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newStore(t, etcd.Client(t))
	mustAcquire(t, s, "job", newSession(t, s, 60))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx, "job", newSession(t, s, 60), anonymous, longWait)
		done <- err
	}()
	waitForQueue(t, s, "job", 2)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire = %v; want context.Canceled", err)
	}
	waitForQueue(t, s, "job", 1)
}

// TestLockWaiterLeavingMiddle: when the waiter ahead leaves, the one behind
// it looks again and waits for the holder; it is served when the holder
// releases.
func TestLockWaiterLeavingMiddle(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newStore(t, etcd.Client(t))
	ctx := context.Background()
	holderSession := newSession(t, s, 60)
	holder := mustAcquire(t, s, "job", holderSession)
	middle := newSession(t, s, 60)
	middleDone := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx, "job", middle, anonymous, 300*time.Millisecond)
		middleDone <- err
	}()
	waitForQueue(t, s, "job", 2)
	lastGrant := make(chan api.LockGrant, 1)
	go func() {
		g, err := s.Acquire(ctx, "job", newSession(t, s, 60), anonymous, longWait)
		if err != nil {
			t.Errorf("last Acquire: %v", err)
		}
		lastGrant <- g
	}()
	waitForQueue(t, s, "job", 3)
	if err := <-middleDone; !errors.Is(err, api.ErrLockTimeout) {
		t.Fatalf("middle waiter = %v; want ErrLockTimeout", err)
	}
	waitForQueue(t, s, "job", 2)
	if st := lockStateWith(t, s, "job", holderSession); st.Holder != holder {
		t.Fatalf("LockState = %+v; want holder %d", st, holder)
	}
	if ok, err := s.Release(ctx, "job", holder, anonymous); err != nil || !ok {
		t.Fatalf("Release(%d) = %v, %v", holder, ok, err)
	}
	if g := <-lastGrant; g.Token <= holder {
		t.Fatalf("last waiter's token %d; want above %d", g.Token, holder)
	}
}

// TestLockRevokeSessionReleases: revoking a session releases its lock at
// once, and the session is gone for keepalives.
func TestLockRevokeSessionReleases(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newStore(t, etcd.Client(t))
	ctx := context.Background()
	session := newSession(t, s, 60)
	mustAcquire(t, s, "job", session)
	if err := s.RevokeSession(ctx, session, anonymous); err != nil {
		t.Fatal(err)
	}
	if st := lockState(t, s, "job"); st.QueueLength != 0 {
		t.Fatalf("LockState after revoke = %+v; want empty", st)
	}
	if _, err := s.KeepAlive(ctx, session, anonymous); !errors.Is(err, api.ErrSessionNotFound) {
		t.Fatalf("KeepAlive(revoked) = %v; want ErrSessionNotFound", err)
	}
	if err := s.RevokeSession(ctx, session, anonymous); !errors.Is(err, api.ErrSessionNotFound) {
		t.Fatalf("RevokeSession(revoked) = %v; want ErrSessionNotFound", err)
	}
	if _, err := s.Acquire(ctx, "job", session, anonymous, 0); !errors.Is(err, api.ErrSessionNotFound) {
		t.Fatalf("Acquire(revoked session) = %v; want ErrSessionNotFound", err)
	}
}

// TestLockWaiterWhoseSessionEndsIsAnsweredAtOnce: a waiter whose session
// is revoked, or expires, while the lock is held is answered
// api.ErrLockNotHeld when its place goes, not when the holder lets go or
// its wait runs out: it waited on a place that no longer exists, holding
// a request, a watch and a waiter's slot for nothing. The holder keeps the
// lock throughout.
func TestLockWaiterWhoseSessionEndsIsAnsweredAtOnce(t *testing.T) {
	tests := []struct {
		name string
		ttl  int64
		end  func(s *tokenstore.Store, session api.SessionID) error
	}{
		{"revoked", 60, func(s *tokenstore.Store, session api.SessionID) error {
			return s.RevokeSession(context.Background(), session, anonymous)
		}},
		{"expired", 3, func(*tokenstore.Store, api.SessionID) error {
			return nil // nobody keeps it alive
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			etcd := testenv.StartEtcd(t)
			s := newStore(t, etcd.Client(t))
			holderSession := newSession(t, s, 60)
			holder := mustAcquire(t, s, "job", holderSession)
			waiter := newSession(t, s, tt.ttl)
			done := make(chan error, 1)
			go func() {
				_, err := s.Acquire(context.Background(), "job", waiter, anonymous, longWait)
				done <- err
			}()
			waitForQueue(t, s, "job", 2)
			if err := tt.end(s, waiter); err != nil {
				t.Fatal(err)
			}
			// A deadlock detector, not a measure: the answer takes
			// milliseconds once the place is gone (seconds for the expiry);
			// without it, the wait runs out after longWait.
			select {
			case err := <-done:
				if !errors.Is(err, api.ErrLockNotHeld) {
					t.Fatalf("waiter whose session %s: %v; want %v", tt.name, err, api.ErrLockNotHeld)
				}
			case <-time.After(longWait / 2):
				t.Fatalf("waiter whose session %s still waiting after %v: it waits for the holder, not for its own place", tt.name, longWait/2)
			}
			if st := lockStateWith(t, s, "job", holderSession); st.Holder != holder || st.QueueLength != 1 {
				t.Fatalf("LockState = %+v; want holder %d alone", st, holder)
			}
		})
	}
}

func TestLockBadInput(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newStore(t, etcd.Client(t))
	ctx := context.Background()
	session := newSession(t, s, 60)
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"ttl too small", func() error { _, err := s.CreateSession(ctx, -1, ""); return err }, api.ErrInvalidRequest},
		{"ttl too large", func() error { _, err := s.CreateSession(ctx, api.MaxSessionTTL+1, ""); return err }, api.ErrInvalidRequest},
		{"name with slash", func() error { _, err := s.Acquire(ctx, "a/b", session, anonymous, 0); return err }, api.ErrInvalidRequest},
		{"empty name", func() error { _, err := s.Acquire(ctx, "", session, anonymous, 0); return err }, api.ErrInvalidRequest},
		{"no session", func() error { _, err := s.Acquire(ctx, "job", 0, anonymous, 0); return err }, api.ErrInvalidRequest},
		{"negative wait", func() error { _, err := s.Acquire(ctx, "job", session, anonymous, -1); return err }, api.ErrInvalidRequest},
		{"release token 0", func() error { _, err := s.Release(ctx, "job", 0, anonymous); return err }, api.ErrMalformedToken},
		{"state of bad name", func() error { _, err := s.LockState(ctx, "..", 0, nil); return err }, api.ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Errorf("got %v; want %v", err, tt.want)
			}
		})
	}
}

// TestLockTokenIsCreateRevision: the token is the etcd create revision of
// the holder's queue key, the same number concurrency.Mutex would use.
func TestLockTokenIsCreateRevision(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	s := newStore(t, client)
	session := newSession(t, s, 60)
	token := mustAcquire(t, s, "job", session)
	resp, err := client.Get(context.Background(), fmt.Sprintf("test/locks/job/%x", int64(session)))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get(queue key) = %v, %v", resp, err)
	}
	if kv := resp.Kvs[0]; api.Token(kv.CreateRevision) != token || kv.Lease != int64(session) {
		t.Fatalf("queue key created at %d with lease %x; want token %d and session %s", kv.CreateRevision, kv.Lease, token, session)
	}
}

// TestLockFailsWhenEtcdStops: with etcd gone, lock calls answer
// ErrUnavailable (and never a grant).
func TestLockFailsWhenEtcdStops(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newStore(t, etcd.Client(t))
	ctx := context.Background()
	session := newSession(t, s, 60)
	etcd.Stop(t)
	if _, err := s.Acquire(ctx, "job", session, anonymous, time.Second); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("Acquire with etcd stopped = %v; want ErrUnavailable", err)
	}
	if _, err := s.KeepAlive(ctx, session, anonymous); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("KeepAlive with etcd stopped = %v; want ErrUnavailable", err)
	}
	if _, err := s.CreateSession(ctx, 5, ""); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("CreateSession with etcd stopped = %v; want ErrUnavailable", err)
	}
	if _, err := s.LockState(ctx, "job", 0, nil); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("LockState with etcd stopped = %v; want ErrUnavailable", err)
	}
	if _, err := s.Release(ctx, "job", 5, anonymous); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("Release with etcd stopped = %v; want ErrUnavailable", err)
	}
}
