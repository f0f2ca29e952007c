package tokenstore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

const partnerRes = api.Resource("partner/payments/accounts/a1")

func newPartners(tb testing.TB, client *clientv3.Client, timeout time.Duration) (*tokenstore.Store, *tokenstore.Partners) {
	tb.Helper()
	s, err := tokenstore.New(client, tokenstore.Config{Prefix: "test/", RequestTimeout: timeout})
	if err != nil {
		tb.Fatal(err)
	}
	p, err := tokenstore.NewPartners(s)
	if err != nil {
		tb.Fatal(err)
	}
	return s, p
}

// admission is an admission without an idempotency key.
func admission(token api.Token, maxWait time.Duration) api.PartnerAdmission {
	return api.PartnerAdmission{Resource: partnerRes, Token: token, Hold: time.Second, MaxWait: maxWait}
}

// keyed is an admission with key and a fingerprint of body.
func keyed(token api.Token, key, body string) api.PartnerAdmission {
	a := admission(token, 0)
	a.Idempotency = &api.IdempotencyClaim{
		Scope:       "payments",
		Key:         api.IdempotencyKey(key),
		Fingerprint: api.NewFingerprint("POST", "accounts/a1/charges", []byte(body), token),
	}
	return a
}

func mustAdmit(tb testing.TB, p *tokenstore.Partners, req api.PartnerAdmission) api.Admission {
	tb.Helper()
	adm, err := p.AdmitPartner(context.Background(), req)
	if err != nil || adm.Finish == nil {
		tb.Fatalf("AdmitPartner(token %d) = %+v, %v; want admitted", req.Token, adm, err)
	}
	return adm
}

func mustFinish(tb testing.TB, adm api.Admission, resp *api.StoredResponse) {
	tb.Helper()
	if err := adm.Finish(context.Background(), resp); err != nil {
		tb.Fatalf("Finish: %v", err)
	}
}

// keyCount returns how many keys start with prefix.
func keyCount(tb testing.TB, c *clientv3.Client, prefix string) int64 {
	tb.Helper()
	resp, err := c.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		tb.Fatal(err)
	}
	return resp.Count
}

func TestAdmitPartnerSequence(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	s, p := newPartners(t, client, time.Second)
	ctx := context.Background()

	first := mustAdmit(t, p, admission(5, 0))
	if n := keyCount(t, client, "test/inflight/"+string(partnerRes)); n != 1 {
		t.Fatalf("%d in-flight markers after an admission; want 1", n)
	}
	// Busy: refused at once without waiting, and nothing is raised.
	if _, err := p.AdmitPartner(ctx, admission(7, 0)); !errors.Is(err, api.ErrResourceBusy) {
		t.Fatalf("AdmitPartner(7) while 5 is in flight = %v; want ErrResourceBusy", err)
	}
	if hwm, err := s.HighWaterMark(ctx, partnerRes); err != nil || hwm != 5 {
		t.Fatalf("HighWaterMark after a busy refusal = %d, %v; want 5 (a refused token raises nothing)", hwm, err)
	}
	// A stale token is refused even while the resource is busy.
	var stale *api.StaleTokenError
	if _, err := p.AdmitPartner(ctx, admission(4, 0)); !errors.As(err, &stale) || stale.HighWaterMark != 5 {
		t.Fatalf("AdmitPartner(4) = %v; want stale with high-water mark 5", err)
	}
	mustFinish(t, first, nil)
	if n := keyCount(t, client, "test/inflight/"); n != 0 {
		t.Fatalf("%d in-flight markers after Finish; want 0", n)
	}
	second := mustAdmit(t, p, admission(7, 0))
	mustFinish(t, second, nil)
	// Equal tokens are accepted, one at a time.
	mustFinish(t, mustAdmit(t, p, admission(7, 0)), nil)
	if _, err := p.AdmitPartner(ctx, admission(6, 0)); !errors.As(err, &stale) || stale.HighWaterMark != 7 {
		t.Fatalf("AdmitPartner(6) = %v; want stale with high-water mark 7", err)
	}
	if got, _ := p.CachedHighWaterMark(partnerRes); got != 7 {
		t.Fatalf("CachedHighWaterMark = %d; want 7", got)
	}
}

// TestAdmitPartnerIsOneTransaction counts etcd requests: once a lease is
// pooled, an admission (accepted, stale or busy) is one round trip, and
// Finish one more.
func TestAdmitPartnerIsOneTransaction(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client, calls := etcd.CountingClient(t)
	_, p := newPartners(t, client, time.Second)
	ctx := context.Background()
	mustFinish(t, mustAdmit(t, p, admission(1, 0)), nil) // grants the pooled lease

	steps := []struct {
		name string
		run  func() error
		want int64
	}{
		{"accepted", func() error {
			adm, err := p.AdmitPartner(ctx, admission(5, 0))
			if err == nil {
				t.Cleanup(func() { _ = adm.Finish(context.Background(), nil) })
			}
			return err
		}, 1},
		{"busy", func() error {
			_, err := p.AdmitPartner(ctx, admission(6, 0))
			if !errors.Is(err, api.ErrResourceBusy) {
				return err
			}
			return nil
		}, 1},
		{"stale", func() error {
			_, err := p.AdmitPartner(ctx, admission(2, 0))
			if !errors.Is(err, api.ErrStaleToken) {
				return err
			}
			return nil
		}, 1},
	}
	for _, st := range steps {
		before := calls.Count()
		if err := st.run(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if n := calls.Count() - before; n != st.want {
			t.Errorf("%s admission made %d etcd requests; want %d", st.name, n, st.want)
		}
	}
}

// TestAdmitPartnerSerializesConcurrent races admissions with random tokens
// from two gateways (two clients, two stores) on one resource, with long
// waits: at most one is ever admitted at a time, and the tokens admitted,
// in the order they were admitted, never decrease.
func TestAdmitPartnerSerializesConcurrent(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	_, p1 := newPartners(t, etcd.Client(t), time.Second)
	_, p2 := newPartners(t, etcd.Client(t), time.Second)
	gateways := []*tokenstore.Partners{p1, p2}
	rng := rand.New(rand.NewPCG(3, 4))
	const requests = 40
	tokens := make([]api.Token, requests)
	for i := range tokens {
		tokens[i] = api.Token(rng.IntN(60) + 1)
		if i%8 == 0 {
			// Equal tokens are never stale, so these five are admitted
			// whatever order the scheduler picks: the test always
			// sees more than one admission.
			tokens[i] = 61
		}
	}
	var (
		inFlight, maxInFlight atomic.Int64
		mu                    sync.Mutex
		order                 []api.Token
		wg                    sync.WaitGroup
	)
	for i, tok := range tokens {
		wg.Go(func() {
			adm, err := gateways[i%2].AdmitPartner(context.Background(), admission(tok, 20*time.Second))
			var stale *api.StaleTokenError
			switch {
			case errors.As(err, &stale):
				if stale.HighWaterMark <= tok {
					t.Errorf("token %d refused as stale with high-water mark %d", tok, stale.HighWaterMark)
				}
				return
			case err != nil:
				t.Errorf("AdmitPartner(%d): %v", tok, err)
				return
			}
			n := inFlight.Add(1)
			for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
			}
			mu.Lock()
			order = append(order, tok)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond) // "upstream"
			inFlight.Add(-1)
			if err := adm.Finish(context.Background(), nil); err != nil {
				t.Errorf("Finish(%d): %v", tok, err)
			}
		})
	}
	wg.Wait()
	if m := maxInFlight.Load(); m != 1 {
		t.Fatalf("%d admissions held the resource at once; want 1", m)
	}
	for i := 1; i < len(order); i++ {
		if order[i] < order[i-1] {
			t.Fatalf("admitted tokens decrease: %v", order)
		}
	}
	if len(order) < 2 {
		t.Fatalf("only %d admissions; the test needs more", len(order))
	}
	t.Logf("%d requests, %d admitted in order %v", requests, len(order), order)
}

// TestAdmitPartnerStaleWhileWaiting: a request waits for the marker; while
// it waits, a larger token raises the mark; when the marker goes, the
// waiter is refused as stale.
func TestAdmitPartnerStaleWhileWaiting(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s, p := newPartners(t, etcd.Client(t), time.Second)
	waiterClient, calls := etcd.CountingClient(t)
	_, waiter := newPartners(t, waiterClient, time.Second)
	holder := mustAdmit(t, p, admission(5, 0))
	result := make(chan error, 1)
	go func() {
		_, err := waiter.AdmitPartner(context.Background(), admission(6, 20*time.Second))
		result <- err
	}()
	// The waiter is watching once it has made three requests: its lease
	// grant, the admission that found the resource busy, the watch.
	for calls.Count() < 3 {
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.FenceCheck(context.Background(), partnerRes, 9); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-result:
		t.Fatalf("waiter returned %v while the marker was held", err)
	default:
	}
	mustFinish(t, holder, nil)
	select {
	case err := <-result:
		var stale *api.StaleTokenError
		if !errors.As(err, &stale) || stale.HighWaterMark != 9 {
			t.Fatalf("waiter = %v; want stale with high-water mark 9", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter did not return within 5s of the marker's deletion")
	}
}

// TestAdmitPartnerWaitsThenAdmits: a waiter is admitted once the holder
// finishes, not before, and by watching the marker, not polling: its etcd
// requests do not grow with the wait.
func TestAdmitPartnerWaitsThenAdmits(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	_, holderStore := newPartners(t, etcd.Client(t), time.Second)
	waiterClient, calls := etcd.CountingClient(t)
	_, waiterStore := newPartners(t, waiterClient, time.Second)
	holder := mustAdmit(t, holderStore, admission(5, 0))
	var finished atomic.Bool
	time.AfterFunc(time.Second, func() {
		finished.Store(true)
		_ = holder.Finish(context.Background(), nil)
	})
	adm := mustAdmit(t, waiterStore, admission(6, 20*time.Second))
	if !finished.Load() {
		t.Fatal("waiter admitted while the holder's marker was held")
	}
	mustFinish(t, adm, nil)
	// A lease grant, the busy admission, the watch, the admission, Finish.
	if n := calls.Count(); n > 6 {
		t.Fatalf("waiting for 1s took %d etcd requests; want at most 6 (a watch, not polling)", n)
	}
}

func TestAdmitPartnerWaitIsBounded(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	_, p := newPartners(t, etcd.Client(t), time.Second)
	holder := mustAdmit(t, p, admission(5, 0))
	defer mustFinish(t, holder, nil)
	start := time.Now()
	_, err := p.AdmitPartner(context.Background(), admission(6, 300*time.Millisecond))
	waited := time.Since(start)
	if !errors.Is(err, api.ErrResourceBusy) {
		t.Fatalf("AdmitPartner with the marker held for longer than MaxWait = %v; want ErrResourceBusy", err)
	}
	if waited < 300*time.Millisecond {
		t.Fatalf("gave up after %v; want a wait of MaxWait (300ms) first", waited)
	}
	// A client that goes away stops the wait.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := p.AdmitPartner(ctx, admission(6, 10*time.Second)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AdmitPartner with an ending context = %v; want its error", err)
	}
}

// TestMarkerOutlivesDeadGatewayByItsHold admits on one client and closes
// it without finishing, as a gateway that dies would. The marker (and the
// in-flight record) stay until their lease expires: about Hold + 2 x
// RequestTimeout + 1 s, plus up to 1 s of lease sharing. Then another
// gateway is admitted.
func TestMarkerOutlivesDeadGatewayByItsHold(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	deadClient, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, dead := newPartners(t, deadClient, 500*time.Millisecond)
	_, alive := newPartners(t, etcd.Client(t), 500*time.Millisecond)
	req := keyed(5, "order-1", "body")
	req.Hold = time.Second
	if _, err := dead.AdmitPartner(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	died := time.Now()
	deadClient.Close()

	lower, upper := time.Second+2*500*time.Millisecond+time.Second, 5*time.Second
	var busyUntil time.Duration
	for {
		_, err := alive.AdmitPartner(context.Background(), req)
		if !errors.Is(err, api.ErrIdempotencyInFlight) {
			busyUntil = time.Since(died)
			if err != nil {
				t.Fatalf("AdmitPartner after the record expired = %v; want admitted", err)
			}
			break
		}
		if time.Since(died) > upper+2*time.Second {
			t.Fatalf("record still in flight %v after the gateway died", time.Since(died))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if busyUntil < lower-200*time.Millisecond {
		t.Fatalf("the dead gateway's record lasted %v; want at least its hold and margin, %v", busyUntil, lower)
	}
	t.Logf("the dead gateway's marker and record lasted %v (hold 1s + margin 2s, lease TTL rounded up)", busyUntil)
}

func TestIdempotencyRecordLifecycle(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	_, p := newPartners(t, client, time.Second)
	ctx := context.Background()

	first := mustAdmit(t, p, keyed(5, "order-1", `{"amount":5}`))
	if _, err := p.AdmitPartner(ctx, keyed(5, "order-1", `{"amount":5}`)); !errors.Is(err, api.ErrIdempotencyInFlight) {
		t.Fatalf("same key while in flight = %v; want ErrIdempotencyInFlight", err)
	}
	if _, err := p.AdmitPartner(ctx, keyed(5, "order-1", `{"amount":6}`)); !errors.Is(err, api.ErrIdempotencyMismatch) {
		t.Fatalf("same key, other body, while in flight = %v; want ErrIdempotencyMismatch", err)
	}
	body := []byte("line 1\nline 2\n\x00binary\xff")
	stored := &api.StoredResponse{
		Status: 201,
		Header: map[string][]string{"Content-Type": {"application/json"}, "Location": {"/charges/ch_1"}},
		Body:   body,
	}
	mustFinish(t, first, stored)
	if n := keyCount(t, client, "test/inflight/"); n != 0 {
		t.Fatalf("%d markers after Finish; want 0", n)
	}
	adm, err := p.AdmitPartner(ctx, keyed(5, "order-1", `{"amount":5}`))
	if err != nil || adm.Replay == nil || adm.Finish != nil {
		t.Fatalf("retry after completion = %+v, %v; want a replay", adm, err)
	}
	if r := adm.Replay; r.Status != 201 || string(r.Body) != string(body) || r.Header["Location"][0] != "/charges/ch_1" || r.Header["Content-Type"][0] != "application/json" {
		t.Fatalf("replay = %+v; want the stored response", r)
	}
	// A replay needs no fence: even once the token is stale, the stored
	// answer of the request that was admitted comes back.
	mustFinish(t, mustAdmit(t, p, admission(9, 0)), nil)
	if adm, err := p.AdmitPartner(ctx, keyed(5, "order-1", `{"amount":5}`)); err != nil || adm.Replay == nil {
		t.Fatalf("retry with a now stale token = %+v, %v; want the replay", adm, err)
	}
	if _, err := p.AdmitPartner(ctx, keyed(9, "order-1", `{"amount":5}`)); !errors.Is(err, api.ErrIdempotencyMismatch) {
		t.Fatalf("same key, other token = %v; want ErrIdempotencyMismatch", err)
	}

	// The completed record lives on a retention lease of 24 h (+ up to a
	// minute of sharing), not on the in-flight lease.
	resp, err := client.Get(ctx, "test/idem/payments/order-1")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get record: %v", err)
	}
	ttl, err := client.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(ttl.TTL) * time.Second; got < 24*time.Hour-time.Minute || got > 24*time.Hour+2*time.Minute {
		t.Fatalf("completed record's lease has %v left; want about 24h", got)
	}

	// Keys are scoped: the same key on another route is another record.
	other := keyed(5, "order-1", `{"amount":5}`)
	other.Resource = "partner/mail/x"
	other.Idempotency.Scope = "mail"
	mustFinish(t, mustAdmit(t, p, other), nil)

	// A stale request with a new key leaves no record behind.
	if _, err := p.AdmitPartner(ctx, keyed(4, "order-2", "x")); !errors.Is(err, api.ErrStaleToken) {
		t.Fatalf("stale request with a new key = %v; want stale", err)
	}
	if n := keyCount(t, client, "test/idem/payments/order-2"); n != 0 {
		t.Fatalf("a stale request left %d records", n)
	}
	// Finish(nil) (nothing was forwarded) drops the record: the key may
	// be used again, even for another request.
	mustFinish(t, mustAdmit(t, p, keyed(9, "order-3", "a")), nil)
	mustFinish(t, mustAdmit(t, p, keyed(9, "order-3", "b")), &api.StoredResponse{Status: 200})
	if _, err := p.AdmitPartner(ctx, keyed(9, "order-3", "a")); !errors.Is(err, api.ErrIdempotencyMismatch) {
		t.Fatalf("key reused after a forget and a completion = %v; want mismatch", err)
	}
}

func TestIdempotencyStoresLargeBody(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	_, p := newPartners(t, etcd.Client(t), 5*time.Second)
	body := []byte(strings.Repeat("0123456789abcdef", 1<<16)) // 1 MiB
	mustFinish(t, mustAdmit(t, p, keyed(5, "big", "x")), &api.StoredResponse{Status: 200, Body: body})
	adm, err := p.AdmitPartner(context.Background(), keyed(5, "big", "x"))
	if err != nil || adm.Replay == nil || string(adm.Replay.Body) != string(body) {
		t.Fatalf("replay of a 1 MiB body: %v, %d bytes", err, len(adm.Replay.Body))
	}
}

func TestAdmitPartnerFailsClosed(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	_, p := newPartners(t, client, 500*time.Millisecond)
	mustFinish(t, mustAdmit(t, p, admission(5, 0)), nil)
	heldReq := keyed(5, "held", "x")
	heldReq.Resource = "partner/payments/accounts/other"
	held := mustAdmit(t, p, heldReq)
	etcd.Stop(t)
	// A hold that no pooled lease fits needs a lease grant: it too must
	// give up after the request timeout, not wait for etcd to return.
	longHold := admission(6, 0)
	longHold.Hold = 7 * time.Second
	for _, req := range []api.PartnerAdmission{admission(6, 0), admission(6, time.Second), keyed(6, "k", "x"), longHold} {
		if _, err := p.AdmitPartner(context.Background(), req); !errors.Is(err, api.ErrUnavailable) {
			t.Errorf("AdmitPartner(hold %v) with etcd stopped = %v; want ErrUnavailable", req.Hold, err)
		}
	}
	// Finish, which grants a retention lease to store the response, is
	// bounded too: it fails, and the record expires with its lease.
	if err := held.Finish(context.Background(), &api.StoredResponse{Status: 200}); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("Finish with etcd stopped = %v; want ErrUnavailable", err)
	}
	etcd.Restart(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		adm, err := p.AdmitPartner(context.Background(), admission(6, 0))
		if err == nil {
			mustFinish(t, adm, nil)
			break
		}
		if !errors.Is(err, api.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("AdmitPartner after restart = %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestIdempotencyHeaderFingerprint: a retry with the same key and
// request fingerprint but other forwarded headers (HeaderFingerprint) is
// refused as a mismatch, and the same headers are replayed. A record an
// older gateway wrote, without a header fingerprint, is still answered:
// it is matched on the request fingerprint alone, as that gateway would
// have, so that a retry across an upgrade gets its answer, not a 422.
func TestIdempotencyHeaderFingerprint(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	_, p := newPartners(t, client, 5*time.Second)
	withHeaders := func(key string, header map[string][]string) api.PartnerAdmission {
		a := keyed(7, key, `{"amount":5}`)
		a.Idempotency.HeaderFingerprint = api.NewHeaderFingerprint(header)
		return a
	}
	jsonType := map[string][]string{"Content-Type": {"application/json"}}
	for _, key := range []string{"new", "legacy"} {
		mustFinish(t, mustAdmit(t, p, withHeaders(key, jsonType)), &api.StoredResponse{Status: 201, Body: []byte(key)})
	}
	// The record of "legacy" as a gateway from before header
	// fingerprints wrote it: the same, without header_fingerprint.
	recordKey := "test/idem/payments/legacy"
	resp, err := client.Get(t.Context(), recordKey)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get %s: %v, %d keys", recordKey, err, len(resp.Kvs))
	}
	value := string(resp.Kvs[0].Value)
	start := strings.Index(value, `,"header_fingerprint":"`)
	if start < 0 {
		t.Fatalf("record %q has no header_fingerprint", value)
	}
	end := start + len(`,"header_fingerprint":"`) + 64 + 1
	if _, err := client.Put(t.Context(), recordKey, value[:start]+value[end:], clientv3.WithIgnoreLease()); err != nil {
		t.Fatal(err)
	}

	xml := map[string][]string{"Content-Type": {"application/xml"}}
	for _, tc := range []struct {
		key    string
		header map[string][]string
		want   string // the replayed body; "" means a mismatch
	}{
		{"new", jsonType, "new"},
		{"new", map[string][]string{"content-type": {"application/json"}}, "new"},
		{"new", xml, ""},
		{"new", nil, ""},
		{"legacy", jsonType, "legacy"},
		{"legacy", xml, "legacy"},
	} {
		adm, err := p.AdmitPartner(t.Context(), withHeaders(tc.key, tc.header))
		switch {
		case tc.want == "" && !errors.Is(err, api.ErrIdempotencyMismatch):
			t.Errorf("AdmitPartner(key %s, headers %v) = %+v, %v; want ErrIdempotencyMismatch", tc.key, tc.header, adm, err)
		case tc.want != "" && (err != nil || adm.Replay == nil || string(adm.Replay.Body) != tc.want):
			t.Errorf("AdmitPartner(key %s, headers %v) = %+v, %v; want the replay of %q", tc.key, tc.header, adm, err, tc.want)
		}
	}
}
