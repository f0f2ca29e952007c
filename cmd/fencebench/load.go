package main

import (
	"context"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"fencegate/api"
)

// outcome is how one operation ended.
type outcome int

const (
	// outcomeOK is the answer the mode expects: a write that landed, or,
	// in the stale modes, a stale-token refusal.
	outcomeOK outcome = iota
	// outcomeConflict is a write that lost the race for the object three
	// times (hot resource): refused, nothing written.
	outcomeConflict
	// outcomeError is anything else, and fails the run.
	outcomeError
)

// operation performs one request of a mode for worker w.
type operation func(ctx context.Context, w *worker) (outcome, error)

// worker is one closed-loop client: it sends its next request when the
// previous one is answered.
type worker struct {
	id     int
	key    string
	body   *bodySource
	seq    uint64
	object objectVersion // what a direct writer knows of its object
	token  api.Token     // the last token a raise writer sent (raise.go)
	raw    *rawConn      // the stale cells' connection, closed at the end

	tally // of the operations in the window
}

// tally is what operations came to.
type tally struct {
	latencies []time.Duration // of outcomeOK operations
	ok        int64
	conflicts int64
	errors    int64
	// resets counts the errors that are S3 resetting the connection while
	// a large body was being sent, which versitygw does when it refuses a
	// conditional write before reading the body (a lost race on a hot
	// object): the writer then never sees the 412.
	resets   int64
	firstErr error
}

// add adds o's operations to t's; the latencies are appended, not sorted.
func (t *tally) add(o tally) {
	t.latencies = append(t.latencies, o.latencies...)
	t.ok += o.ok
	t.conflicts += o.conflicts
	t.errors += o.errors
	t.resets += o.resets
	if t.firstErr == nil {
		t.firstErr = o.firstErr
	}
}

// objectVersion is what a direct writer last learned of its object.
type objectVersion struct {
	exists bool
	etag   string
}

// load is one cell's load: workers running op on their keys.
type load struct {
	op          operation
	concurrency int
	keys        func(worker int) string
	body        *bodySource
	warmup      time.Duration
	duration    time.Duration
	maxRequests int64
	// progress is called about twice a second with the operations
	// counted so far in the window.
	progress func(elapsed time.Duration, ok, conflicts, errors int64)
}

// window is what happened between the start and the end of a cell's
// measurement.
type window struct {
	elapsed time.Duration
	tally   // latencies sorted
}

// add adds a later window of the same cell.
func (w *window) add(o window) {
	w.elapsed += o.elapsed
	w.tally.add(o.tally)
	slices.Sort(w.latencies)
}

// probe takes the resource counters at the edges of the window.
type probe func()

// run runs the load: every worker does at least one operation and warms
// up for l.warmup; then start is called and the window opens, and it
// closes after l.duration or l.maxRequests counted operations, when end
// is called; then the workers finish the operation they are in.
func (l *load) run(ctx context.Context, start, end probe) window {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		measuring atomic.Bool
		stopping  atomic.Bool
		counted   atomic.Int64
		warmed    sync.WaitGroup
		done      sync.WaitGroup
	)
	workers := make([]*worker, l.concurrency)
	for i := range workers {
		workers[i] = &worker{id: i, key: l.keys(i), body: l.body}
		w := workers[i]
		warmed.Add(1)
		done.Go(func() {
			first := true
			for !stopping.Load() && ctx.Err() == nil {
				began := time.Now()
				o, err := l.op(ctx, w)
				took := time.Since(began)
				if first {
					first = false
					warmed.Done()
				}
				if !measuring.Load() {
					continue
				}
				counted.Add(1)
				switch o {
				case outcomeOK:
					atomic.AddInt64(&w.ok, 1)
					w.latencies = append(w.latencies, took)
				case outcomeConflict:
					atomic.AddInt64(&w.conflicts, 1)
				default:
					atomic.AddInt64(&w.errors, 1)
					if err != nil && strings.Contains(err.Error(), "connection reset by peer") {
						w.resets++
					}
					if w.firstErr == nil {
						w.firstErr = err
					}
				}
			}
		})
	}
	// Warm up: every worker has done one operation (a create, for keys
	// of their own), and l.warmup has passed.
	warmupDone := make(chan struct{})
	go func() {
		warmed.Wait()
		close(warmupDone)
	}()
	select {
	case <-warmupDone:
	case <-ctx.Done():
	}
	sleepCtx(ctx, l.warmup)

	start()
	began := time.Now()
	measuring.Store(true)
	tick := time.NewTicker(50 * time.Millisecond)
	lastProgress := began
	for ctx.Err() == nil {
		<-tick.C
		elapsed := time.Since(began)
		if elapsed >= l.duration || counted.Load() >= l.maxRequests {
			break
		}
		if l.progress != nil && time.Since(lastProgress) >= 500*time.Millisecond {
			lastProgress = time.Now()
			var ok, conflicts, errs int64
			for _, w := range workers {
				ok += atomic.LoadInt64(&w.ok)
				conflicts += atomic.LoadInt64(&w.conflicts)
				errs += atomic.LoadInt64(&w.errors)
			}
			l.progress(elapsed, ok, conflicts, errs)
		}
	}
	tick.Stop()
	measuring.Store(false)
	elapsed := time.Since(began)
	end()
	stopping.Store(true)
	done.Wait()
	for _, w := range workers {
		if w.raw != nil {
			_ = w.raw.Close()
		}
	}

	res := window{elapsed: elapsed}
	for _, w := range workers {
		res.tally.add(w.tally)
	}
	slices.Sort(res.latencies)
	return res
}

// percentile returns the q-quantile (0 < q < 1) of sorted latencies, by
// the nearest-rank method, or NaN when there are too few to say: fewer
// than 1/(1-q) samples.
func percentile(sorted []time.Duration, q float64) float64 {
	n := len(sorted)
	if n == 0 || float64(n) < 1/(1-q)-1e-9 {
		return math.NaN()
	}
	rank := int(math.Ceil(q*float64(n))) - 1
	return float64(sorted[rank]) / float64(time.Millisecond)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// listenLoopback listens on a free port of 127.0.0.1.
func listenLoopback() (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return ln, nil
}

// errStatus is an answer a mode did not expect.
type errStatus struct {
	status int
	body   string
}

func (e *errStatus) Error() string { return fmt.Sprintf("status %d: %s", e.status, e.body) }
