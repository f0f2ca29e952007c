package tokenstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"fencegate/api"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func newStore(tb testing.TB, client *clientv3.Client) *tokenstore.Store {
	tb.Helper()
	s, err := tokenstore.New(client, tokenstore.Config{Prefix: "test/", RequestTimeout: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestFenceCheckSequence(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newStore(t, etcd.Client(t))
	ctx := context.Background()
	const res = api.Resource("s3/b/k")
	steps := []struct {
		token   api.Token
		wantHWM api.Token // after the step
		stale   bool
	}{
		{33, 33, false}, // creates the key
		{33, 33, false}, // equal tokens are accepted
		{34, 34, false},
		{33, 34, true},
		{1, 34, true},
		{api.MaxToken, api.MaxToken, false},
		{api.MaxToken - 1, api.MaxToken, true},
	}
	for i, st := range steps {
		err := s.FenceCheck(ctx, res, st.token)
		var stale *api.StaleTokenError
		if st.stale != errors.As(err, &stale) || !st.stale && err != nil {
			t.Fatalf("step %d: FenceCheck(%d) = %v; want stale=%v", i, st.token, err, st.stale)
		}
		if st.stale && (stale.HighWaterMark != st.wantHWM || stale.Token != st.token || stale.Resource != res) {
			t.Fatalf("step %d: FenceCheck(%d) = %+v; want HWM %d", i, st.token, stale, st.wantHWM)
		}
		if hwm, err := s.HighWaterMark(ctx, res); err != nil || hwm != st.wantHWM {
			t.Fatalf("step %d: HighWaterMark = %d, %v; want %d", i, hwm, err, st.wantHWM)
		}
	}
	if hwm, err := s.HighWaterMark(ctx, "s3/b/never-written"); err != nil || hwm != 0 {
		t.Fatalf("HighWaterMark(never written) = %d, %v; want 0, nil", hwm, err)
	}
}

// TestFenceCheckConcurrentIsMonotonic races many fence checks with random
// tokens on one resource and reads the key's whole history back from etcd:
// every value ever stored must be at least the one before it.
func TestFenceCheckConcurrentIsMonotonic(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	// 200 checks of one mark at once, under -race on a loaded machine,
	// can take longer than newStore's 1 s: an answer of unknown outcome
	// is not what this test is about, so the stores wait longer.
	slow := func(c *clientv3.Client) *tokenstore.Store {
		s, err := tokenstore.New(c, tokenstore.Config{Prefix: "test/", RequestTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	stores := []*tokenstore.Store{slow(client), slow(etcd.Client(t))}
	ctx := context.Background()
	const res = api.Resource("s3/b/hot")
	rng := rand.New(rand.NewPCG(7, 7))
	tokens := make([]api.Token, 200)
	for i := range tokens {
		tokens[i] = api.Token(rng.IntN(1000) + 1)
	}
	accepted := make([]bool, len(tokens))
	var wg sync.WaitGroup
	for i, tok := range tokens {
		wg.Go(func() {
			err := stores[i%2].FenceCheck(ctx, res, tok)
			var stale *api.StaleTokenError
			switch {
			case err == nil:
				accepted[i] = true
			case errors.As(err, &stale):
				if stale.HighWaterMark <= tok {
					t.Errorf("token %d refused with HWM %d", tok, stale.HighWaterMark)
				}
			default:
				t.Errorf("FenceCheck(%d): %v", tok, err)
			}
		})
	}
	wg.Wait()

	var maxTok api.Token
	for _, tok := range tokens {
		maxTok = max(maxTok, tok)
	}
	hwm, err := stores[0].HighWaterMark(ctx, res)
	if err != nil || hwm != maxTok {
		t.Fatalf("final HighWaterMark = %d, %v; want the largest token %d", hwm, err, maxTok)
	}

	// Replay the key's history with a watch from revision 1.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	acceptedCount := 0
	for _, ok := range accepted {
		if ok {
			acceptedCount++
		}
	}
	var history []string
	for wr := range client.Watch(wctx, "test/hwm/"+string(res), clientv3.WithRev(1)) {
		for _, ev := range wr.Events {
			history = append(history, string(ev.Kv.Value))
		}
		if len(history) >= acceptedCount {
			break
		}
	}
	if len(history) != acceptedCount {
		t.Fatalf("etcd history has %d writes; %d fence checks were accepted", len(history), acceptedCount)
	}
	for i := 1; i < len(history); i++ {
		if history[i] < history[i-1] {
			t.Fatalf("high-water mark decreased: %s then %s", history[i-1], history[i])
		}
	}
}

func TestCachedHighWaterMarkIsALowerBound(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	a, b := newStore(t, etcd.Client(t)), newStore(t, etcd.Client(t))
	ctx := context.Background()
	const res = api.Resource("s3/b/k")
	if _, ok := a.CachedHighWaterMark(res); ok {
		t.Fatal("CachedHighWaterMark known before any etcd answer")
	}
	if err := a.FenceCheck(ctx, res, 10); err != nil {
		t.Fatal(err)
	}
	if err := b.FenceCheck(ctx, res, 20); err != nil { // a does not know
		t.Fatal(err)
	}
	if got, _ := a.CachedHighWaterMark(res); got != 10 {
		t.Fatalf("a.CachedHighWaterMark = %d; want 10 (what a learned)", got)
	}
	if err := a.FenceCheck(ctx, res, 15); !errors.Is(err, api.ErrStaleToken) {
		t.Fatalf("a.FenceCheck(15) = %v; want stale", err)
	}
	if got, _ := a.CachedHighWaterMark(res); got != 20 {
		t.Fatalf("a.CachedHighWaterMark = %d after a refusal; want 20, learned from etcd", got)
	}
}

// TestCacheBytesBoundsLongNames: a Store's cache of marks, fed resources
// with names near the longest, holds about its byte budget of them; the
// newest still serves the fast reject, and a forgotten one is still
// refused, by etcd: forgetting costs a round trip, never a wrong answer.
func TestCacheBytesBoundsLongNames(t *testing.T) {
	const budget = 128 << 10
	etcd := testenv.StartEtcd(t)
	s, err := tokenstore.New(etcd.Client(t), tokenstore.Config{Prefix: "test/", RequestTimeout: time.Second, CacheBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	long := strings.Repeat("k", 1000)
	resources := make([]api.Resource, 300) // about 300 KiB of names
	for i := range resources {
		resources[i] = api.Resource(fmt.Sprintf("s3/b/%04d-%s", i, long))
		if err := s.FenceCheck(ctx, resources[i], 10); err != nil {
			t.Fatal(err)
		}
	}
	cachedBytes, forgotten := 0, api.Resource("")
	for _, r := range resources {
		if _, ok := s.CachedHighWaterMark(r); ok {
			cachedBytes += len(r)
		} else {
			forgotten = r
		}
	}
	if cachedBytes > budget {
		t.Errorf("the cache knows %d bytes of names; want at most its %d-byte budget", cachedBytes, budget)
	}
	newest := resources[len(resources)-1]
	if hwm, ok := s.CachedHighWaterMark(newest); !ok || hwm != 10 {
		t.Errorf("CachedHighWaterMark(newest) = %d, %v; want 10, true", hwm, ok)
	}
	if forgotten == "" {
		t.Fatal("the cache forgot nothing of 300 KiB of names in a 128 KiB budget")
	}
	if err := s.FenceCheck(ctx, forgotten, 9); !errors.Is(err, api.ErrStaleToken) {
		t.Errorf("FenceCheck(forgotten, 9) = %v; want stale (etcd holds 10)", err)
	}
}

// TestFenceCheckFailsClosed stops etcd: the outcome of a fence check is
// then unknown and must be reported as ErrUnavailable, never as accepted.
func TestFenceCheckFailsClosed(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newStore(t, etcd.Client(t))
	ctx := context.Background()
	if err := s.FenceCheck(ctx, "s3/b/k", 5); err != nil {
		t.Fatal(err)
	}
	etcd.Stop(t)
	for _, tok := range []api.Token{4, 5, 6} {
		err := s.FenceCheck(ctx, "s3/b/k", tok)
		if !errors.Is(err, api.ErrUnavailable) {
			t.Errorf("FenceCheck(%d) with etcd stopped = %v; want ErrUnavailable", tok, err)
		}
	}
	if _, err := s.HighWaterMark(ctx, "s3/b/k"); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("HighWaterMark with etcd stopped = %v; want ErrUnavailable", err)
	}
	if err := s.Ping(ctx); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("Ping with etcd stopped = %v; want ErrUnavailable", err)
	}
	etcd.Restart(t)
	// The client reconnects with backoff; until it has, checks stay
	// unavailable.
	deadline := time.Now().Add(15 * time.Second)
	err := s.FenceCheck(ctx, "s3/b/k", 4)
	for errors.Is(err, api.ErrUnavailable) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		err = s.FenceCheck(ctx, "s3/b/k", 4)
	}
	if !errors.Is(err, api.ErrStaleToken) {
		t.Errorf("FenceCheck(4) after restart = %v; want stale (HWM 5 survived)", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	c := etcd.Client(t)
	for _, cfg := range []tokenstore.Config{{RequestTimeout: -1}, {CacheBytes: -1}} {
		if _, err := tokenstore.New(c, cfg); err == nil {
			t.Errorf("New(%+v) succeeded; want an error", cfg)
		}
	}
	if _, err := tokenstore.New(nil, tokenstore.Config{}); err == nil {
		t.Error("New(nil client) succeeded; want an error")
	}
}

// TestFenceCheckRenewWritesAnEqualToken: FenceCheck of the token the mark
// already holds is confirmed read-only (the mark's mod revision stays);
// FenceCheckRenew of it writes the mark again (a new mod revision), which
// is what a mark evictor's compare sees.
func TestFenceCheckRenewWritesAnEqualToken(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	s := newStore(t, client)
	ctx := context.Background()
	const res = api.Resource("s3/b/k")
	modRevision := func() int64 {
		t.Helper()
		resp, err := client.Get(ctx, "test/hwm/"+string(res))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("reading the mark: %v, %d keys", err, len(resp.Kvs))
		}
		return resp.Kvs[0].ModRevision
	}
	if err := s.FenceCheck(ctx, res, 5); err != nil {
		t.Fatal(err)
	}
	first := modRevision()
	if err := s.FenceCheck(ctx, res, 5); err != nil {
		t.Fatal(err)
	}
	if got := modRevision(); got != first {
		t.Fatalf("FenceCheck of the equal token moved the mod revision %d to %d; want a read-only confirmation", first, got)
	}
	if err := s.FenceCheckRenew(ctx, res, 5); err != nil {
		t.Fatal(err)
	}
	if got := modRevision(); got <= first {
		t.Fatalf("FenceCheckRenew of the equal token left the mod revision at %d; want a new one", got)
	}
	var stale *api.StaleTokenError
	if err := s.FenceCheckRenew(ctx, res, 4); !errors.As(err, &stale) || stale.HighWaterMark != 5 {
		t.Fatalf("FenceCheckRenew(4) = %v; want stale with mark 5", err)
	}
}
