package tokenstore_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
	"fencegate/internal/testenv"
)

// TestIdempotencyKeepsBodyRef: a stored response whose body is in the
// answer store keeps its reference, not a body, and gives it back on a
// replay; a response with both is refused and stores nothing.
func TestIdempotencyKeepsBodyRef(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	_, p := newPartners(t, etcd.Client(t), time.Second)
	adm := mustAdmit(t, p, keyed(5, "ref", "x"))
	if adm.ID == "" {
		t.Fatal("an admission without an ID")
	}
	ref := &api.BodyRef{ID: adm.ID, Size: 70000, SHA256: sha256.Sum256([]byte("body"))}
	mustFinish(t, adm, &api.StoredResponse{Status: 200, BodyRef: ref})
	again, err := p.AdmitPartner(context.Background(), keyed(5, "ref", "x"))
	if err != nil || again.Replay == nil || again.Replay.BodyRef == nil || *again.Replay.BodyRef != *ref || len(again.Replay.Body) != 0 {
		t.Fatalf("replay = %+v, %v; want the reference %+v and no body", again.Replay, err, ref)
	}
	both := mustAdmit(t, p, keyed(6, "both", "x"))
	if err := both.Finish(context.Background(), &api.StoredResponse{Status: 200, Body: []byte("b"), BodyRef: ref}); err == nil {
		t.Fatal("Finish with a body and a reference = nil; want an error")
	}
}

// TestIdempotencyBudgetAcrossStores: the records completed through one
// Partners count in the budget of another on the same etcd (a gateway
// started later), which refuses new keys and still replays old ones.
func TestIdempotencyBudgetAcrossStores(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	_, first := newPartners(t, etcd.Client(t), time.Second)
	budgets := []api.IdempotencyBudget{{Account: "route/payments", Records: 3}}
	claim := func(token api.Token, key string) api.PartnerAdmission {
		a := keyed(token, key, "x")
		a.Resource = api.Resource(fmt.Sprintf("partner/payments/%s", key))
		a.Idempotency.Budgets = budgets
		return a
	}
	for i := range 3 {
		mustFinish(t, mustAdmit(t, first, claim(1, fmt.Sprintf("k%d", i))), &api.StoredResponse{Status: 201})
	}
	_, second := newPartners(t, etcd.Client(t), time.Second)
	for name, p := range map[string]interface {
		AdmitPartner(context.Context, api.PartnerAdmission) (api.Admission, error)
		IdempotencyUsage(context.Context, string) (api.IdempotencyUsage, error)
	}{"first": first, "second": second} {
		u, err := p.IdempotencyUsage(context.Background(), "route/payments")
		if err != nil || u.Records != 3 || u.Bytes < 3*100 {
			t.Fatalf("%s: usage = %+v, %v; want 3 records of some bytes", name, u, err)
		}
		if _, err := p.AdmitPartner(context.Background(), claim(1, "k-new")); !errors.Is(err, api.ErrIdempotencyBudgetExhausted) {
			t.Fatalf("%s: a new key over the budget = %v; want ErrIdempotencyBudgetExhausted", name, err)
		}
		if adm, err := p.AdmitPartner(context.Background(), claim(1, "k1")); err != nil || adm.Replay == nil {
			t.Fatalf("%s: a key with a record over the budget = %+v, %v; want its replay", name, adm, err)
		}
	}
}

// TestIdempotencyUsageKeyPerWindow: records completed a second apart in
// one window count in one usage key, on one lease that outlives them.
func TestIdempotencyUsageKeyPerWindow(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	_, p := newPartners(t, client, time.Second)
	usageLease := func() (clientv3.LeaseID, string) {
		t.Helper()
		resp, err := client.Get(t.Context(), "test/idem-usage/", clientv3.WithPrefix())
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("usage keys = %v, %v; want 1", resp.Kvs, err)
		}
		return clientv3.LeaseID(resp.Kvs[0].Lease), string(resp.Kvs[0].Value)
	}
	finish := func(key string) {
		a := keyed(1, key, "x")
		a.Resource = api.Resource("partner/payments/" + key)
		a.Idempotency.Budgets = []api.IdempotencyBudget{{Account: "route/payments", Records: 10}}
		mustFinish(t, mustAdmit(t, p, a), &api.StoredResponse{Status: 201})
	}
	finish("k1")
	first, _ := usageLease()
	time.Sleep(1100 * time.Millisecond) // another second: another TTL to the window's end
	finish("k2")
	second, value := usageLease()
	if first != second || !strings.Contains(value, " 00000000000000000002 ") {
		t.Fatalf("usage key on lease %x then %x, value %q; want one lease, 2 records", first, second, value)
	}
	ttl, err := client.TimeToLive(t.Context(), second)
	if err != nil || time.Duration(ttl.TTL)*time.Second < 24*time.Hour {
		t.Fatalf("usage lease TTL = %+v, %v; want over the records' 24 h", ttl, err)
	}
}
