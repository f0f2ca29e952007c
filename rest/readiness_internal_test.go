package rest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestCachedCallerGivesUp: a caller that gives up while a probe runs gets
// its context's error, and the probe goes on for the callers that wait:
// it is not cancelled, and it is not started twice.
func TestCachedCallerGivesUp(t *testing.T) {
	var runs atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	c := newCached(func(ctx context.Context) (int, error) {
		runs.Add(1)
		close(started)
		<-release
		return 7, ctx.Err()
	}, time.Hour, time.Hour)

	impatient, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { _, err := c.get(impatient); gaveUp <- err }()
	<-started
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("get with a cancelled context = %v; want context.Canceled", err)
	}
	waited := make(chan error, 1)
	go func() {
		v, err := c.get(context.Background())
		if err == nil && v != 7 {
			err = errors.New("wrong value")
		}
		waited <- err
	}()
	close(release)
	if err := <-waited; err != nil {
		t.Fatalf("get while the probe ran = %v; want 7 and no error (the probe's context must not be cancelled)", err)
	}
	if v, err := c.get(context.Background()); v != 7 || err != nil {
		t.Fatalf("get from the cache = %d, %v; want 7", v, err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the probe ran %d times; want 1", n)
	}
}

// TestCachedTimeout: a probe that does not answer is ended by the
// timeout, and its callers get the timeout's error rather than waiting
// for ever.
func TestCachedTimeout(t *testing.T) {
	c := newCached(func(ctx context.Context) (struct{}, error) {
		<-ctx.Done()
		return struct{}{}, ctx.Err()
	}, time.Hour, 10*time.Millisecond)
	if _, err := c.get(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("get of a probe that hangs = %v; want context.DeadlineExceeded", err)
	}
}
