package tokenstore_test

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

// etcdRevision reads etcd's current revision from a Get's header.
func etcdRevision(tb testing.TB, client *clientv3.Client) int64 {
	tb.Helper()
	resp, err := client.Get(context.Background(), "revision-probe", clientv3.WithCountOnly())
	if err != nil {
		tb.Fatalf("reading etcd's revision: %v", err)
	}
	return resp.Header.Revision
}

// TestLockNoWaitOnHeldLockWritesNothing: an acquire with a zero wait of
// a lock that another session holds answers ErrLockTimeout without
// writing to etcd (no place queued and removed: the revision does not
// move), with and without a limit on the session's places; one of a
// session that holds the lock still gets its own grant back, and one of
// a free lock takes it.
func TestLockNoWaitOnHeldLockWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxLocks int
	}{{"limited", 0}, {"no limit", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			etcd := testenv.StartEtcd(t)
			client := etcd.Client(t)
			s, err := tokenstore.New(client, tokenstore.Config{Prefix: "test/", MaxLocksPerSession: tc.maxLocks})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			holderSession := newSession(t, s, 60)
			holder := mustAcquire(t, s, "job", holderSession)
			other := newSession(t, s, 60)
			before := etcdRevision(t, client)
			for range 3 {
				if _, err := s.Acquire(ctx, "job", other, anonymous, 0); !errors.Is(err, api.ErrLockTimeout) {
					t.Fatalf("Acquire(wait 0) of a held lock = %v; want ErrLockTimeout", err)
				}
			}
			if after := etcdRevision(t, client); after != before {
				t.Fatalf("three Acquire(wait 0) of a held lock moved etcd's revision from %d to %d; want no write", before, after)
			}
			if st := lockStateWith(t, s, "job", holderSession); st.QueueLength != 1 || st.Holder != holder {
				t.Fatalf("LockState = %+v; want only the holder %d", st, holder)
			}
			g, err := s.Acquire(ctx, "job", holderSession, anonymous, 0)
			if err != nil || g.Token != holder {
				t.Fatalf("the holder's Acquire(wait 0) = %+v, %v; want its token %d", g, err, holder)
			}
			if got := mustAcquireNoWait(t, s, "free", other); got == 0 {
				t.Fatal("Acquire(wait 0) of a free lock: token 0")
			}
		})
	}
}

func mustAcquireNoWait(tb testing.TB, s *tokenstore.Store, name string, session api.SessionID) api.Token {
	tb.Helper()
	g, err := s.Acquire(context.Background(), name, session, anonymous, 0)
	if err != nil {
		tb.Fatalf("Acquire(%s, %s, wait 0): %v", name, session, err)
	}
	return g.Token
}
