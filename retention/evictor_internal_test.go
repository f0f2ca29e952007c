package retention

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"fencegate/api"
	"fencegate/gateway"
	"fencegate/internal/testenv"
)

const testRetention = time.Hour // on the tests' fake clock

// TestEvictedMarkStillRefusesStaleWriter evicts the mark of an object
// that records it, and then sends stale writes (tokens below the evicted
// mark): through a gateway that knows nothing (no cached mark, no cached
// version) the observation refuses them, and through the gateway that
// wrote, its caches do. Either way 409, and S3 keeps the newer bytes.
func TestEvictedMarkStillRefusesStaleWriter(t *testing.T) {
	st := newStack(t)
	writer := st.gateway(t, gateway.Config{})
	st.mustWrite(t, writer, "k", 3, []byte("old"), http.StatusCreated)
	st.mustWrite(t, writer, "k", 5, []byte("new"), http.StatusOK)
	e := st.evictor(t, Config{Retention: testRetention})
	agedPass(t, st, e, testRetention)
	if got := e.Stats().Evicted[evictedObject]; got != 1 {
		t.Fatalf("evicted %d object marks; want 1 (stats %+v)", got, e.Stats())
	}
	if hwm := st.mark(t, "k"); hwm != 0 {
		t.Fatalf("mark after eviction = %d; want none", hwm)
	}
	fresh := st.gateway(t, gateway.Config{})
	for _, w := range []struct {
		name  string
		url   string
		token api.Token
		body  []byte
	}{
		{"PUT through a fresh gateway", fresh, 4, []byte("stale")},
		{"DELETE through a fresh gateway", fresh, 4, nil},
		{"PUT with the old token", fresh, 3, []byte("old")},
		{"PUT through the writer's gateway", writer, 4, []byte("stale")},
	} {
		if got := st.write(t, w.url, "k", w.token, w.body); got != http.StatusConflict {
			t.Errorf("%s, token %d, after the eviction = %d; want 409", w.name, w.token, got)
		}
	}
	if body, token, ok := st.stored(t, "k"); !ok || body != "new" || token != "5" {
		t.Fatalf("S3 holds %q token %q (exists %v); want \"new\" token 5", body, token, ok)
	}
}

// TestStaleWriterObservedBeforeEvictionIsRefusedByTheCondition: a stale
// writer observes the object, the newer writer writes, the newer mark is
// evicted, and only then the stale writer's fence check runs: with no
// mark it passes, and the conditional write (If-Match the version it
// observed) is what refuses it; observing again, it is refused 409.
func TestStaleWriterObservedBeforeEvictionIsRefusedByTheCondition(t *testing.T) {
	st := newStack(t)
	observed, release := make(chan struct{}), make(chan struct{})
	hooks := &gateway.TestHooks{AfterObserve: func(ctx context.Context, _ api.Resource, token api.Token) {
		if token == 4 {
			close(observed)
			<-release
		}
	}}
	stale := st.gateway(t, gateway.Config{TestHooks: hooks})
	writer := st.gateway(t, gateway.Config{})
	st.mustWrite(t, writer, "k", 3, []byte("old"), http.StatusCreated)
	staleStatus := make(chan int, 1)
	go func() { staleStatus <- st.write(t, stale, "k", 4, []byte("stale")) }()
	<-observed // it saw "old", token 3
	st.mustWrite(t, writer, "k", 5, []byte("new"), http.StatusOK)
	e := st.evictor(t, Config{Retention: testRetention})
	agedPass(t, st, e, testRetention)
	if hwm := st.mark(t, "k"); hwm != 0 {
		t.Fatalf("mark after eviction = %d; want none (stats %+v)", hwm, e.Stats())
	}
	close(release)
	if got := <-staleStatus; got != http.StatusConflict {
		t.Fatalf("stale PUT token 4 = %d; want 409", got)
	}
	if body, token, ok := st.stored(t, "k"); !ok || body != "new" || token != "5" {
		t.Fatalf("S3 holds %q token %q (exists %v); want \"new\" token 5", body, token, ok)
	}
}

// TestRaiseBetweenReadAndEvictionIsKept raises the mark after the
// evictor read it and observed the object, before its eviction: the
// eviction's compare fails and the raised mark stays.
func TestRaiseBetweenReadAndEvictionIsKept(t *testing.T) {
	st := newStack(t)
	writer := st.gateway(t, gateway.Config{})
	st.mustWrite(t, writer, "k", 5, []byte("v5"), http.StatusCreated)
	e := st.evictor(t, Config{Retention: testRetention})
	e.beforeEvict = func(ctx context.Context, m api.Mark) {
		if m.Token != 5 {
			t.Errorf("evicting %+v; want the mark at 5", m)
		}
		st.mustWrite(t, writer, "k", 6, []byte("v6"), http.StatusOK)
	}
	agedPass(t, st, e, testRetention)
	if hwm := st.mark(t, "k"); hwm != 6 {
		t.Fatalf("mark = %d; want 6, raised between the read and the eviction", hwm)
	}
	s := e.Stats()
	if s.Kept[keptRaised] != 1 || s.Evicted[evictedObject] != 0 {
		t.Fatalf("stats %+v; want one kept as raised, none evicted", s)
	}
	if stale := st.write(t, st.gateway(t, gateway.Config{}), "k", 5, []byte("stale")); stale != http.StatusConflict {
		t.Fatalf("PUT token 5 after the raise = %d; want 409", stale)
	}
}

// TestDeleteBetweenReadAndEvictionKeepsTheTombstone: the holder of the
// mark's own token deletes the object between the evictor's read of the
// mark and its eviction. The delete's fence check must give the mark a
// new mod revision even though its token equals the mark (a write
// transaction, not a read-only confirmation), so the eviction's compare
// fails and the mark stays as the delete's tombstone: a stale writer
// cannot create the object again.
func TestDeleteBetweenReadAndEvictionKeepsTheTombstone(t *testing.T) {
	st := newStack(t)
	writer := st.gateway(t, gateway.Config{})
	st.mustWrite(t, writer, "k", 5, []byte("v5"), http.StatusCreated)
	e := st.evictor(t, Config{Retention: testRetention})
	e.beforeEvict = func(ctx context.Context, m api.Mark) {
		// The writer's gateway knows the mark is 5: without the write
		// transaction its fence check would only confirm it.
		st.mustWrite(t, writer, "k", 5, nil, http.StatusNoContent)
	}
	agedPass(t, st, e, testRetention)
	if hwm := st.mark(t, "k"); hwm != 5 {
		t.Fatalf("mark = %d; want the tombstone 5 kept: the delete came between the read and the eviction", hwm)
	}
	if stale := st.write(t, st.gateway(t, gateway.Config{}), "k", 4, []byte("stale")); stale != http.StatusConflict {
		t.Fatalf("PUT token 4 after the delete = %d; want 409", stale)
	}
	if _, _, ok := st.stored(t, "k"); ok {
		t.Fatalf("the object exists after the stale PUT; want it gone")
	}
}

// TestEvictionRule: which marks a pass evicts. Only marks of objects
// that record the mark's token, raised at least the retention ago, and
// tombstones under a tombstone retention; never partner resources.
func TestEvictionRule(t *testing.T) {
	type want struct {
		evicted map[string]int64
		kept    map[string]int64
		gone    []string // keys whose marks are evicted; the rest stay
	}
	tests := []struct {
		name string
		cfg  Config
		want want
	}{
		{"default tombstone retention", Config{Retention: testRetention}, want{
			evicted: map[string]int64{evictedObject: 1, evictedTombstone: 0},
			kept:    map[string]int64{keptYoung: 5, keptDiffers: 2, keptTombstone: 1, keptRaised: 0, keptUnknown: 0, keptNotObject: 2, keptUploading: 0, keptUnconfirmed: 0},
			gone:    []string{"recorded"},
		}},
		{"tombstones kept for the retention", Config{Retention: testRetention, TombstoneRetention: testRetention}, want{
			evicted: map[string]int64{evictedObject: 1, evictedTombstone: 1},
			kept:    map[string]int64{keptYoung: 5, keptDiffers: 2, keptTombstone: 0, keptRaised: 0, keptUnknown: 0, keptNotObject: 2, keptUploading: 0, keptUnconfirmed: 0},
			gone:    []string{"recorded", "deleted"},
		}},
		{"tombstones kept longer", Config{Retention: testRetention, TombstoneRetention: 2 * testRetention}, want{
			evicted: map[string]int64{evictedObject: 1, evictedTombstone: 0},
			kept:    map[string]int64{keptYoung: 5, keptDiffers: 2, keptTombstone: 1, keptRaised: 0, keptUnknown: 0, keptNotObject: 2, keptUploading: 0, keptUnconfirmed: 0},
			gone:    []string{"recorded"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newStack(t)
			ctx := context.Background()
			gw := st.gateway(t, gateway.Config{})
			st.mustWrite(t, gw, "recorded", 5, []byte("v"), http.StatusCreated)
			st.mustWrite(t, gw, "differs", 5, []byte("v"), http.StatusCreated)
			// A write that raised the mark and then failed: the object
			// records 5, the mark 7.
			if err := st.store.FenceCheck(ctx, st.resource("differs"), 7); err != nil {
				t.Fatal(err)
			}
			// A mark of an object written around fencegate, with no token.
			if _, err := st.minio.PutObject(ctx, st.bucket, "direct", bytes.NewReader(nil), 0, minio.PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := st.store.FenceCheck(ctx, st.resource("direct"), 5); err != nil {
				t.Fatal(err)
			}
			st.mustWrite(t, gw, "deleted", 5, []byte("v"), http.StatusCreated)
			st.mustWrite(t, gw, "deleted", 6, nil, http.StatusNoContent)
			partner := api.PartnerResource("route", "1")
			for _, r := range []api.Resource{partner, "s3/not-an-object"} {
				if err := st.store.FenceCheck(ctx, r, 5); err != nil {
					t.Fatal(err)
				}
			}
			e := st.evictor(t, tt.cfg)
			pass(t, e)
			st.clock.advance(testRetention)
			st.mustWrite(t, gw, "young", 5, []byte("v"), http.StatusCreated) // after the first pass
			pass(t, e)

			s := e.Stats()
			if !maps.Equal(s.Evicted, tt.want.evicted) || !maps.Equal(s.Kept, tt.want.kept) {
				t.Fatalf("two passes evicted %v, kept %v; want evicted %v, kept %v",
					s.Evicted, s.Kept, tt.want.evicted, tt.want.kept)
			}
			for _, key := range []string{"recorded", "differs", "direct", "deleted", "young"} {
				gone := false
				for _, g := range tt.want.gone {
					gone = gone || g == key
				}
				if hwm := st.mark(t, key); (hwm == 0) != gone {
					t.Errorf("mark of %s = %d; want evicted %v", key, hwm, gone)
				}
			}
			for _, r := range []api.Resource{partner, "s3/not-an-object"} {
				if hwm, err := st.newStore(t).HighWaterMark(ctx, r); err != nil || hwm != 5 {
					t.Errorf("mark of %s = %d, %v; want 5 (never evicted)", r, hwm, err)
				}
			}
		})
	}
}

// TestNothingEvictedBeforeTheRetention: a new evictor on an etcd where
// no revision was recorded a retention ago knows no revision that old, so
// it evicts nothing, however old the marks, until a retention has passed.
func TestNothingEvictedBeforeTheRetention(t *testing.T) {
	st := newStack(t)
	st.mustWrite(t, st.gateway(t, gateway.Config{}), "k", 5, []byte("v"), http.StatusCreated)
	e := st.evictor(t, Config{Retention: testRetention})
	pass(t, e)
	st.clock.advance(testRetention - time.Nanosecond)
	pass(t, e)
	if s := e.Stats(); s.Evicted[evictedObject] != 0 || s.Kept[keptYoung] != 2 {
		t.Fatalf("stats %+v; want nothing evicted, kept young twice", s)
	}
	st.clock.advance(time.Nanosecond)
	pass(t, e)
	if s := e.Stats(); s.Evicted[evictedObject] != 1 {
		t.Fatalf("stats %+v; want the mark evicted once a retention passed", s)
	}
}

// TestRunStopsWhenCancelled: Run makes passes until its context ends,
// and then returns; a pass in progress stops between marks.
func TestRunStopsWhenCancelled(t *testing.T) {
	st := newStack(t)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		if err := st.store.FenceCheck(ctx, st.resource(k), 5); err != nil {
			t.Fatal(err)
		}
	}
	e := st.evictor(t, Config{Retention: testRetention, Interval: time.Millisecond})
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	for e.Stats().Scanned < 6 { // two passes at least
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v; want nil once cancelled", err)
	}
	if err := e.Pass(ctx); err == nil {
		t.Fatalf("Pass with a cancelled context = nil; want its error")
	}
	off := st.evictor(t, Config{Retention: -1})
	if err := off.Run(context.Background()); err != nil || off.Stats().Scanned != 0 {
		t.Fatalf("Run with eviction off = %v, scanned %d; want nil at once, nothing read", err, off.Stats().Scanned)
	}
	st.clock.advance(time.Hour)
	if err := off.Pass(context.Background()); err != nil || off.Stats().Scanned != 0 {
		t.Fatalf("Pass with eviction off = %v, scanned %d; want nil at once, nothing read", err, off.Stats().Scanned)
	}
}

// TestOneEvictorAtATime runs two evictors on one etcd: only the one that
// holds the evictors' turn reads marks and sends HEADs, the other keeps
// its clock by sampling etcd's revision, and takes the turn once the
// first stops (its lease expires).
func TestOneEvictorAtATime(t *testing.T) {
	st := newStack(t)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		if err := st.store.FenceCheck(ctx, st.resource(k), 5); err != nil {
			t.Fatal(err)
		}
	}
	evictors := make([]*Evictor, 2)
	cancels := make([]context.CancelFunc, 2)
	done := make([]chan error, 2)
	for i := range evictors {
		e := st.evictor(t, Config{Retention: testRetention, Interval: time.Millisecond, Holder: fmt.Sprintf("e%d", i)})
		e.turnTTL = 2 * time.Second
		evictors[i] = e
		runCtx, cancel := context.WithCancel(ctx)
		cancels[i], done[i] = cancel, make(chan error, 1)
		go func() { done[i] <- e.Run(runCtx) }()
		t.Cleanup(cancel)
		if i == 0 {
			testenv.WaitUntil(t, 10*time.Second, "the first evictor makes a pass", func() bool { return e.Stats().LastPass != 0 })
		}
	}
	samples := func(e *Evictor) int {
		e.clock.mu.Lock()
		defer e.clock.mu.Unlock()
		return len(e.clock.samples)
	}
	testenv.WaitUntil(t, 10*time.Second, "the second evictor samples", func() bool { return samples(evictors[1]) >= 1 })
	if n := evictors[1].Stats().Scanned; n != 0 {
		t.Fatalf("the evictor without the turn read %d marks; want 0", n)
	}
	cancels[0]()
	if err := <-done[0]; err != nil {
		t.Fatal(err)
	}
	testenv.WaitUntil(t, 10*time.Second, "the second evictor takes the turn", func() bool { return evictors[1].Stats().Scanned > 0 })
	scanned := evictors[0].Stats().Scanned
	if scanned == 0 {
		t.Fatalf("the first evictor read no marks")
	}
}

// TestRunEvictsOnTheRealClock runs an evictor as a gateway would, on the
// real clock, with a retention of a fraction of a second: the mark goes
// once the evictor has run for the retention, and a stale write is still
// refused.
func TestRunEvictsOnTheRealClock(t *testing.T) {
	st := newStack(t)
	gw := st.gateway(t, gateway.Config{})
	st.mustWrite(t, gw, "k", 5, []byte("v"), http.StatusCreated)
	e, err := New(Config{Retention: 300 * time.Millisecond, Interval: 20 * time.Millisecond, HeadsPerSecond: 1000, Logger: discardLogger()}, st.store, st.objects)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	testenv.WaitUntil(t, 10*time.Second, "the mark is evicted", func() bool { return e.Stats().Evicted[evictedObject] == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if hwm := st.mark(t, "k"); hwm != 0 {
		t.Fatalf("mark = %d; want evicted", hwm)
	}
	st.mustWrite(t, st.gateway(t, gateway.Config{}), "k", 4, []byte("stale"), http.StatusConflict)
	if body, token, _ := st.stored(t, "k"); body != "v" || token != "5" {
		t.Fatalf("S3 holds %q token %q; want \"v\" token 5", body, token)
	}
}

// TestRecordedRevisionsOutliveTheEvictor: an evictor records etcd's
// revision in etcd, measured by a lease; a new evictor (a restarted
// gateway, or the next holder of the turn), whose own clock knows
// nothing old, reads it back and evicts on its first pass once that
// revision is a retention old. Without the recorded revision it would
// have to run for the retention first (TestNothingEvictedBeforeTheRetention).
func TestRecordedRevisionsOutliveTheEvictor(t *testing.T) {
	st := newStack(t)
	st.mustWrite(t, st.gateway(t, gateway.Config{}), "k", 5, []byte("v"), http.StatusCreated)
	const retention = 2 * time.Second // ages are whole seconds
	cfg := Config{Retention: retention, HeadsPerSecond: 1000, Logger: discardLogger()}
	first, err := New(cfg, st.store, st.objects)
	if err != nil {
		t.Fatal(err)
	}
	pass(t, first)
	if s := first.Stats(); s.Evicted[evictedObject] != 0 {
		t.Fatalf("the first evictor evicted on its first pass: %+v", s)
	}
	testenv.WaitUntil(t, 10*time.Second, "the recorded revision is a retention old", func() bool {
		ages, err := st.store.RevisionAges(context.Background())
		return err == nil && len(ages) == 1 && ages[0].Age >= retention
	})
	second, err := New(cfg, st.newStore(t), st.objects)
	if err != nil {
		t.Fatal(err)
	}
	pass(t, second)
	if s := second.Stats(); s.Evicted[evictedObject] != 1 {
		t.Fatalf("a new evictor's first pass: %+v; want the mark evicted", s)
	}
	if hwm := st.mark(t, "k"); hwm != 0 {
		t.Fatalf("mark = %d; want evicted", hwm)
	}
}
