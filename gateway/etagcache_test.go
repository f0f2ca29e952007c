package gateway_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/gateway"
	"fencegate/internal/testenv"
)

// TestETagCacheSkipsHead counts the S3 requests of a gateway's writes: a
// write to an object whose version the gateway learned from its own last
// PUT or DELETE asks S3 nothing but the write itself. With the cache
// turned off, every write pays a HEAD (which shows that the count tells
// the two apart).
func TestETagCacheSkipsHead(t *testing.T) {
	tests := []struct {
		name      string
		entries   int
		wantHeads int64 // for the writes after the first create
	}{
		{"cache", 0, 0},
		{"no cache", -1, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, gateway.Config{ETagCacheEntries: tt.entries})
			if r := e.put(t, "k", 1, "v1"); r.status != http.StatusCreated {
				t.Fatalf("PUT token 1 = %s", r)
			}
			if n := e.s3.CountMethod(http.MethodHead); n != 1 {
				t.Fatalf("the first create made %d HEADs; want 1 (nothing known yet)", n)
			}
			e.s3.Reset()
			for i := range 3 {
				if r := e.put(t, "k", 1, fmt.Sprintf("v1.%d", i)); r.status != http.StatusOK {
					t.Fatalf("PUT token 1 again = %s", r)
				}
			}
			if r := e.delete(t, "k", 2); r.status != http.StatusNoContent {
				t.Fatalf("DELETE token 2 = %s", r)
			}
			// The delete taught the gateway that the object is absent:
			// the create is If-None-Match: * without a HEAD.
			if r := e.put(t, "k", 2, "v2"); r.status != http.StatusCreated {
				t.Fatalf("PUT token 2 after the delete = %s; want 201", r)
			}
			if n := e.s3.CountMethod(http.MethodHead); n != tt.wantHeads {
				t.Fatalf("5 writes made %d HEADs; want %d", n, tt.wantHeads)
			}
			if n := e.s3.CountMethod(http.MethodPut) + e.s3.CountMethod(http.MethodDelete); n != 5 {
				t.Fatalf("5 writes made %d S3 writes; want 5 (no lost race)", n)
			}
			if body, token, _ := e.stored(t, "k"); body != "v2" || token != "2" {
				t.Fatalf("S3 holds %q token %q; want v2 token 2", body, token)
			}
		})
	}
}

// TestETagCacheOnlyForSmallBodies: a body over 64 KiB is observed with a
// HEAD even when the cache knows the object. (A server may refuse an
// out-of-date If-Match before reading a large body and reset the
// connection, which the gateway could not tell from a failure.)
func TestETagCacheOnlyForSmallBodies(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	for _, tt := range []struct {
		size  int
		heads int64
	}{{64 << 10, 0}, {64<<10 + 1, 1}} {
		body := strings.Repeat("x", tt.size-1)
		if r := e.put(t, "k", 1, body+"a"); r.status >= 300 {
			t.Fatalf("PUT %d bytes = %s", tt.size, r)
		}
		e.s3.Reset()
		if r := e.put(t, "k", 1, body+"b"); r.status != http.StatusOK {
			t.Fatalf("PUT %d bytes again = %s", tt.size, r)
		}
		if n := e.s3.CountMethod(http.MethodHead); n != tt.heads {
			t.Errorf("rewriting %d bytes made %d HEADs; want %d", tt.size, n, tt.heads)
		}
	}
}

// TestETagCacheOutdatedEntryCostsOne412: another gateway writes the object
// behind this one's back, so this gateway's cache entry is out of date.
// Its next write is refused by S3 once (412), observes again with a real
// HEAD, and replaces the other gateway's version: not a blind write, and
// not a lost update. After that the cache is right again.
func TestETagCacheOutdatedEntryCostsOne412(t *testing.T) {
	a := newEnv(t, gateway.Config{})
	b := newEnvSharing(t, a)
	if r := a.put(t, "k", 1, "from A, token 1"); r.status != http.StatusCreated {
		t.Fatalf("A: PUT token 1 = %s", r)
	}
	fromB := b.put(t, "k", 2, "from B, token 2")
	if fromB.status != http.StatusOK {
		t.Fatalf("B: PUT token 2 = %s", fromB)
	}
	a.s3.Reset()
	r := a.put(t, "k", 3, "from A, token 3")
	if r.status != http.StatusOK || r.write.ReplacedETag != fromB.write.ETag {
		t.Fatalf("A: PUT token 3 = %s; want 200 replacing B's version %s", r, fromB.write.ETag)
	}
	if puts, heads := a.s3.CountMethod(http.MethodPut), a.s3.CountMethod(http.MethodHead); puts != 2 || heads != 1 {
		t.Fatalf("A made %d PUTs and %d HEADs; want 2 PUTs (one refused with 412) and 1 HEAD", puts, heads)
	}
	applied := a.s3.AppliedWrites()
	if len(applied) != 1 || applied[0].IfMatch != fromB.write.ETag {
		t.Fatalf("A's applied writes = %+v; want one, If-Match B's ETag %s", applied, fromB.write.ETag)
	}
	if body, token, _ := a.stored(t, "k"); body != "from A, token 3" || token != "3" {
		t.Fatalf("S3 holds %q token %q; want A's token-3 write", body, token)
	}
	a.s3.Reset()
	if r := a.put(t, "k", 3, "from A again"); r.status != http.StatusOK {
		t.Fatalf("A: PUT token 3 again = %s", r)
	}
	if n := a.s3.Count(); n != 1 {
		t.Fatalf("A's next write made %d S3 requests; want 1 (the cache is right again)", n)
	}
}

// TestETagCacheAbsentNotTrustedByDelete: a gateway that deleted an object
// remembers it as absent. If another gateway re-creates the object, a
// delete through the first must still delete it: a cached "absent" would
// answer 204 without asking S3 and leave the object in place.
func TestETagCacheAbsentNotTrustedByDelete(t *testing.T) {
	a := newEnv(t, gateway.Config{})
	b := newEnvSharing(t, a)
	a.put(t, "k", 1, "v1")
	if r := a.delete(t, "k", 2); r.status != http.StatusNoContent {
		t.Fatalf("A: DELETE token 2 = %s", r)
	}
	if r := b.put(t, "k", 3, "from B, token 3"); r.status != http.StatusCreated {
		t.Fatalf("B: PUT token 3 = %s", r)
	}
	if r := a.delete(t, "k", 4); r.status != http.StatusNoContent {
		t.Fatalf("A: DELETE token 4 = %s", r)
	}
	if body, token, ok := a.stored(t, "k"); ok {
		t.Fatalf("S3 still holds %q token %q after A's delete with token 4", body, token)
	}
	// And a create through A after B re-created it again: the cached
	// "absent" costs one 412, then the write replaces B's version.
	fromB := b.put(t, "k", 5, "from B, token 5")
	a.s3.Reset()
	if r := a.put(t, "k", 6, "from A, token 6"); r.status != http.StatusOK || r.write.ReplacedETag != fromB.write.ETag {
		t.Fatalf("A: PUT token 6 = %s; want 200 replacing %s", r, fromB.write.ETag)
	}
	if puts, heads := a.s3.CountMethod(http.MethodPut), a.s3.CountMethod(http.MethodHead); puts != 2 || heads != 1 {
		t.Fatalf("A made %d PUTs and %d HEADs; want 2 and 1", puts, heads)
	}
}

// TestETagCacheNoLostUpdateAcrossGateways races writers through two
// gateways on one object, so that each gateway's cache is often out of
// date, then checks on the wire (both gateways' S3 traffic) that the
// writes S3 applied form one chain of versions, each replacing the one
// before it, with tokens that never decrease, and that every write a
// client was told succeeded is in it.
func TestETagCacheNoLostUpdateAcrossGateways(t *testing.T) {
	a := newEnv(t, gateway.Config{})
	b := newEnvSharing(t, a)
	gateways := []*env{a, b}
	rng := rand.New(rand.NewPCG(7, 7))
	const writers, writesEach = 16, 6
	tokens := make([]api.Token, writers)
	for i := range tokens {
		tokens[i] = api.Token(1 + rng.IntN(5)) // many equal tokens: few stale refusals
	}
	results := make([]result, writers*writesEach)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			for j := range writesEach {
				g := gateways[(i+j)%2]
				results[i*writesEach+j] = g.put(t, "hot", tokens[i], fmt.Sprintf("writer %d write %d", i, j))
			}
		})
	}
	wg.Wait()

	acknowledged := map[string]bool{} // ETags of 200/201 answers
	for _, r := range results {
		switch {
		case r.status == http.StatusOK || r.status == http.StatusCreated:
			acknowledged[r.write.ETag] = true
		case r.status == http.StatusConflict:
		default:
			t.Errorf("unexpected answer %s", r)
		}
	}
	applied := append(a.s3.AppliedWrites(), b.s3.AppliedWrites()...)
	byReplaced := map[string]testenv.AppliedWrite{}
	for _, w := range applied {
		if w.Method != http.MethodPut {
			t.Fatalf("applied %+v; want only PUTs", w)
		}
		if prev, dup := byReplaced[w.IfMatch]; dup {
			t.Fatalf("two applied writes replaced version %q: %+v and %+v (a lost update)", w.IfMatch, prev, w)
		}
		byReplaced[w.IfMatch] = w
	}
	prevETag, prevToken, followed := "", api.Token(0), 0
	for {
		w, ok := byReplaced[prevETag]
		if !ok {
			break
		}
		tok, err := api.ParseToken(w.FenceToken)
		if err != nil || tok < prevToken {
			t.Fatalf("version %d carries token %q after %d", followed, w.FenceToken, prevToken)
		}
		if !acknowledged[w.ETag] {
			t.Errorf("S3 applied a write with ETag %s that no client was told of", w.ETag)
		}
		prevETag, prevToken, followed = w.ETag, tok, followed+1
	}
	if followed != len(applied) || len(applied) != len(acknowledged) {
		t.Fatalf("followed %d versions of %d applied writes, %d acknowledged; want all equal", followed, len(applied), len(acknowledged))
	}
	if _, _, ok := a.stored(t, "hot"); !ok {
		t.Fatal("no object at the end")
	}
	heads := a.s3.CountMethod(http.MethodHead) + b.s3.CountMethod(http.MethodHead)
	t.Logf("%d writes: %d applied in one chain, %d HEADs", len(results), len(applied), heads)
}

// TestETagCacheRecordedTokenRefuses: on a cache hit, the token recorded
// with the cached version refuses an older one, as a HEAD's would, without
// asking S3 or the fence store. The fence store here has no cache of its
// own, so only the ETag cache can know.
func TestETagCacheRecordedTokenRefuses(t *testing.T) {
	fences, objects := newMemFences(), newMemObjects()
	fences.noCache = true
	srv := newMemGateway(t, gateway.Config{}, fences, objects)
	put := func(token api.Token) result {
		return do(t, http.MethodPut, srv.URL+"/v1/objects/bucket/k", []string{token.String()}, []byte("x"))
	}
	if r := put(50); r.status != http.StatusCreated {
		t.Fatalf("PUT token 50 = %s", r)
	}
	fences.reset(0) // the high-water mark is lost; only the object knows
	objects.calls.Store(0)
	wantProblem(t, put(40), http.StatusConflict, "stale-token")
	if n, f := objects.calls.Load(), fences.checks.Load(); n != 0 || f != 0 {
		t.Fatalf("the refusal made %d S3 calls and %d fence checks; want none", n, f)
	}
}

// memFences is a FenceStore in memory. Unlike tokenstore.Store, with
// noCache set it has no cache of high-water marks.
type memFences struct {
	mu      sync.Mutex
	hwm     map[api.Resource]api.Token
	noCache bool
	checks  atomic.Int64
}

func newMemFences() *memFences { return &memFences{hwm: map[api.Resource]api.Token{}} }

func (f *memFences) reset(t api.Token) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for r := range f.hwm {
		f.hwm[r] = t
	}
	f.checks.Store(0)
}

func (f *memFences) CachedHighWaterMark(r api.Resource) (api.Token, bool) {
	if f.noCache {
		return 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.hwm[r]
	return t, ok
}

func (f *memFences) FenceCheck(_ context.Context, r api.Resource, t api.Token) error {
	f.checks.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if hwm := f.hwm[r]; hwm > t {
		return &api.StaleTokenError{Resource: r, Token: t, HighWaterMark: hwm}
	}
	f.hwm[r] = t
	return nil
}

// FenceCheckRenew is FenceCheck: memFences confirms nothing read-only.
func (f *memFences) FenceCheckRenew(ctx context.Context, r api.Resource, t api.Token) error {
	return f.FenceCheck(ctx, r, t)
}

func (f *memFences) CheckNotStale(_ context.Context, r api.Resource, t api.Token) error {
	f.checks.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if hwm := f.hwm[r]; hwm > t {
		return &api.StaleTokenError{Resource: r, Token: t, HighWaterMark: hwm}
	}
	return nil
}

func (f *memFences) HighWaterMark(_ context.Context, r api.Resource) (api.Token, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hwm[r], nil
}

// memObjects is an ObjectStore in memory with S3's conditional writes.
type memObjects struct {
	mu      sync.Mutex
	objects map[api.ObjectPath]memObject
	calls   atomic.Int64
}

type memObject struct {
	body  []byte
	etag  string
	token api.Token
}

func newMemObjects() *memObjects { return &memObjects{objects: map[api.ObjectPath]memObject{}} }

func (m *memObjects) Observe(_ context.Context, p api.ObjectPath) (api.ObjectVersion, error) {
	m.calls.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[p]
	if !ok {
		return api.ObjectVersion{}, nil
	}
	return api.ObjectVersion{Exists: true, ETag: o.etag, Token: o.token}, nil
}

func (m *memObjects) Put(_ context.Context, in api.PutObjectInput) (string, error) {
	m.calls.Add(1)
	body, err := io.ReadAll(in.Body)
	if err != nil {
		return "", err
	}
	sum := md5.Sum(body)
	etag := `"` + hex.EncodeToString(sum[:]) + `"`
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[in.Path]
	if ok != in.Replaces.Exists || ok && o.etag != in.Replaces.ETag {
		return "", fmt.Errorf("mem put: %w", api.ErrConcurrentModification)
	}
	m.objects[in.Path] = memObject{body: body, etag: etag, token: in.Token}
	return etag, nil
}

func (m *memObjects) Delete(_ context.Context, p api.ObjectPath, etag string) error {
	m.calls.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, ok := m.objects[p]; !ok || o.etag != etag {
		return fmt.Errorf("mem delete: %w", api.ErrConcurrentModification)
	}
	delete(m.objects, p)
	return nil
}

// Get ignores in's range and preconditions.
func (m *memObjects) Get(ctx context.Context, in api.GetObjectInput) (*api.Object, error) {
	obj, err := m.Head(ctx, in)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	obj.Body = io.NopCloser(strings.NewReader(string(m.objects[in.Path].body)))
	return obj, nil
}

func (m *memObjects) Head(_ context.Context, in api.GetObjectInput) (*api.Object, error) {
	p := in.Path
	m.calls.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[p]
	if !ok {
		return nil, fmt.Errorf("mem head: %w", api.ErrNotFound)
	}
	return &api.Object{Size: int64(len(o.body)), ETag: o.etag, Token: o.token, LastModified: time.Unix(0, 0)}, nil
}

// newMemGateway serves a gateway on fences and objects.
func newMemGateway(tb testing.TB, cfg gateway.Config, fences gateway.FenceStore, objects gateway.ObjectStore) *httptest.Server {
	tb.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	gw, err := gateway.New(cfg, fences, objects)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	tb.Cleanup(srv.Close)
	return srv
}

// TestETagCacheMaxAgeBoundsObservations: a write observes from the cache
// only while the entry is younger than Config.ETagCacheMaxAge; past it,
// the write pays a HEAD (and so sees a version that another writer left
// since). Once marks are evicted, an old cached observation is what would
// widen the ETag ABA case (package retention).
func TestETagCacheMaxAgeBoundsObservations(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	e := newEnv(t, gateway.Config{ETagCacheMaxAge: time.Minute, Now: clock})
	if r := e.put(t, "k", 1, "v1"); r.status != http.StatusCreated {
		t.Fatalf("PUT token 1 = %s", r)
	}
	steps := []struct {
		advance   time.Duration
		wantHeads int64
	}{
		{30 * time.Second, 0}, // 30 s old: served
		{59 * time.Second, 0}, // learned again by the last write: 59 s old
		{time.Minute, 1},      // a minute old: a HEAD
		{time.Hour, 1},
	}
	for i, st := range steps {
		advance(st.advance)
		e.s3.Reset()
		if r := e.put(t, "k", 1, fmt.Sprintf("v1.%d", i)); r.status != http.StatusOK {
			t.Fatalf("step %d: PUT = %s", i, r)
		}
		if n := e.s3.CountMethod(http.MethodHead); n != st.wantHeads {
			t.Fatalf("step %d: a write %v after the last made %d HEADs; want %d", i, st.advance, n, st.wantHeads)
		}
	}
}
