package tokenstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"fencegate/api"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

// newCappedStores returns two stores (two gateways) on one etcd with the
// caps of cfg, and a client of that etcd.
func newCappedStores(tb testing.TB, cfg tokenstore.Config) (a, b *tokenstore.Store, client *clientv3.Client) {
	tb.Helper()
	etcd := testenv.StartEtcd(tb)
	client = etcd.Client(tb)
	cfg.Prefix = "test/"
	cfg.RequestTimeout = 5 * time.Second
	a, err := tokenstore.New(client, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	b, err = tokenstore.New(etcd.Client(tb), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return a, b, client
}

// TestSessionCapCountsPerIdentityAcrossStores: 20 concurrent creations by
// one identity through two stores, with a cap of 5, create exactly 5
// sessions; the others fail with api.ErrTooManySessions and leave no
// record. Another identity, and an identity whose name extends the
// first's, each still get their own 5.
func TestSessionCapCountsPerIdentityAcrossStores(t *testing.T) {
	a, b, client := newCappedStores(t, tokenstore.Config{MaxSessionsPerIdentity: 5})
	ctx := context.Background()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		refused int
	)
	for i := range 20 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			_, err := s.CreateSession(ctx, 30, "alice")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case errors.Is(err, api.ErrTooManySessions):
				refused++
			default:
				t.Errorf("CreateSession: %v", err)
			}
		})
	}
	wg.Wait()
	if created != 5 || refused != 15 {
		t.Fatalf("created %d, refused %d; want 5 and 15", created, refused)
	}
	resp, err := client.Get(ctx, "test/sessions/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 5 {
		t.Fatalf("%d session records; want 5", resp.Count)
	}
	for _, owner := range []string{"bob", "alice/x", "alic"} {
		for i := range 5 {
			if _, err := a.CreateSession(ctx, 30, owner); err != nil {
				t.Fatalf("CreateSession #%d for %q: %v", i+1, owner, err)
			}
		}
		if _, err := b.CreateSession(ctx, 30, owner); !errors.Is(err, api.ErrTooManySessions) {
			t.Fatalf("6th CreateSession for %q: %v; want %v", owner, err, api.ErrTooManySessions)
		}
	}
}

// TestLockCapCountsConcurrentAcquires: one session acquiring 10 locks at
// once through two stores, with a cap of 3, gets exactly 3; the others
// fail with api.ErrTooManyLocks and queue nothing.
func TestLockCapCountsConcurrentAcquires(t *testing.T) {
	a, b, client := newCappedStores(t, tokenstore.Config{MaxLocksPerSession: 3})
	ctx := context.Background()
	session := newSession(t, a, 30)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted int
	)
	for i := range 10 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			_, err := s.Acquire(ctx, fmt.Sprintf("l%d", i), session, anonymous, 0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				granted++
			case !errors.Is(err, api.ErrTooManyLocks):
				t.Errorf("Acquire(l%d): %v", i, err)
			}
		})
	}
	wg.Wait()
	if granted != 3 {
		t.Fatalf("%d grants; want 3", granted)
	}
	resp, err := client.Get(ctx, "test/locks/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 3 {
		t.Fatalf("%d queue keys; want 3", resp.Count)
	}
}

// TestSessionCapUnderContention: many concurrent creations by one
// identity, all below its cap, all succeed. Each one that loses the
// optimistic count's race to another (see CreateSession) counts again and
// tries again; none may give up with api.ErrUnavailable while the count is
// still below the cap, as if etcd had failed.
func TestSessionCapUnderContention(t *testing.T) {
	const creators = 100
	a, b, _ := newCappedStores(t, tokenstore.Config{MaxSessionsPerIdentity: 1000})
	ctx := context.Background()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []error
	)
	for i := range creators {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			if _, err := s.CreateSession(ctx, 30, "alice"); err != nil {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of %d concurrent creations below the cap failed; first: %v", len(failed), creators, failed[0])
	}
}

// TestLockCapUnderContention: many concurrent acquires of distinct locks
// by one session, all below its cap, are all granted: a lost race of the
// optimistic count is retried, never answered as etcd unavailable.
func TestLockCapUnderContention(t *testing.T) {
	const locks = 50
	a, b, _ := newCappedStores(t, tokenstore.Config{MaxLocksPerSession: 64})
	ctx := context.Background()
	session := newSession(t, a, 30)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []error
	)
	for i := range locks {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			if _, err := s.Acquire(ctx, fmt.Sprintf("l%d", i), session, anonymous, 0); err != nil {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of %d concurrent acquires below the cap failed; first: %v", len(failed), locks, failed[0])
	}
}

// interceptedClient returns a client of etcd, closed when the test ends,
// whose unary calls go through intercept.
func interceptedClient(tb testing.TB, etcd *testenv.Etcd, intercept grpc.UnaryClientInterceptor) *clientv3.Client {
	tb.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   etcd.Endpoints(),
		DialTimeout: 2 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(intercept)},
		Logger:      zap.NewNop(), // the failures it logs are the test's doing
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// isGuardedTxn reports whether req is a transaction with compares: one
// that creates a limited key (CreateSession's, queueUp's), not a count.
func isGuardedTxn(method string, req any) bool {
	txn, ok := req.(*etcdserverpb.TxnRequest)
	return method == "/etcdserverpb.KV/Txn" && ok && len(txn.Compare) > 0
}

// TestLockCapRetriesEachHaveTheRequestTimeout: an acquire that loses the
// optimistic count's race several times, each of its etcd requests well
// within Config.RequestTimeout, is granted. RequestTimeout bounds each
// etcd request; the retries of lost races must not share one, or a burst
// of acquires by one session answers the late ones as etcd unavailable.
//
// Each of the acquire's transactions reaches etcd a third of the timeout
// late (an etcd that is slow, not down), and before each of the first
// three another gateway gives the session a place in another queue, so
// the acquire loses three races and wins the fourth: four requests whose
// delays alone add up past one timeout.
func TestLockCapRetriesEachHaveTheRequestTimeout(t *testing.T) {
	const (
		timeout = 3 * time.Second
		delay   = timeout / 3
		lost    = 3
	)
	etcd := testenv.StartEtcd(t)
	cfg := tokenstore.Config{Prefix: "test/", RequestTimeout: timeout, MaxLocksPerSession: 64}
	other, err := tokenstore.New(etcd.Client(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	session := newSession(t, other, 60)
	attempts := 0 // only the acquire below calls the interceptor's transactions
	slow := interceptedClient(t, etcd, func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if isGuardedTxn(method, req) {
			attempts++
			if attempts <= lost {
				if _, err := other.Acquire(ctx, fmt.Sprintf("rival%d", attempts), session, anonymous, 0); err != nil {
					return fmt.Errorf("test: the rival acquire: %w", err)
				}
			}
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	s, err := tokenstore.New(slow, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(context.Background(), "mine", session, anonymous, 0); err != nil {
		t.Fatalf("Acquire after %d transactions, %d of them lost races: %v", attempts, lost, err)
	}
	if attempts != lost+1 {
		t.Fatalf("Acquire sent %d transactions; want %d (%d lost races and the grant)", attempts, lost+1, lost)
	}
}

// TestSessionCapRetryOutlivesItsLease: a creation that loses the
// optimistic count's race, and retries only once the lease it was granted
// has expired (a long run of lost races, as under a burst of creations by
// one identity), still creates the session, on a lease that lives, and
// does not fail as if etcd had.
func TestSessionCapRetryOutlivesItsLease(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	plain := etcd.Client(t)
	cfg := tokenstore.Config{Prefix: "test/", RequestTimeout: 5 * time.Second, MaxSessionsPerIdentity: 10}
	other, err := tokenstore.New(plain, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var (
		first    clientv3.LeaseID // the lease granted first
		attempts int
	)
	late := interceptedClient(t, etcd, func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if !isGuardedTxn(method, req) {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if grant, ok := reply.(*etcdserverpb.LeaseGrantResponse); ok && err == nil && first == 0 {
				first = clientv3.LeaseID(grant.ID)
			}
			return err
		}
		attempts++
		if attempts > 1 {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		if _, err := other.CreateSession(ctx, 60, "alice"); err != nil {
			return fmt.Errorf("test: the rival creation: %w", err)
		}
		if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
			return err
		}
		// Lost (the rival's index key is newer than the count): come
		// back once the lease is gone.
		for {
			ttl, err := plain.TimeToLive(ctx, first)
			if err != nil {
				return fmt.Errorf("test: TimeToLive(%x): %w", first, err)
			}
			if ttl.TTL < 0 { // -1: expired (0 is less than a second left)
				return nil
			}
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})
	s, err := tokenstore.New(late, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := s.CreateSession(context.Background(), 2, "alice")
	if err != nil {
		t.Fatalf("CreateSession retried after its lease expired: %v", err)
	}
	if attempts < 2 || first == 0 {
		t.Fatalf("the creation sent %d guarded transactions after lease %x; want a lost race and a retry", attempts, first)
	}
	if owner, lease, ok := ownerRecord(t, plain, sess.ID); !ok || owner != "alice" || lease != int64(sess.ID) {
		t.Fatalf("record of %s = %q on lease %x (exists %v); want alice's, on the session's lease", sess.ID, owner, lease, ok)
	}
	if ttl, err := plain.TimeToLive(context.Background(), clientv3.LeaseID(sess.ID)); err != nil || ttl.TTL < 0 {
		t.Fatalf("session %s was answered on a lease that is gone (TimeToLive: %v, %v)", sess.ID, ttl, err)
	}
	resp, err := plain.Get(context.Background(), "test/owner-sessions/alice/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 2 {
		t.Fatalf("alice's index holds %d keys; want 2 (the rival's and this session's)", resp.Count)
	}
}

// TestLimitedCreationsThroughOneStoreTakeTurns: concurrent creations under
// one limit (sessions of one identity, places of one session) through one
// store cost one guarded transaction each. Were they sent at once, every
// commit would fail the others' compares, and n creations would cost
// about n²/2 transactions, each a Raft entry and an fsync: a client with
// n requests in flight could make etcd do n/2 times the work it asked for.
// Creations through other gateways can still race; each such lost race is
// another's success, as before.
func TestLimitedCreationsThroughOneStoreTakeTurns(t *testing.T) {
	const n = 24
	tests := []struct {
		name   string
		create func(ctx context.Context, s *tokenstore.Store, session api.SessionID, i int) error
	}{
		{"sessions of one identity", func(ctx context.Context, s *tokenstore.Store, _ api.SessionID, _ int) error {
			_, err := s.CreateSession(ctx, 30, "alice")
			return err
		}},
		{"places of one session", func(ctx context.Context, s *tokenstore.Store, session api.SessionID, i int) error {
			_, err := s.Acquire(ctx, fmt.Sprintf("l%d", i), session, anonymous, 0)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			etcd := testenv.StartEtcd(t)
			var guarded atomic.Int64
			client := interceptedClient(t, etcd, func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if isGuardedTxn(method, req) {
					guarded.Add(1)
				}
				return invoker(ctx, method, req, reply, cc, opts...)
			})
			s, err := tokenstore.New(client, tokenstore.Config{Prefix: "test/", RequestTimeout: 5 * time.Second, MaxSessionsPerIdentity: 100, MaxLocksPerSession: 100})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			session := newSession(t, s, 30)
			before := guarded.Load()
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					if err := tt.create(ctx, s, session, i); err != nil {
						t.Errorf("creation %d: %v", i, err)
					}
				})
			}
			wg.Wait()
			if got := guarded.Load() - before; got != n {
				t.Fatalf("%d concurrent creations under one limit sent %d guarded transactions; want %d, one each", n, got, n)
			}
		})
	}
}
