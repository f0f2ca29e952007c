package tokenstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/internal/testenv"
)

// TestLocksPages lists lock queues under a prefix in pages: each with its
// holder's token, its length and its waiters' tokens in queue order, and
// the tokens listed for the waiters are the ones they are granted.
func TestLocksPages(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newStore(t, etcd.Client(t))
	ctx := context.Background()
	holders := map[string]api.Token{}
	for _, name := range []string{"a-1", "a-2", "a-3", "b-1"} {
		holders[name] = mustAcquire(t, s, name, newSession(t, s, 30))
	}
	// Two waiters on a-1, queued one after the other.
	type grant struct {
		token api.Token
		err   error
	}
	grants := make(chan grant, 2)
	for i := range 2 {
		session := newSession(t, s, 30)
		go func() {
			g, err := s.Acquire(ctx, "a-1", session, anonymous, longWait)
			grants <- grant{g.Token, err}
		}()
		testenv.WaitUntil(t, 10*time.Second, "waiter queued", func() bool {
			st, err := s.LockState(ctx, "a-1", 0, nil)
			return err == nil && st.QueueLength == int64(2+i)
		})
	}

	first, err := s.Locks(ctx, "a-", "", 2)
	if err != nil {
		t.Fatal(err)
	}
	if !first.More || len(first.Locks) != 2 {
		t.Fatalf("Locks(a-, limit 2) = %+v; want a-1 and a-2, and more", first)
	}
	a1, a2 := first.Locks[0], first.Locks[1]
	if a1.Name != "a-1" || a1.Holder != holders["a-1"] || a1.QueueLength != 3 || len(a1.Waiters) != 2 || !slices.IsSorted(a1.Waiters) || a1.Waiters[0] <= a1.Holder {
		t.Fatalf("a-1 = %+v; want holder %d, queue length 3 and two waiters after it in order", a1, holders["a-1"])
	}
	if a2.Name != "a-2" || a2.Holder != holders["a-2"] || a2.QueueLength != 1 || len(a2.Waiters) != 0 {
		t.Fatalf("a-2 = %+v; want holder %d alone", a2, holders["a-2"])
	}
	second, err := s.Locks(ctx, "a-", "a-2", 2)
	if err != nil {
		t.Fatal(err)
	}
	if second.More || len(second.Locks) != 1 || second.Locks[0].Name != "a-3" || second.Locks[0].Holder != holders["a-3"] {
		t.Fatalf("Locks(a-, after a-2) = %+v; want a-3 only, and no more (b-1 is outside the prefix)", second)
	}

	// The first waiter is granted the token listed first.
	if _, err := s.Release(ctx, "a-1", holders["a-1"], nil); err != nil {
		t.Fatal(err)
	}
	g := <-grants
	if g.err != nil || g.token != a1.Waiters[0] {
		t.Fatalf("first waiter granted %d, %v; the listing said %d", g.token, g.err, a1.Waiters[0])
	}
	if _, err := s.Release(ctx, "a-1", g.token, nil); err != nil {
		t.Fatal(err)
	}
	if g := <-grants; g.err != nil || g.token != a1.Waiters[1] {
		t.Fatalf("second waiter granted %d, %v; the listing said %d", g.token, g.err, a1.Waiters[1])
	}
}

// TestInFlightLists lists a partner request's in-flight marker, with its
// token, while it is in flight, and no longer once it is finished.
func TestInFlightLists(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s, p := newPartners(t, etcd.Client(t), 5*time.Second)
	ctx := context.Background()
	adm := mustAdmit(t, p, admission(7, 0))
	page, err := s.InFlight(ctx, "partner/", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Markers) != 1 || page.Markers[0].Resource != partnerRes || page.Markers[0].Token != 7 || page.More {
		t.Fatalf("InFlight(partner/) = %+v; want %s with token 7", page, partnerRes)
	}
	if page, err := s.InFlight(ctx, "partner/other/", "", 10); err != nil || len(page.Markers) != 0 {
		t.Fatalf("InFlight(partner/other/) = %+v, %v; want none", page, err)
	}
	mustFinish(t, adm, &api.StoredResponse{Status: 201})
	if page, err := s.InFlight(ctx, "partner/", "", 10); err != nil || len(page.Markers) != 0 {
		t.Fatalf("InFlight after Finish = %+v, %v; want none", page, err)
	}
}
