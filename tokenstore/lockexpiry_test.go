package tokenstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

// expiry is one report of WatchLockExpiries.
type expiry struct {
	grant   api.LockGrant
	holder  string
	revoked bool
}

// waitLeaseGone waits until session id's lease has ended, failing after
// a minute (a bound on a hang, not a measurement).
func waitLeaseGone(tb testing.TB, s *tokenstore.Store, id api.SessionID) {
	tb.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, err := s.LockState(context.Background(), "any", id, nil)
		if errors.Is(err, api.ErrSessionNotFound) {
			return
		}
		if err != nil {
			tb.Fatalf("LockState with session %s: %v", id, err)
		}
	}
	tb.Fatalf("session %s still lives after a minute without keepalive", id)
}

// TestWatchLockExpiries: one store watches while another, as a second
// gateway on the same etcd, does the work. A holder whose session
// expires and a holder whose session is revoked are reported, each once,
// with its token, session and owner, and whether its session was
// revoked. Of a holder that released and then expired, a waiter whose
// session expired in the queue, and a waiter whose session was revoked
// in the queue, none is: the next report is a later expiry's.
// Cancelling the watch ends it.
func TestWatchLockExpiries(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	watcher, other := newStore(t, client), newStore(t, etcd.Client(t))
	ctx := context.Background()
	reports := make(chan expiry, 16)
	wctx, cancel := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() {
		ended <- watcher.WatchLockExpiries(wctx, func(grant api.LockGrant, holder string, revoked bool) {
			reports <- expiry{grant, holder, revoked}
		})
	}()

	session := func(ttl int64, owner string) api.SessionID {
		t.Helper()
		sess, err := other.CreateSession(ctx, ttl, owner)
		if err != nil {
			t.Fatalf("CreateSession: %v", err)
		}
		return sess.ID
	}
	acquire := func(name string, id api.SessionID) api.LockGrant {
		t.Helper()
		grant, err := other.Acquire(ctx, name, id, nil, 0)
		if err != nil {
			t.Fatalf("Acquire(%s, %s): %v", name, id, err)
		}
		return grant
	}
	// wait queues id for lock name, behind its holder, and returns the
	// error its Acquire ends with.
	wait := func(actx context.Context, name string, id api.SessionID) <-chan error {
		t.Helper()
		waited := make(chan error, 1)
		go func() {
			_, err := other.Acquire(actx, name, id, nil, api.MaxLockWait)
			waited <- err
		}()
		for queueKeyRevision(t, client, name, id) == 0 {
			time.Sleep(10 * time.Millisecond) // until it is queued
		}
		return waited
	}

	// next fails unless the next report is w.
	next := func(what string, w expiry) {
		t.Helper()
		select {
		case got := <-reports:
			if got != w {
				t.Fatalf("report %+v; want %s, %+v", got, what, w)
			}
		case <-time.After(30 * time.Second): // a bound on a hang
			t.Fatalf("no report of %s (%+v) within 30 s", what, w)
		}
	}

	// The expiry's report also tells that the watch runs: what follows
	// is after the revision it started from.
	expired := session(api.MinSessionTTL, "alice")
	next("the expiry", expiry{acquire("expired", expired), "alice", false})

	revoked := session(60, "carol")
	grant := acquire("revoked", revoked)
	if err := other.RevokeSession(ctx, revoked, nil); err != nil {
		t.Fatalf("RevokeSession: %v", err)
	}
	next("the revoke", expiry{grant, "carol", true})

	released := session(api.MinSessionTTL, "bob")
	grant = acquire("released", released)
	if ok, err := other.Release(ctx, "released", grant.Token, nil); err != nil || !ok {
		t.Fatalf("Release = %v, %v; want true", ok, err)
	}

	acquire("waited", session(60, "dave"))
	// Waiters whose place goes with their session are answered at once
	// (TestLockWaiterWhoseSessionEndsIsAnsweredAtOnce), and reported
	// never: their places held no lock.
	waiter := session(api.MinSessionTTL, "erin")
	waited := wait(ctx, "waited", waiter)
	if err := <-waited; !errors.Is(err, api.ErrLockNotHeld) {
		t.Fatalf("the waiter whose session expired: Acquire = %v; want %v", err, api.ErrLockNotHeld)
	}
	revokedWaiter := session(60, "frank")
	waited = wait(ctx, "waited", revokedWaiter)
	if err := other.RevokeSession(ctx, revokedWaiter, nil); err != nil {
		t.Fatalf("RevokeSession of the waiter: %v", err)
	}
	if err := <-waited; !errors.Is(err, api.ErrLockNotHeld) {
		t.Fatalf("the waiter whose session was revoked: Acquire = %v; want %v", err, api.ErrLockNotHeld)
	}
	if queueKeyRevision(t, client, "waited", revokedWaiter) != 0 {
		t.Fatal("the revoked waiter's place is still in the queue")
	}
	waitLeaseGone(t, other, released)

	later := session(api.MinSessionTTL, "")
	next("the later expiry", expiry{acquire("later", later), "", false})
	cancel()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("WatchLockExpiries after cancel = %v; want context.Canceled", err)
	}
	select {
	case got := <-reports:
		t.Fatalf("an extra report: %+v", got)
	default:
	}
	if n := watcher.LockStats().ExpiryWatchErrors; n != 0 {
		t.Errorf("ExpiryWatchErrors = %d; want 0", n)
	}
}
