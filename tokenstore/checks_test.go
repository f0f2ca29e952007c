package tokenstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

// checkPolicies guard three buckets: "held" by lock report, "plausible",
// and "open" (CheckNone, as every unlisted resource).
var checkPolicies = []tokenstore.Policy{
	{Prefix: "s3/held/", Check: tokenstore.CheckHeld, Lock: "report"},
	{Prefix: "s3/plausible/", Check: tokenstore.CheckPlausible},
	{Prefix: "s3/open/", Check: tokenstore.CheckNone},
}

func newCheckedStore(tb testing.TB, client *clientv3.Client) *tokenstore.Store {
	tb.Helper()
	s, err := tokenstore.New(client, tokenstore.Config{Prefix: "test/", RequestTimeout: 5 * time.Second, Policies: checkPolicies})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// wantNotHeld fails unless err is a lock-not-held refusal of token that
// says whether another token holds the lock (holder, never named; 0 when
// the lock is free).
func wantNotHeld(tb testing.TB, err error, token, holder api.Token) {
	tb.Helper()
	var e *api.LockNotHeldError
	if !errors.As(err, &e) || !errors.Is(err, api.ErrLockNotHeld) {
		tb.Fatalf("FenceCheck(%d) = %v; want lock not held", token, err)
	}
	if e.Token != token || e.Held != (holder != 0) || e.Lock != "report" {
		tb.Fatalf("FenceCheck(%d) = %+v; want token %d, held %v, lock report", token, e, token, holder != 0)
	}
}

// TestHeldRefusesExpiredHolderWithNoSuccessor is the case plain fencing
// cannot catch: the holder's session expires and nobody else acquires, so
// its token is still the largest ever issued for the lock; under "held" its
// write is refused all the same, and the high-water mark does not move.
func TestHeldRefusesExpiredHolderWithNoSuccessor(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newCheckedStore(t, etcd.Client(t))
	ctx := context.Background()
	const res = api.Resource("s3/held/report.csv")
	token := mustAcquire(t, s, "report", newSession(t, s, 1)) // never kept alive
	if err := s.FenceCheck(ctx, res, token); err != nil {
		t.Fatalf("FenceCheck(holder's token %d) = %v; want accepted", token, err)
	}
	waitForQueue(t, s, "report", 0) // the session expired
	wantNotHeld(t, s.FenceCheck(ctx, res, token), token, 0)
	if hwm, err := s.HighWaterMark(ctx, res); err != nil || hwm != token {
		t.Fatalf("HighWaterMark = %d, %v; want %d", hwm, err, token)
	}
	// Under CheckNone the same token would still be accepted: that is
	// what "held" adds.
	if err := s.FenceCheck(ctx, "s3/open/report.csv", token); err != nil {
		t.Fatalf("FenceCheck(%d) under none = %v; want accepted", token, err)
	}

	next := mustAcquire(t, s, "report", newSession(t, s, 60))
	wantNotHeld(t, s.FenceCheck(ctx, res, token), token, next)
	if err := s.FenceCheck(ctx, res, next); err != nil {
		t.Fatalf("FenceCheck(new holder's %d) = %v; want accepted", next, err)
	}
}

// TestHeldRefusesWaitersAndStrangers: only the holder's token passes; a
// waiter's token, tokens near the holder's, and any token on a free lock
// are refused.
func TestHeldRefusesWaitersAndStrangers(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	s := newCheckedStore(t, client)
	ctx := context.Background()
	const res = api.Resource("s3/held/k")
	wantNotHeld(t, s.FenceCheck(ctx, res, 1), 1, 0) // free lock

	holder := mustAcquire(t, s, "report", newSession(t, s, 60))
	waiterSession := newSession(t, s, 60)
	go func() { _, _ = s.Acquire(ctx, "report", waiterSession, anonymous, 10*time.Second) }()
	waitForQueue(t, s, "report", 2)
	resp, err := client.Get(ctx, "test/locks/report/", clientv3.WithLastCreate()...)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("reading the waiter's key: %v", err)
	}
	waiter := api.Token(resp.Kvs[0].CreateRevision)

	for _, tok := range []api.Token{waiter, holder - 1, holder + 1, waiter + 1000, api.MaxToken} {
		wantNotHeld(t, s.FenceCheck(ctx, res, tok), tok, holder)
	}
	if err := s.FenceCheck(ctx, res, holder); err != nil {
		t.Fatalf("FenceCheck(holder %d) = %v; want accepted", holder, err)
	}
	if ok, err := s.Release(ctx, "report", holder, anonymous); err != nil || !ok {
		t.Fatalf("Release(%d) = %v, %v", holder, ok, err)
	}
	waitForQueue(t, s, "report", 1) // the waiter holds now
	wantNotHeld(t, s.FenceCheck(ctx, res, holder), holder, waiter)
	if err := s.FenceCheck(ctx, res, waiter); err != nil {
		t.Fatalf("FenceCheck(new holder %d) = %v; want accepted", waiter, err)
	}
	if ok, err := s.Release(ctx, "report", waiter, anonymous); err != nil || !ok {
		t.Fatalf("Release(%d) = %v, %v", waiter, ok, err)
	}
}

// TestHeldStillComparesHighWaterMark: the holder's token is refused as
// stale when the resource's mark is already above it (raised before the
// policy existed, here by a store without policies).
func TestHeldStillComparesHighWaterMark(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newCheckedStore(t, etcd.Client(t))
	unchecked := newStore(t, etcd.Client(t))
	ctx := context.Background()
	const res = api.Resource("s3/held/k")
	if err := unchecked.FenceCheck(ctx, res, 1000); err != nil {
		t.Fatal(err)
	}
	holder := mustAcquire(t, s, "report", newSession(t, s, 60))
	var stale *api.StaleTokenError
	if err := s.FenceCheck(ctx, res, holder); !errors.As(err, &stale) || stale.HighWaterMark != 1000 {
		t.Fatalf("FenceCheck(holder %d) under HWM 1000 = %v; want stale with HWM 1000", holder, err)
	}
}

// TestPlausibleRefusesFutureToken: a token of etcd's current revision + 1000
// is refused and raises nothing; the current revision is accepted.
func TestPlausibleRefusesFutureToken(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	s := newCheckedStore(t, client)
	ctx := context.Background()
	const res = api.Resource("s3/plausible/k")
	resp, err := client.Put(ctx, "unrelated", "x")
	if err != nil {
		t.Fatal(err)
	}
	rev := api.Token(resp.Header.Revision)
	err = s.FenceCheck(ctx, res, rev+1000)
	if !errors.Is(err, api.ErrImplausibleToken) {
		t.Fatalf("FenceCheck(revision %d + 1000) = %v; want ErrImplausibleToken", rev, err)
	}
	if hwm, err := s.HighWaterMark(ctx, res); err != nil || hwm != 0 {
		t.Fatalf("HighWaterMark after the refusal = %d, %v; want 0", hwm, err)
	}
	if err := s.FenceCheck(ctx, res, rev); err != nil {
		t.Fatalf("FenceCheck(current revision %d) = %v; want accepted", rev, err)
	}
	// Without the policy, the forged token would be accepted, and no real
	// token could ever write again.
	if err := s.FenceCheck(ctx, "s3/open/k", rev+1000); err != nil {
		t.Fatalf("FenceCheck(%d) under none = %v; want accepted", rev+1000, err)
	}
	if err := s.FenceCheck(ctx, "s3/open/k", rev+1); !errors.Is(err, api.ErrStaleToken) {
		t.Fatalf("FenceCheck(%d) after the forgery under none = %v; want stale", rev+1, err)
	}
}

// TestChecksAddNoRoundTrip counts the etcd requests per accepted fence
// check: one (the transaction), under every policy. A token above every
// revision the store has seen (issued through another gateway) costs one
// read the first time only.
func TestChecksAddNoRoundTrip(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client, calls := etcd.CountingClient(t)
	s := newCheckedStore(t, client)
	other := newCheckedStore(t, etcd.Client(t)) // another gateway
	ctx := context.Background()
	holder := mustAcquire(t, s, "report", newSession(t, s, 60))
	const writes = 20
	for _, res := range []api.Resource{"s3/open/k", "s3/plausible/k", "s3/held/k"} {
		before := calls.Count()
		for range writes {
			if err := s.FenceCheck(ctx, res, holder); err != nil {
				t.Fatalf("FenceCheck(%s, %d) = %v", res, holder, err)
			}
		}
		if got := calls.Count() - before; got != writes {
			t.Errorf("%s: %d etcd requests for %d accepted writes; want %d (one each)", res, got, writes, writes)
		}
	}
	if n := s.RevisionReads(); n != 0 {
		t.Errorf("RevisionReads = %d; want 0", n)
	}

	// A token issued elsewhere, after everything s has seen.
	fresh := mustAcquire(t, other, "fresh", newSession(t, other, 60))
	before := calls.Count()
	for range writes {
		if err := s.FenceCheck(ctx, "s3/plausible/fresh", fresh); err != nil {
			t.Fatalf("FenceCheck(fresh %d) = %v", fresh, err)
		}
	}
	if got := calls.Count() - before; got != writes+1 {
		t.Errorf("fresh token: %d etcd requests for %d writes; want %d (one revision read, once)", got, writes, writes+1)
	}
	if n := s.RevisionReads(); n != 1 {
		t.Errorf("RevisionReads = %d; want 1", n)
	}
}

// TestChecksFailClosed: with etcd stopped, every check reports
// ErrUnavailable, never accepted nor refused.
func TestChecksFailClosed(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	s, err := tokenstore.New(client, tokenstore.Config{Prefix: "test/", RequestTimeout: time.Second, Policies: checkPolicies})
	if err != nil {
		t.Fatal(err)
	}
	etcd.Stop(t)
	for _, res := range []api.Resource{"s3/held/k", "s3/plausible/k"} {
		if err := s.FenceCheck(context.Background(), res, 1<<40); !errors.Is(err, api.ErrUnavailable) {
			t.Errorf("FenceCheck(%s) with etcd stopped = %v; want ErrUnavailable", res, err)
		}
	}
}

func TestPoliciesValidated(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	bad := map[string][]tokenstore.Policy{
		"unknown check":       {{Prefix: "s3/a/", Check: "strict"}},
		"held without lock":   {{Prefix: "s3/a/", Check: tokenstore.CheckHeld}},
		"held with bad lock":  {{Prefix: "s3/a/", Check: tokenstore.CheckHeld, Lock: "a/b"}},
		"lock without held":   {{Prefix: "s3/a/", Check: tokenstore.CheckPlausible, Lock: "x"}},
		"duplicate prefix":    {{Prefix: "s3/a/"}, {Prefix: "s3/a/", Check: tokenstore.CheckPlausible}},
		"lock on none":        {{Prefix: "s3/a/", Lock: "x"}},
		"duplicate catch-all": {{}, {Check: tokenstore.CheckPlausible}},
	}
	for name, ps := range bad {
		if _, err := tokenstore.New(client, tokenstore.Config{Policies: ps}); err == nil {
			t.Errorf("New with %s (%+v) succeeded; want an error", name, ps)
		}
	}
	for _, s := range []string{"none", "plausible", "held"} {
		if c, err := tokenstore.ParseCheck(s); err != nil || string(c) != s {
			t.Errorf("ParseCheck(%q) = %q, %v", s, c, err)
		}
	}
	if _, err := tokenstore.ParseCheck("Held"); err == nil {
		t.Error(`ParseCheck("Held") succeeded; want an error`)
	}
}

// TestLongestPrefixWins: a catch-all plausible policy, and a longer prefix
// that turns checks off for one bucket.
func TestLongestPrefixWins(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s, err := tokenstore.New(etcd.Client(t), tokenstore.Config{Prefix: "test/", Policies: []tokenstore.Policy{
		{Prefix: "", Check: tokenstore.CheckPlausible},
		{Prefix: "s3/legacy/", Check: tokenstore.CheckNone},
		{Prefix: "s3/legacy/locked/", Check: tokenstore.CheckHeld, Lock: "l"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const future = api.Token(1 << 50)
	if err := s.FenceCheck(ctx, "s3/any/k", future); !errors.Is(err, api.ErrImplausibleToken) {
		t.Errorf("catch-all plausible: %v; want ErrImplausibleToken", err)
	}
	if err := s.FenceCheck(ctx, "s3/legacy/k", future); err != nil {
		t.Errorf("s3/legacy/ (none): %v; want accepted", err)
	}
	if err := s.FenceCheck(ctx, "s3/legacy/locked/k", future); !errors.Is(err, api.ErrLockNotHeld) {
		t.Errorf("s3/legacy/locked/ (held): %v; want ErrLockNotHeld", err)
	}
}
