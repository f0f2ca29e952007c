package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The events cell: what the event feed (GET /v1/events) costs the write
// path. One fresh gateway takes accepted writes (a key per worker, 1 KiB,
// one token) from eventsConcurrency workers without interruption, while
// the cell alternates windows without subscribers and windows with
// eventsSubscribers attached, one of which never reads its stream (its
// buffer fills and it drops). Windows alternate in the order ABBA..., so
// that drift hits both alike, and are short (eventsPairs pairs), so that
// the other processes of a shared machine, which slow the gateway's CPU in
// bursts, hit few of them: the overhead is the median over the pairs of
// adjacent windows of the ratio of their CPU time per accepted write
// (each pair has one window of each kind). Then the stale refusal rate with the
// subscribers attached: eventsStaleConcurrency writers with a stale token
// (every refusal is an event), and the same without them.
//
// The gateway's CPU is read from the scheduler's per-thread run times
// (/proc/<pid>/task/*/schedstat, nanoseconds), not /proc/<pid>/stat's
// 10 ms ticks, which would make a 2% difference invisible in windows of
// a few seconds.

const (
	eventsConcurrency      = 8
	eventsSubscribers      = 4
	eventsStaleConcurrency = 4
	// eventsSettle is left out of the measurement after subscribers come
	// or go.
	eventsSettle = 250 * time.Millisecond
	// eventsWindowMin bounds each kind of window's total from below:
	// CPU per write needs some thousands of writes to be read to 1%.
	eventsWindowMin = 8 * time.Second
	// eventsPairs is how many pairs of windows (one without subscribers,
	// one with) the accepted writes are measured in.
	eventsPairs = 24
)

// eventsResult is the events cell's figures.
type eventsResult struct {
	Concurrency int `json:"concurrency"`
	Subscribers int `json:"subscribers"`
	// WritesWithout and WritesWith count the accepted writes measured in
	// the windows without and with subscribers; CPUUsPerWrite* is the
	// gateway's CPU time per accepted write over each kind, in
	// microseconds. CPUOverheadPct is the median over the pairs of
	// windows of the CPU per write with subscribers over without, less
	// one, in percent; CPUOverheadPctSums is the same of the sums.
	WritesWithout         int64   `json:"writes_without"`
	WritesWith            int64   `json:"writes_with"`
	CPUUsPerWriteWithout  float64 `json:"cpu_us_per_write_without"`
	CPUUsPerWriteWith     float64 `json:"cpu_us_per_write_with"`
	RPSWithout            float64 `json:"rps_without"`
	RPSWith               float64 `json:"rps_with"`
	CPUOverheadPct        float64 `json:"cpu_overhead_pct"`
	CPUOverheadPctSums    float64 `json:"cpu_overhead_pct_sums"`
	StaleRPSWith          float64 `json:"stale_rps_with"`
	StaleRPSWithout       float64 `json:"stale_rps_without"`
	EventsDropped         float64 `json:"events_dropped"`
	SubscriberBytesRead   int64   `json:"subscriber_bytes_read"`
	StaleRefusalsNotStale int64   `json:"stale_refusals_not_409"`
}

// summaryFields are the figures the summary line gains.
func (r *eventsResult) summaryFields() string {
	return fmt.Sprintf("events_cpu_overhead_pct=%.2f events_stale_rps=%.0f", r.CPUOverheadPct, r.StaleRPSWith)
}

// text is the cell's report, a few lines.
func (r *eventsResult) text() string {
	return fmt.Sprintf("events: %d writers, %d subscribers (1 never reading) in alternate windows:\n"+
		"  without: %d writes, %.0f/s, %.1f µs gateway CPU a write\n"+
		"  with:    %d writes, %.0f/s, %.1f µs gateway CPU a write (%+.2f%% over the sums, %+.2f%% the median of %d pairs of windows),\n"+
		"           %.0f events dropped, %d bytes read by the readers\n"+
		"  stale refusals (%d writers): %.0f/s with the subscribers, %.0f/s without\n",
		r.Concurrency, r.Subscribers,
		r.WritesWithout, r.RPSWithout, r.CPUUsPerWriteWithout,
		r.WritesWith, r.RPSWith, r.CPUUsPerWriteWith, r.CPUOverheadPctSums, r.CPUOverheadPct, eventsPairs, r.EventsDropped, r.SubscriberBytesRead,
		eventsStaleConcurrency, r.StaleRPSWith, r.StaleRPSWithout)
}

// threadsCPU returns the CPU time all of process pid's threads have run,
// from /proc/<pid>/task/*/schedstat (nanoseconds); threads that exited
// are not counted, which for a Go process (threads are kept) is none.
func threadsCPU(pid int) (time.Duration, error) {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(stats) == 0 {
		return 0, fmt.Errorf("no /proc/%d/task/*/schedstat", pid)
	}
	var total int64
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the thread exited
		}
		field, _, _ := strings.Cut(string(b), " ")
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		total += n
	}
	return time.Duration(total), nil
}

// eventsLoad is writers putting without pause on their keys through
// rawConns, counting what they were answered.
type eventsLoad struct {
	ok, other atomic.Int64
	firstErr  atomic.Pointer[error]
}

// run runs n workers until ctx ends: each PUTs its own key (prefix + i)
// with token, expecting want.
func (l *eventsLoad) run(ctx context.Context, addr, prefix, token string, want int, n int, source *bodySource) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c := &rawConn{addr: addr}
			defer c.Close()
			w := &worker{id: i, body: source}
			path := prefix + strconv.Itoa(i)
			for ctx.Err() == nil {
				status, body, err := c.put(ctx, path, token, w.nextBody(), source.size)
				switch {
				case err == nil && (status == want || want == http.StatusOK && status == http.StatusCreated):
					l.ok.Add(1)
				case ctx.Err() != nil:
				default:
					l.other.Add(1)
					if err == nil {
						err = fmt.Errorf("PUT %s: %d %.200s", path, status, body)
					}
					l.firstErr.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	return &wg
}

// subscribers attaches n subscribers to g's feed: n-1 read their
// streams to the end, one never reads. close detaches them all.
type subscribers struct {
	bodies []io.Closer
	read   atomic.Int64
	wg     sync.WaitGroup
}

func attachSubscribers(ctx context.Context, client *http.Client, url string, n int) (*subscribers, error) {
	s := &subscribers{}
	for i := range n {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/events", nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("subscribe: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			s.close()
			return nil, fmt.Errorf("subscribe: %s", resp.Status)
		}
		s.bodies = append(s.bodies, resp.Body)
		if i == n-1 {
			continue // never read
		}
		s.wg.Go(func() {
			n, _ := io.Copy(io.Discard, resp.Body)
			s.read.Add(n)
		})
	}
	return s, nil
}

func (s *subscribers) close() {
	for _, b := range s.bodies {
		b.Close()
	}
	s.wg.Wait()
}

// eventsCell runs the events cell (see the top of the file).
func (b *bench) eventsCell(ctx context.Context) (*eventsResult, error) {
	g, err := startMeasuredGateway(ctx, b.st, "events", b.bin, b.st.s3Endpoint, b.cfg.gatewayLogLevel)
	if err != nil {
		return nil, err
	}
	defer g.stop()
	addr := strings.TrimPrefix(g.url, "http://")
	subClient := &http.Client{Transport: &http.Transport{Proxy: nil, DisableCompression: true}}
	defer subClient.CloseIdleConnections()
	res := &eventsResult{Concurrency: eventsConcurrency, Subscribers: eventsSubscribers}
	source := newBodySource(1 << 10)
	keys := "/v1/objects/" + b.st.bucket + "/" + b.runID + "/events/"

	// Accepted writes, without interruption, measured in windows.
	window := max(b.cfg.duration, eventsWindowMin) / eventsPairs
	loadCtx, stopLoad := context.WithCancel(ctx)
	var load eventsLoad
	wg := load.run(loadCtx, addr, keys+"w", benchToken.String(), http.StatusOK, eventsConcurrency, source)
	stop := func() {
		stopLoad()
		wg.Wait()
	}
	var cpu [2]time.Duration
	var writes [2]int64
	var elapsed [2]time.Duration
	time.Sleep(b.cfg.warmup + eventsSettle) // every key created: 200s from here
	var perWrite [2 * eventsPairs]float64   // µs of CPU per write, by window
	for round := range 2 * eventsPairs {
		with := round%4 == 1 || round%4 == 2 // ABBA
		var subs *subscribers
		if with {
			if subs, err = attachSubscribers(ctx, subClient, g.url, eventsSubscribers); err != nil {
				stop()
				return nil, err
			}
		}
		time.Sleep(eventsSettle)
		i := 0
		if with {
			i = 1
		}
		cpu0, err := threadsCPU(g.pid)
		if err != nil {
			stop()
			return nil, err
		}
		n0, t0 := load.ok.Load(), time.Now()
		select {
		case <-ctx.Done():
		case <-time.After(window):
		}
		cpu1, err := threadsCPU(g.pid)
		n1, t1 := load.ok.Load(), time.Now()
		if subs != nil {
			subs.close()
			res.SubscriberBytesRead += subs.read.Load()
		}
		if err != nil {
			stop()
			return nil, err
		}
		cpu[i] += cpu1 - cpu0
		writes[i] += n1 - n0
		elapsed[i] += t1.Sub(t0)
		perWrite[round] = float64((cpu1 - cpu0).Nanoseconds()) / 1e3 / float64(max(n1-n0, 1))
		b.progress.cell = fmt.Sprintf("events: window %d/%d (subscribers: %v): %d writes, %.1f µs CPU a write", round+1, 2*eventsPairs, with, n1-n0, perWrite[round])
	}
	stop()
	if n := load.other.Load(); n > 0 {
		return nil, fmt.Errorf("events cell: %d writes not answered 200, the first: %v", n, *load.firstErr.Load())
	}
	if writes[0] == 0 || writes[1] == 0 {
		return nil, errors.New("events cell: no writes measured")
	}
	res.WritesWithout, res.WritesWith = writes[0], writes[1]
	res.CPUUsPerWriteWithout = float64(cpu[0].Nanoseconds()) / 1e3 / float64(writes[0])
	res.CPUUsPerWriteWith = float64(cpu[1].Nanoseconds()) / 1e3 / float64(writes[1])
	res.RPSWithout = float64(writes[0]) / elapsed[0].Seconds()
	res.RPSWith = float64(writes[1]) / elapsed[1].Seconds()
	res.CPUOverheadPctSums = 100 * (res.CPUUsPerWriteWith/res.CPUUsPerWriteWithout - 1)
	var ratios []float64
	for p := 0; p+1 < len(perWrite); p += 2 {
		without, with := perWrite[p], perWrite[p+1]
		if p%4 == 2 { // BA
			without, with = with, without
		}
		ratios = append(ratios, with/without)
	}
	slices.Sort(ratios)
	res.CPUOverheadPct = 100 * ((ratios[(len(ratios)-1)/2]+ratios[len(ratios)/2])/2 - 1)

	// Stale refusals: the keys hold benchToken's writes; prime them with
	// a larger token (the stale modes' primeToken), then write below it.
	var prime eventsLoad
	primeCtx, stopPrime := context.WithCancel(ctx)
	pwg := prime.run(primeCtx, addr, keys+"w", primeToken.String(), http.StatusOK, eventsStaleConcurrency, source)
	for prime.ok.Load() < eventsStaleConcurrency && prime.other.Load() == 0 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	stopPrime()
	pwg.Wait()
	if prime.other.Load() > 0 {
		return nil, fmt.Errorf("events cell: priming for stale writes: %v", *prime.firstErr.Load())
	}
	staleWindow := max(b.cfg.duration, eventsWindowMin) / 4
	for _, with := range []bool{true, false} {
		var subs *subscribers
		if with {
			if subs, err = attachSubscribers(ctx, subClient, g.url, eventsSubscribers); err != nil {
				return nil, err
			}
		}
		var stale eventsLoad
		sctx, stopStale := context.WithCancel(ctx)
		swg := stale.run(sctx, addr, keys+"w", staleToken.String(), http.StatusConflict, eventsStaleConcurrency, source)
		time.Sleep(eventsSettle)
		n0, t0 := stale.ok.Load(), time.Now()
		select {
		case <-ctx.Done():
		case <-time.After(staleWindow):
		}
		rps := float64(stale.ok.Load()-n0) / time.Since(t0).Seconds()
		stopStale()
		swg.Wait()
		if subs != nil {
			subs.close()
			res.SubscriberBytesRead += subs.read.Load()
		}
		res.StaleRefusalsNotStale += stale.other.Load()
		if with {
			res.StaleRPSWith = rps
		} else {
			res.StaleRPSWithout = rps
		}
	}
	if res.StaleRefusalsNotStale > 0 {
		return nil, fmt.Errorf("events cell: %d stale writes not answered 409", res.StaleRefusalsNotStale)
	}
	res.EventsDropped = gatewayMetric(b.metrics, g.url, "fencegate_events_dropped_total")
	return res, ctx.Err()
}

// gatewayMetric reads an unlabelled metric of the gateway's /metrics, -1
// when it cannot.
func gatewayMetric(client *http.Client, url, name string) float64 {
	resp, err := client.Get(url + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return -1
	}
	return v
}
