package tokenstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"fencegate/api"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

// ownerRecord reads session id's owner record from etcd: its value and
// lease, and whether it exists.
func ownerRecord(tb testing.TB, client *clientv3.Client, id api.SessionID) (owner string, lease int64, ok bool) {
	tb.Helper()
	resp, err := client.Get(context.Background(), "test/sessions/"+id.String())
	if err != nil {
		tb.Fatalf("reading the owner record of %s: %v", id, err)
	}
	if len(resp.Kvs) == 0 {
		return "", 0, false
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].Lease, true
}

// leaseAlive reports whether etcd still has session id's lease.
func leaseAlive(tb testing.TB, client *clientv3.Client, id api.SessionID) bool {
	tb.Helper()
	resp, err := client.TimeToLive(context.Background(), clientv3.LeaseID(id))
	if err != nil {
		tb.Fatalf("TimeToLive(%s): %v", id, err)
	}
	return resp.TTL > 0
}

// queueKeyRevision returns the create revision of session id's key in lock
// name's queue, read from etcd; zero when there is none.
func queueKeyRevision(tb testing.TB, client *clientv3.Client, name string, id api.SessionID) api.Token {
	tb.Helper()
	resp, err := client.Get(context.Background(), fmt.Sprintf("test/locks/%s/%s", name, id))
	if err != nil {
		tb.Fatalf("reading the queue key of %s in %s: %v", id, name, err)
	}
	if len(resp.Kvs) == 0 {
		return 0
	}
	return api.Token(resp.Kvs[0].CreateRevision)
}

// TestSessionOwnerRecord: a session's owner is recorded under
// <prefix>sessions/<id>, bound to its lease, and goes with it.
func TestSessionOwnerRecord(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	s := newStore(t, client)
	ctx := context.Background()
	for _, owner := range []string{"alice", ""} {
		sess, err := s.CreateSession(ctx, 60, owner)
		if err != nil {
			t.Fatalf("CreateSession(60, %q): %v", owner, err)
		}
		got, lease, ok := ownerRecord(t, client, sess.ID)
		if !ok || got != owner || lease != int64(sess.ID) {
			t.Fatalf("owner record of %s = %q (lease %x, exists %v); want %q bound to the session's lease", sess.ID, got, lease, ok, owner)
		}
		if err := s.RevokeSession(ctx, sess.ID, &owner); err != nil {
			t.Fatalf("RevokeSession(%s, %q): %v", sess.ID, owner, err)
		}
		if _, _, ok := ownerRecord(t, client, sess.ID); ok {
			t.Fatalf("owner record of %s outlived its revoked session", sess.ID)
		}
	}
}

// TestSessionOtherIdentityForbidden: each session call by an identity that
// does not own the session fails with ErrForbidden and changes nothing in
// etcd: the session stays alive and its lock stays held with the same
// token. The owner's calls, and an operator's (nil owner), succeed.
func TestSessionOtherIdentityForbidden(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	s := newStore(t, client)
	ctx := context.Background()
	calls := []struct {
		name string
		call func(session api.SessionID, token api.Token, owner *string) error
	}{
		{"keepalive", func(session api.SessionID, _ api.Token, owner *string) error {
			_, err := s.KeepAlive(ctx, session, owner)
			return err
		}},
		{"revoke", func(session api.SessionID, _ api.Token, owner *string) error {
			return s.RevokeSession(ctx, session, owner)
		}},
		{"acquire the held lock", func(session api.SessionID, token api.Token, owner *string) error {
			g, err := s.Acquire(ctx, "job", session, owner, 0)
			if err == nil && g.Token != token {
				return fmt.Errorf("grant %+v; want token %d", g, token)
			}
			return err
		}},
		{"acquire another lock", func(session api.SessionID, _ api.Token, owner *string) error {
			_, err := s.Acquire(ctx, "other", session, owner, 0)
			return err
		}},
		{"release", func(_ api.SessionID, token api.Token, owner *string) error {
			released, err := s.Release(ctx, "job", token, owner)
			if err == nil && !released {
				return errors.New("released false; want true")
			}
			return err
		}},
	}
	for _, c := range calls {
		for _, stranger := range []string{"bob", "", "alice2", "alic"} {
			t.Run(fmt.Sprintf("%s by %q", c.name, stranger), func(t *testing.T) {
				session := newOwnedSession(t, s, "alice")
				token := mustAcquireAs(t, s, "job", session, "alice")
				if err := c.call(session, token, &stranger); !errors.Is(err, api.ErrForbidden) {
					t.Fatalf("%s of alice's session by %q = %v; want ErrForbidden", c.name, stranger, err)
				}
				if !leaseAlive(t, client, session) {
					t.Fatalf("alice's session %s ended after %s by %q", session, c.name, stranger)
				}
				if got := queueKeyRevision(t, client, "job", session); got != token {
					t.Fatalf("alice's key in job created at %d after %s by %q; want %d, held", got, c.name, stranger, token)
				}
				if st := lockStateWith(t, s, "job", session); st.Holder != token || st.QueueLength != 1 {
					t.Fatalf("LockState(job) = %+v; want alice's %d alone", st, token)
				}
				if got := queueKeyRevision(t, client, "other", session); got != 0 {
					t.Fatalf("alice's session queued for other at %d by %q", got, stranger)
				}
				if owner, _, ok := ownerRecord(t, client, session); !ok || owner != "alice" {
					t.Fatalf("owner record = %q, %v; want alice's", owner, ok)
				}
			})
		}
		for _, who := range []struct {
			name  string
			owner *string
		}{{"owner", new("alice")}, {"operator", nil}} {
			t.Run(c.name+" by "+who.name, func(t *testing.T) {
				session := newOwnedSession(t, s, "alice")
				token := mustAcquireAs(t, s, "job", session, "alice")
				if err := c.call(session, token, who.owner); err != nil {
					t.Fatalf("%s of alice's session by the %s = %v", c.name, who.name, err)
				}
			})
		}
	}
}

// TestLeaseWithoutRecordIsNoSession: an etcd lease without a session
// record is not a session, whoever asks: fencegate binds other keys to
// leases of its own (a partner request's in-flight marker, stored
// idempotency answers), and lease ids can be guessed. Keepalive, revoke
// and acquire with it fail with ErrSessionNotFound for every caller,
// operators included, and leave the lease and its keys alone.
func TestLeaseWithoutRecordIsNoSession(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	s := newStore(t, client)
	ctx := context.Background()
	lease, err := client.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	id := api.SessionID(lease.ID)
	const marker = "test/inflight/partner/pay/a1"
	if _, err := client.Put(ctx, marker, "in flight", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	for _, owner := range []*string{new("alice"), anonymous, nil} {
		who := "operator"
		if owner != nil {
			who = fmt.Sprintf("%q", *owner)
		}
		if _, err := s.KeepAlive(ctx, id, owner); !errors.Is(err, api.ErrSessionNotFound) {
			t.Errorf("KeepAlive(%s) by %s = %v; want ErrSessionNotFound", id, who, err)
		}
		if _, err := s.Acquire(ctx, "job", id, owner, 0); !errors.Is(err, api.ErrSessionNotFound) {
			t.Errorf("Acquire(job, %s) by %s = %v; want ErrSessionNotFound", id, who, err)
		}
		if err := s.RevokeSession(ctx, id, owner); !errors.Is(err, api.ErrSessionNotFound) {
			t.Errorf("RevokeSession(%s) by %s = %v; want ErrSessionNotFound", id, who, err)
		}
		if got := queueKeyRevision(t, client, "job", id); got != 0 {
			t.Fatalf("after %s's calls the lease has a place in job's queue (created at %d)", who, got)
		}
		resp, err := client.Get(ctx, marker)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || resp.Kvs[0].Lease != int64(lease.ID) || !leaseAlive(t, client, id) {
			t.Fatalf("after %s's calls: marker %v, lease alive %v; want the marker on the live lease", who, resp.Kvs, leaseAlive(t, client, id))
		}
	}
}

// TestSessionGoneIsNotFound: for a session that does not exist (revoked,
// or never created), every caller gets ErrSessionNotFound, not
// ErrForbidden, and a release by token answers false.
func TestSessionGoneIsNotFound(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newStore(t, etcd.Client(t))
	ctx := context.Background()
	revoked := newOwnedSession(t, s, "alice")
	token := mustAcquireAs(t, s, "job", revoked, "alice")
	if err := s.RevokeSession(ctx, revoked, new("alice")); err != nil {
		t.Fatal(err)
	}
	for _, session := range []api.SessionID{revoked, 0x7eadbeef} {
		for _, owner := range []*string{new("alice"), new("bob"), anonymous, nil} {
			who := "operator"
			if owner != nil {
				who = fmt.Sprintf("%q", *owner)
			}
			if _, err := s.KeepAlive(ctx, session, owner); !errors.Is(err, api.ErrSessionNotFound) {
				t.Errorf("KeepAlive(%s) by %s = %v; want ErrSessionNotFound", session, who, err)
			}
			if err := s.RevokeSession(ctx, session, owner); !errors.Is(err, api.ErrSessionNotFound) {
				t.Errorf("RevokeSession(%s) by %s = %v; want ErrSessionNotFound", session, who, err)
			}
			if _, err := s.Acquire(ctx, "job", session, owner, 0); !errors.Is(err, api.ErrSessionNotFound) {
				t.Errorf("Acquire(%s) by %s = %v; want ErrSessionNotFound", session, who, err)
			}
			if released, err := s.Release(ctx, "job", token, owner); err != nil || released {
				t.Errorf("Release(%d) by %s = %v, %v; want false, nil", token, who, released, err)
			}
		}
	}
}

// TestCreateSessionRevokesWithoutRecord: when the owner record cannot be
// written, CreateSession fails with ErrUnavailable and revokes the lease
// it was granted, so that no session is left without its owner.
func TestCreateSessionRevokesWithoutRecord(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	refusePuts, err := clientv3.New(clientv3.Config{
		Endpoints: etcd.Endpoints(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(
			func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				// The record is written by a transaction (with the
				// owner's index key, if the count allows).
				if method == "/etcdserverpb.KV/Put" || method == "/etcdserverpb.KV/Txn" {
					return status.Error(codes.PermissionDenied, "test: writes refused")
				}
				return invoker(ctx, method, req, reply, cc, opts...)
			})},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer refusePuts.Close()
	s := newStore(t, refusePuts)
	if _, err := s.CreateSession(context.Background(), 60, "alice"); !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("CreateSession with writes refused = %v; want ErrUnavailable", err)
	}
	leases, err := etcd.Client(t).Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Leases) != 0 {
		t.Fatalf("leases after a failed CreateSession: %v; want none", leases.Leases)
	}
}

// newOwnedSession creates a session of owner, revoked (if it still lives)
// when the test ends.
func newOwnedSession(tb testing.TB, s *tokenstore.Store, owner string) api.SessionID {
	tb.Helper()
	sess, err := s.CreateSession(context.Background(), 60, owner)
	if err != nil {
		tb.Fatalf("CreateSession(60, %q): %v", owner, err)
	}
	tb.Cleanup(func() { _ = s.RevokeSession(context.Background(), sess.ID, nil) })
	return sess.ID
}

func mustAcquireAs(tb testing.TB, s *tokenstore.Store, name string, session api.SessionID, owner string) api.Token {
	tb.Helper()
	g, err := s.Acquire(context.Background(), name, session, &owner, longWait)
	if err != nil {
		tb.Fatalf("Acquire(%s, %s) as %q: %v", name, session, owner, err)
	}
	return g.Token
}

// TestLockStateTokenForHolderOnly: LockState says whether the lock is held
// and how long its queue is; the holder's token only when the call names
// the holder's session and may use it (its owner, or an operator). A
// session of another identity is ErrForbidden, a lease that is no session
// ErrSessionNotFound, as for every call that names a session.
func TestLockStateTokenForHolderOnly(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	s := newStore(t, client)
	ctx := context.Background()
	holding, waiting := newOwnedSession(t, s, "alice"), newOwnedSession(t, s, "alice")
	token := mustAcquireAs(t, s, "job", holding, "alice")
	waited := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx, "job", waiting, new("alice"), longWait)
		waited <- err
	}()
	waitForQueue(t, s, "job", 2)
	lease, err := client.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		session api.SessionID
		owner   *string
		holder  api.Token
		err     error
	}{
		{"no session, by alice", 0, new("alice"), 0, nil},
		{"no session, by bob", 0, new("bob"), 0, nil},
		{"no session, by an operator", 0, nil, 0, nil},
		{"the holder's session, by alice", holding, new("alice"), token, nil},
		{"the holder's session, by an operator", holding, nil, token, nil},
		{"a waiter's session, by alice", waiting, new("alice"), 0, nil},
		{"the holder's session, by bob", holding, new("bob"), 0, api.ErrForbidden},
		{"the holder's session, by \"\"", holding, anonymous, 0, api.ErrForbidden},
		{"a lease that is no session, by an operator", api.SessionID(lease.ID), nil, 0, api.ErrSessionNotFound},
	} {
		st, err := s.LockState(ctx, "job", tt.session, tt.owner)
		switch {
		case tt.err != nil && !errors.Is(err, tt.err):
			t.Errorf("LockState(job), %s = %+v, %v; want %v", tt.name, st, err, tt.err)
		case tt.err != nil:
		case err != nil || !st.Held || st.QueueLength != 2 || st.Holder != tt.holder:
			t.Errorf("LockState(job), %s = %+v, %v; want held, queue 2, holder token %d", tt.name, st, err, tt.holder)
		}
	}
	if released, err := s.Release(ctx, "job", token, new("alice")); err != nil || !released {
		t.Fatalf("Release(%d) = %v, %v", token, released, err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("the waiter's Acquire = %v", err)
	}
	if st := lockStateWith(t, s, "job", holding); st.Holder != 0 || !st.Held {
		t.Fatalf("LockState(job) naming the former holder = %+v; want held by the waiter, no token", st)
	}
}
