package retention

import (
	"context"
	"net/http"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/gateway"
)

// TestETagCacheBoundKeepsCachedObservationsFromWideningABA: a gateway's
// ETag cache holds the version its write left ("A", token 1); another
// gateway writes token 5 and then token 6 with the same bytes (the same
// ETag), and the mark 6 is evicted a retention later. A stale writer
// (token 2) on the first gateway that took its observation from the
// cache would pass the fence check (no mark) and the If-Match (the same
// ETag): the ETag ABA case, widened by the cache's old observation. With
// the cache's age bound at Config.ETagCacheMaxAge the write observes with
// a HEAD and is refused 409; without a bound it lands, which is why the
// bound is needed.
func TestETagCacheBoundKeepsCachedObservationsFromWideningABA(t *testing.T) {
	cfg := Config{Retention: testRetention}
	tests := []struct {
		name       string
		maxAge     time.Duration
		wantStatus int
		wantBody   string
		wantToken  string
	}{
		{"bound at half the retention", cfg.ETagCacheMaxAge(), http.StatusConflict, "A", "6"},
		{"no bound", -1, http.StatusOK, "stale", "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newStack(t)
			cached := st.gateway(t, gateway.Config{ETagCacheMaxAge: tt.maxAge})
			other := st.gateway(t, gateway.Config{})
			st.mustWrite(t, cached, "k", 1, []byte("A"), http.StatusCreated)
			st.mustWrite(t, other, "k", 5, []byte("B"), http.StatusOK)
			st.mustWrite(t, other, "k", 6, []byte("A"), http.StatusOK)
			e := st.evictor(t, cfg)
			agedPass(t, st, e, testRetention)
			if hwm := st.mark(t, "k"); hwm != 0 {
				t.Fatalf("mark after eviction = %d; want none (stats %+v)", hwm, e.Stats())
			}
			if got := st.write(t, cached, "k", 2, []byte("stale")); got != tt.wantStatus {
				t.Fatalf("stale PUT token 2 = %d; want %d", got, tt.wantStatus)
			}
			if body, token, _ := st.stored(t, "k"); body != tt.wantBody || token != tt.wantToken {
				t.Fatalf("S3 holds %q token %q; want %q token %q", body, token, tt.wantBody, tt.wantToken)
			}
		})
	}
}

// TestETagABAWithPauseLongerThanRetention shows what eviction gives up,
// as the package documentation says: a stale writer that observed "A"
// (token 1), paused past the eviction of a newer writer's mark, finds the
// object back at "A" (token 6, the same ETag) and its write lands. Without
// the eviction the fence check would have refused it (the last step).
func TestETagABAWithPauseLongerThanRetention(t *testing.T) {
	for _, evict := range []bool{true, false} {
		st := newStack(t)
		observed, release := make(chan struct{}), make(chan struct{})
		hooks := &gateway.TestHooks{AfterObserve: func(ctx context.Context, _ api.Resource, token api.Token) {
			if token == 2 {
				close(observed)
				<-release
			}
		}}
		stale := st.gateway(t, gateway.Config{TestHooks: hooks, ETagCacheEntries: -1})
		other := st.gateway(t, gateway.Config{})
		st.mustWrite(t, other, "k", 1, []byte("A"), http.StatusCreated)
		status := make(chan int, 1)
		go func() { status <- st.write(t, stale, "k", 2, []byte("stale")) }()
		<-observed
		st.mustWrite(t, other, "k", 5, []byte("B"), http.StatusOK)
		st.mustWrite(t, other, "k", 6, []byte("A"), http.StatusOK)
		if evict {
			agedPass(t, st, st.evictor(t, Config{Retention: testRetention}), testRetention)
		}
		close(release)
		want := map[bool]int{true: http.StatusOK, false: http.StatusConflict}[evict]
		if got := <-status; got != want {
			t.Fatalf("evicted %v: stale PUT token 2 = %d; want %d", evict, got, want)
		}
	}
}
