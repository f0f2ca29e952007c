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

// partnerCheckPolicies: every resource is under plausible, and the partner
// route "payments" under held by lock report.
var partnerCheckPolicies = []tokenstore.Policy{
	{Prefix: "", Check: tokenstore.CheckPlausible},
	{Prefix: "partner/payments/", Check: tokenstore.CheckHeld, Lock: "report"},
}

func newCheckedPartners(tb testing.TB, client *clientv3.Client) (*tokenstore.Store, *tokenstore.Partners) {
	tb.Helper()
	s, err := tokenstore.New(client, tokenstore.Config{Prefix: "test/", RequestTimeout: 5 * time.Second, Policies: partnerCheckPolicies})
	if err != nil {
		tb.Fatal(err)
	}
	p, err := tokenstore.NewPartners(s)
	if err != nil {
		tb.Fatal(err)
	}
	return s, p
}

// wantNothingTaken fails unless resource's mark is hwm and no in-flight
// marker or idempotency record exists: a refused admission takes nothing.
func wantNothingTaken(tb testing.TB, s *tokenstore.Store, client *clientv3.Client, resource api.Resource, hwm api.Token) {
	tb.Helper()
	if got, err := s.HighWaterMark(context.Background(), resource); err != nil || got != hwm {
		tb.Fatalf("HighWaterMark(%s) = %d, %v; want %d", resource, got, err, hwm)
	}
	if n := keyCount(tb, client, "test/inflight/"); n != 0 {
		tb.Fatalf("%d in-flight markers after a refusal; want 0", n)
	}
	if n := keyCount(tb, client, "test/idem/"); n != 0 {
		tb.Fatalf("%d idempotency records after a refusal; want 0", n)
	}
}

// TestAdmitPartnerRefusesImplausibleToken: under plausible, a partner
// request with token 2^63-1 (or etcd's revision + 1000) is refused, with
// or without an idempotency key, and raises no mark, so a real token can
// still use the resource.
func TestAdmitPartnerRefusesImplausibleToken(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	s, p := newCheckedPartners(t, client)
	ctx := context.Background()
	const res = api.Resource("partner/mailer/lists/l1")
	resp, err := client.Put(ctx, "unrelated", "x")
	if err != nil {
		t.Fatal(err)
	}
	rev := api.Token(resp.Header.Revision)
	for _, tok := range []api.Token{api.MaxToken, rev + 1000} {
		for _, req := range []api.PartnerAdmission{admission(tok, 0), keyed(tok, "k", "x")} {
			req.Resource = res
			if _, err := p.AdmitPartner(ctx, req); !errors.Is(err, api.ErrImplausibleToken) {
				t.Fatalf("AdmitPartner(token %d, claim %v) = %v; want ErrImplausibleToken", tok, req.Idempotency != nil, err)
			}
			wantNothingTaken(t, s, client, res, 0)
		}
	}
	req := admission(rev, 0)
	req.Resource = res
	mustFinish(t, mustAdmit(t, p, req), nil)
}

// TestAdmitPartnerHeld: under held, only the current holder's token is
// admitted to a partner resource; a waiter's token, a stranger's and the
// token of a holder that released are refused without taking anything; the
// decision is the admission's one etcd request.
func TestAdmitPartnerHeld(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client, calls := etcd.CountingClient(t)
	s, p := newCheckedPartners(t, client)
	ctx := context.Background()
	wantRefused := func(req api.PartnerAdmission, hwm api.Token) {
		t.Helper()
		_, err := p.AdmitPartner(ctx, req)
		var e *api.LockNotHeldError
		if !errors.As(err, &e) || e.Lock != "report" || e.Token != req.Token || e.Resource != req.Resource {
			t.Fatalf("AdmitPartner(token %d) = %v; want lock report not held", req.Token, err)
		}
		wantNothingTaken(t, s, client, req.Resource, hwm)
	}
	wantRefused(admission(1, 0), 0) // free lock

	holder := mustAcquire(t, s, "report", newSession(t, s, 60))
	waiterSession := newSession(t, s, 60)
	waiterDone := make(chan struct{})
	go func() {
		defer close(waiterDone)
		_, _ = s.Acquire(ctx, "report", waiterSession, anonymous, 10*time.Second)
	}()
	waitForQueue(t, s, "report", 2)
	resp, err := client.Get(ctx, "test/locks/report/", clientv3.WithLastCreate()...)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("reading the waiter's key: %v", err)
	}
	waiter := api.Token(resp.Kvs[0].CreateRevision)
	for _, tok := range []api.Token{waiter, holder - 1, holder + 1, api.MaxToken} {
		wantRefused(admission(tok, 0), 0)
		wantRefused(keyed(tok, "k", "x"), 0)
	}

	mustFinish(t, mustAdmit(t, p, admission(holder, 0)), nil) // grants the pooled lease
	before := calls.Count()
	adm := mustAdmit(t, p, keyed(holder, "k", "x"))
	if n := calls.Count() - before; n != 1 {
		t.Errorf("the holder's admission made %d etcd requests; want 1", n)
	}
	mustFinish(t, adm, &api.StoredResponse{Status: 201})
	if hwm, err := s.HighWaterMark(ctx, partnerRes); err != nil || hwm != holder {
		t.Fatalf("HighWaterMark = %d, %v; want the holder's %d", hwm, err, holder)
	}

	if ok, err := s.Release(ctx, "report", holder, anonymous); err != nil || !ok {
		t.Fatalf("Release(%d) = %v, %v", holder, ok, err)
	}
	waitForQueue(t, s, "report", 1) // the waiter holds now
	// Its Acquire returns once it has seen so: wait for that, so that its
	// requests are not counted as the admission's.
	<-waiterDone
	before = calls.Count()
	if _, err := p.AdmitPartner(ctx, admission(holder, 0)); !errors.Is(err, api.ErrLockNotHeld) {
		t.Fatalf("AdmitPartner(released %d) = %v; want ErrLockNotHeld", holder, err)
	}
	if n := calls.Count() - before; n != 1 {
		t.Errorf("a refused admission made %d etcd requests; want 1", n)
	}
	mustFinish(t, mustAdmit(t, p, admission(waiter, 0)), nil)
	if ok, err := s.Release(ctx, "report", waiter, anonymous); err != nil || !ok {
		t.Fatalf("Release(%d) = %v, %v", waiter, ok, err)
	}
}

// TestAdmitPartnerHeldStillFences: the holder's token is refused as stale
// when the resource's mark is above it, and refused as busy while another
// request for the resource is in flight.
func TestAdmitPartnerHeldStillFences(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	_, p := newCheckedPartners(t, client)
	_, unchecked := newPartners(t, client, 5*time.Second)
	s, _ := newCheckedPartners(t, client)
	ctx := context.Background()
	holder := mustAcquire(t, s, "report", newSession(t, s, 60))

	busy := mustAdmit(t, unchecked, admission(holder-1, 0))
	if _, err := p.AdmitPartner(ctx, admission(holder, 0)); !errors.Is(err, api.ErrResourceBusy) {
		t.Fatalf("AdmitPartner(holder %d) while another request is in flight = %v; want ErrResourceBusy", holder, err)
	}
	mustFinish(t, busy, nil)
	mustFinish(t, mustAdmit(t, unchecked, admission(holder+1000, 0)), nil)
	var stale *api.StaleTokenError
	if _, err := p.AdmitPartner(ctx, admission(holder, 0)); !errors.As(err, &stale) || stale.HighWaterMark != holder+1000 {
		t.Fatalf("AdmitPartner(holder %d) under mark %d = %v; want stale", holder, holder+1000, err)
	}
}
