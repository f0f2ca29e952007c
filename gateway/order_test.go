package gateway_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"fencegate/api"
	"fencegate/gateway"
)

// pauser stops the request carrying one token at a hook until released.
type pauser struct {
	token   atomic.Uint64 // the api.Token to pause; 0 pauses none
	reached chan struct{}
	release chan struct{}
}

func newPauser(token api.Token) *pauser {
	p := &pauser{reached: make(chan struct{}), release: make(chan struct{})}
	p.token.Store(uint64(token))
	return p
}

func (p *pauser) hook(ctx context.Context, _ api.Resource, token api.Token) {
	if uint64(token) != p.token.Load() {
		return
	}
	close(p.reached)
	<-p.release
}

// staleDeleteRace runs the interleaving that separates the two orders of
// observe and fence check, and reports whether the stale writer's create
// landed in S3 (a violation).
//
//	object holds v1 (token 1)
//	stale writer S (token 5) starts, and pauses after its first protocol step
//	newer holder N (token 6) deletes the object: 204
//	S resumes and writes
//
// With observe-then-fence, S observed v1 and its fence check finds HWM 6:
// refused. With fence-then-observe, S's fence check passed (HWM 1) before
// N's; S then observes "absent", creates with If-None-Match: *, and the
// stale write lands on top of N's delete. The token recorded on the object
// cannot help: there is no object left to record it.
func staleDeleteRace(t *testing.T, store string, unsafeOrder bool) (staleLanded bool, staleStatus int) {
	t.Helper()
	pause := newPauser(5)
	hooks := &gateway.TestHooks{UnsafeFenceBeforeObserve: unsafeOrder}
	if unsafeOrder {
		hooks.AfterFenceCheck = pause.hook // the first step of the unsafe order
	} else {
		hooks.AfterObserve = pause.hook
	}
	e := newEnvOn(t, store, gateway.Config{TestHooks: hooks})
	if r := e.put(t, "k", 1, "v1"); r.status != http.StatusCreated {
		t.Fatalf("PUT token 1 = %s", r)
	}
	staleDone := make(chan result, 1)
	go func() { staleDone <- e.put(t, "k", 5, "stale from 5") }()
	<-pause.reached
	if r := e.delete(t, "k", 6); r.status != http.StatusNoContent {
		t.Fatalf("DELETE token 6 = %s", r)
	}
	close(pause.release)
	stale := <-staleDone
	body, _, ok := e.stored(t, "k")
	return ok && body == "stale from 5", stale.status
}

func TestObserveBeforeFenceRefusesStaleWriter(t *testing.T) {
	for _, store := range objectStores {
		t.Run(store, func(t *testing.T) {
			landed, status := staleDeleteRace(t, store, false)
			if landed || status != http.StatusConflict {
				t.Fatalf("observe-then-fence: stale write landed=%v, status %d; want refused with 409", landed, status)
			}
		})
	}
}

// TestFenceBeforeObserveLetsStaleWriterWin shows that the order matters:
// the same interleaving with the two steps swapped lets the stale write
// land. If this test ever fails, the race above no longer tells the two
// orders apart, and the test above proves nothing.
func TestFenceBeforeObserveLetsStaleWriterWin(t *testing.T) {
	for _, store := range objectStores {
		t.Run(store, func(t *testing.T) {
			landed, status := staleDeleteRace(t, store, true)
			if !landed || status != http.StatusCreated {
				t.Fatalf("fence-then-observe: stale write landed=%v, status %d; want the violation (201, stale bytes in the store)", landed, status)
			}
		})
	}
}

// TestStaleWriterPausedAfterFenceCheck pauses a writer between its fence
// check and its conditional PUT while a newer holder writes: the store
// refuses the PUT (412), the gateway observes again, and the fence
// refuses it.
func TestStaleWriterPausedAfterFenceCheck(t *testing.T) {
	for _, store := range objectStores {
		t.Run(store, func(t *testing.T) {
			pause := newPauser(5)
			e := newEnvOn(t, store, gateway.Config{TestHooks: &gateway.TestHooks{AfterFenceCheck: pause.hook}})
			e.put(t, "k", 1, "v1")
			staleDone := make(chan result, 1)
			go func() { staleDone <- e.put(t, "k", 5, "stale from 5") }()
			<-pause.reached
			if r := e.put(t, "k", 6, "from 6"); r.status != http.StatusOK {
				t.Fatalf("PUT token 6 = %s", r)
			}
			close(pause.release)
			wantProblem(t, <-staleDone, http.StatusConflict, "stale-token")
			if body, token, _ := e.stored(t, "k"); body != "from 6" || token != "6" {
				t.Fatalf("%s holds %q token %q; want the token-6 write", store, body, token)
			}
		})
	}
}

// TestUnconditionalWriteLetsStaleWriterWin shows that the condition
// matters: the interleaving above, with the test hook that drops the
// condition, lets the stale write land on top of the newer holder's. If
// this test ever fails, the hook no longer writes blind, and the
// robustness suite's "unconditional-write" mutation proves nothing.
func TestUnconditionalWriteLetsStaleWriterWin(t *testing.T) {
	for _, store := range objectStores {
		t.Run(store, func(t *testing.T) {
			pause := newPauser(5)
			e := newEnvOn(t, store, gateway.Config{TestHooks: &gateway.TestHooks{AfterFenceCheck: pause.hook, UnsafeUnconditionalWrite: true}})
			e.put(t, "k", 1, "v1")
			staleDone := make(chan result, 1)
			go func() { staleDone <- e.put(t, "k", 5, "stale from 5") }()
			<-pause.reached
			if r := e.put(t, "k", 6, "from 6"); r.status != http.StatusOK {
				t.Fatalf("PUT token 6 = %s", r)
			}
			close(pause.release)
			if r := <-staleDone; r.status != http.StatusOK {
				t.Fatalf("stale PUT token 5 = %s; want the violation (200)", r)
			}
			if body, token, _ := e.stored(t, "k"); body != "stale from 5" || token != "5" {
				t.Fatalf("%s holds %q token %q; want the stale write (the violation)", store, body, token)
			}
		})
	}
}

// TestLostRaceRetriesWithSameToken: one holder's two concurrent writes
// (equal tokens) both succeed: the one that loses S3's race observes
// again and retries, when its body is buffered.
func TestLostRaceRetriesWithSameToken(t *testing.T) {
	pause := newPauser(7)
	e := newEnv(t, gateway.Config{TestHooks: &gateway.TestHooks{AfterFenceCheck: pause.hook}})
	e.put(t, "k", 1, "v1")
	first := make(chan result, 1)
	go func() { first <- e.put(t, "k", 7, "first") }()
	<-pause.reached
	pause.token.Store(0) // let the second writer through
	e.s3.Reset()
	if r := e.put(t, "k", 7, "second"); r.status != http.StatusOK {
		t.Fatalf("second PUT = %s", r)
	}
	close(pause.release)
	if r := <-first; r.status != http.StatusOK {
		t.Fatalf("first PUT after losing a race = %s; want 200 after a retry", r)
	}
	// second: 1 PUT; first: a PUT refused with 412, then a PUT.
	if n := e.s3.CountMethod(http.MethodPut); n != 3 {
		t.Fatalf("S3 saw %d PUTs; want 3 (one lost race, retried)", n)
	}
	if body, _, _ := e.stored(t, "k"); body != "first" {
		t.Fatalf("S3 holds %q; want the retried write", body)
	}
}

// TestLostRaceStreamedBodyIsRetryable409: a body too large to buffer
// cannot be replayed, so a lost race is a retryable 409 and nothing is
// overwritten blindly.
func TestLostRaceStreamedBodyIsRetryable409(t *testing.T) {
	pause := newPauser(7)
	e := newEnv(t, gateway.Config{BufferBytes: 16, TestHooks: &gateway.TestHooks{AfterFenceCheck: pause.hook}})
	e.put(t, "k", 1, "v1")
	first := make(chan result, 1)
	go func() { first <- e.put(t, "k", 7, "a body longer than sixteen bytes") }()
	<-pause.reached
	pause.token.Store(0)
	if r := e.put(t, "k", 7, "second"); r.status != http.StatusOK {
		t.Fatalf("second PUT = %s", r)
	}
	close(pause.release)
	r := <-first
	wantProblem(t, r, http.StatusConflict, "concurrent-modification")
	if !r.problem.Retryable {
		t.Fatalf("concurrent-modification not retryable: %s", r)
	}
	if body, _, _ := e.stored(t, "k"); body != "second" {
		t.Fatalf("S3 holds %q; want \"second\"", body)
	}
}
