package testenv

import (
	"testing"
	"time"
)

const (
	// waitFirstPoll is the pause after the first time [WaitUntil] finds
	// its condition false; the pause doubles from there.
	waitFirstPoll = time.Millisecond
	// waitMaxPoll caps the pause between two polls of [WaitUntil].
	waitMaxPoll = 20 * time.Millisecond
)

// WaitUntil polls cond every few milliseconds until it returns true, and fails
// tb (naming what) if it has not after timeout.
//
// The pause between two polls starts at 1 ms and doubles up to 20 ms, so a
// condition that holds soon is seen soon and a slow one does not spin. cond
// runs on the calling goroutine, so it may itself fail tb. WaitUntil
// returns right after tb.Fatalf, for a testing.TB that records the failure
// instead of stopping the goroutine.
func WaitUntil(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	pause := waitFirstPoll
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("after %v: still waiting until %s", timeout, what)
			return
		}
		time.Sleep(pause)
		pause = min(2*pause, waitMaxPoll)
	}
}
