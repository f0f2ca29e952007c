package testenv_test

import (
	"fmt"
	"testing"
	"time"

	"fencegate/internal/testenv"
)

// TestWaitUntilPolls checks that WaitUntil returns once cond holds, after
// calling it exactly until then, and that the pause between two calls
// starts at 1 ms and doubles up to 20 ms.
func TestWaitUntilPolls(t *testing.T) {
	const holdsAt = 8 // cond returns true on its 8th call
	var calls []time.Time
	testenv.WaitUntil(t, 30*time.Second, "the eighth call", func() bool {
		calls = append(calls, time.Now())
		return len(calls) == holdsAt
	})
	if len(calls) != holdsAt {
		t.Fatalf("cond called %d times; want %d", len(calls), holdsAt)
	}
	// time.Sleep never sleeps less than asked, so each gap is at least its
	// pause; how much more depends on the machine, and is not checked.
	want := []time.Duration{1, 2, 4, 8, 16, 20, 20}
	for i, w := range want {
		w *= time.Millisecond
		if gap := calls[i+1].Sub(calls[i]); gap < w {
			t.Errorf("pause before call %d = %v; want at least %v", i+2, gap, w)
		}
	}
}

// TestWaitUntilAtOnce checks that a condition already true is called once.
func TestWaitUntilAtOnce(t *testing.T) {
	calls := 0
	testenv.WaitUntil(t, time.Second, "the first call", func() bool {
		calls++
		return true
	})
	if calls != 1 {
		t.Fatalf("cond called %d times; want 1", calls)
	}
}

// recordingTB is a testing.TB whose Fatalf records the failure instead of
// stopping the goroutine. Any other method panics.
type recordingTB struct {
	testing.TB
	failures []string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

// TestWaitUntilTimesOut checks that a condition that never holds fails
// the test once, naming what it waited for, after the timeout.
func TestWaitUntilTimesOut(t *testing.T) {
	const timeout = 50 * time.Millisecond
	tb := &recordingTB{}
	calls := 0
	start := time.Now()
	testenv.WaitUntil(tb, timeout, "pigs fly", func() bool {
		calls++
		return false
	})
	if waited := time.Since(start); waited < timeout {
		t.Errorf("WaitUntil gave up after %v; want at least %v", waited, timeout)
	}
	want := "after 50ms: still waiting until pigs fly"
	if len(tb.failures) != 1 || tb.failures[0] != want {
		t.Errorf("failures %q; want [%q]", tb.failures, want)
	}
	if calls < 2 {
		t.Errorf("cond called %d times; want it polled until the timeout", calls)
	}
}
