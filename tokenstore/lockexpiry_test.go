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
	grant  api.LockGrant
	holder string
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
// gateway on the same etcd, does the work. Of a holder whose session
// expires, a holder that released and then expired, a holder whose
// session was revoked, and a waiter whose session expired in the queue,
// only the first is reported, once, with its token, session and owner;
// the next report is a later expiry's. Cancelling the watch ends it.
func TestWatchLockExpiries(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	watcher, other := newStore(t, client), newStore(t, etcd.Client(t))
	ctx := context.Background()
	reports := make(chan expiry, 16)
	wctx, cancel := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() {
		ended <- watcher.WatchLockExpiries(wctx, func(grant api.LockGrant, holder string) { reports <- expiry{grant, holder} })
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

	expired := session(api.MinSessionTTL, "alice")
	want := acquire("expired", expired)

	released := session(api.MinSessionTTL, "bob")
	grant := acquire("released", released)
	if ok, err := other.Release(ctx, "released", grant.Token, nil); err != nil || !ok {
		t.Fatalf("Release = %v, %v; want true", ok, err)
	}

	revoked := session(60, "carol")
	acquire("revoked", revoked)
	if err := other.RevokeSession(ctx, revoked, nil); err != nil {
		t.Fatalf("RevokeSession: %v", err)
	}

	acquire("waited", session(60, "dave"))
	waiter := session(api.MinSessionTTL, "erin")
	waited := make(chan error, 1)
	actx, stopWaiting := context.WithCancel(ctx)
	go func() {
		_, err := other.Acquire(actx, "waited", waiter, nil, api.MaxLockWait)
		waited <- err
	}()
	for queueKeyRevision(t, client, "waited", waiter) == 0 {
		time.Sleep(10 * time.Millisecond) // until it is queued
	}
	waitLeaseGone(t, other, waiter) // expired while it waited
	stopWaiting()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter whose session expired: Acquire = %v; want context.Canceled", err)
	}
	waitLeaseGone(t, other, expired)
	waitLeaseGone(t, other, released)

	later := session(api.MinSessionTTL, "")
	last := acquire("later", later)
	for i, w := range []expiry{{want, "alice"}, {last, ""}} {
		select {
		case got := <-reports:
			if got != w {
				t.Fatalf("report %d = %+v; want %+v", i, got, w)
			}
		case <-time.After(30 * time.Second): // a bound on a hang
			t.Fatalf("no report %d (%+v) within 30 s", i, w)
		}
	}
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
