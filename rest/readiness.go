package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"fencegate/api"
	"fencegate/internal/problemhttp"

	"github.com/prometheus/client_golang/prometheus"
)

// /readyz is open to anyone, and each probe costs an etcd request (one
// through Raft) and an S3 request, which AWS bills. So every probe's
// result is reused for Config.ReadinessCache, and callers that come while
// a probe runs wait for it instead of starting another: however often
// /readyz is called, each dependency is probed at most once per period.
// A probe runs detached from the request that started it, bounded by
// Config.ReadinessTimeout, so that a caller that gives up does not fail
// the others, and a probe stuck behind bulk transfers (S3's connection
// pool is shared with them) ends in time and reports it.

// spaceWarningPercent is how full the token store's database may be
// before /readyz warns (still ready) that it is nearing its quota.
const spaceWarningPercent = 80

// cached runs fn at most once per ttl and once at a time, and hands its
// latest result to every caller.
type cached[T any] struct {
	fn      func(context.Context) (T, error)
	ttl     time.Duration
	timeout time.Duration

	mu  sync.Mutex
	val T
	err error
	at  time.Time // when val and err were read; zero: never
	// running is closed when the run under way ends; nil: none runs.
	running chan struct{}
}

func newCached[T any](fn func(context.Context) (T, error), ttl, timeout time.Duration) *cached[T] {
	return &cached[T]{fn: fn, ttl: ttl, timeout: timeout}
}

// get returns fn's result if it is younger than ttl; otherwise it starts
// a run of fn unless one is under way, and waits for its result or for
// ctx to be done.
func (c *cached[T]) get(ctx context.Context) (T, error) {
	c.mu.Lock()
	if !c.at.IsZero() && time.Since(c.at) < c.ttl {
		defer c.mu.Unlock()
		return c.val, c.err
	}
	done := c.running
	if done == nil {
		done = make(chan struct{})
		c.running = done
		go c.run(context.WithoutCancel(ctx), done)
	}
	c.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.val, c.err
}

// run runs fn within the timeout, keeps its result, and closes done.
func (c *cached[T]) run(ctx context.Context, done chan struct{}) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	val, err := c.fn(ctx)
	cancel()
	c.mu.Lock()
	c.val, c.err, c.at, c.running = val, err, time.Now(), nil
	c.mu.Unlock()
	close(done)
}

// readiness holds the cached probes behind /readyz and the store space
// metrics.
type readiness struct {
	probes []namedProbe
	space  *cached[StoreSpace] // nil without Config.StoreSpace
}

// namedProbe is a Probe whose results are cached.
type namedProbe struct {
	name  string
	probe *cached[struct{}]
}

func newReadiness(cfg Config) *readiness {
	rd := &readiness{}
	for _, c := range cfg.Readiness {
		probe := func(ctx context.Context) (struct{}, error) { return struct{}{}, c.Ping(ctx) }
		rd.probes = append(rd.probes, namedProbe{name: c.Name, probe: newCached(probe, cfg.ReadinessCache, cfg.ReadinessTimeout)})
	}
	if cfg.StoreSpace != nil {
		rd.space = newCached(cfg.StoreSpace, cfg.ReadinessCache, cfg.ReadinessTimeout)
	}
	return rd
}

// readinessAnswer is the body of a /readyz answer.
type readinessAnswer struct {
	Ready bool `json:"ready"`
	// Checks holds "ok" or why not of each probe, and "draining" for
	// "gateway" while the gateway shuts down.
	Checks map[string]string `json:"checks"`
	// Warnings say what needs an operator's attention soon but does not
	// make the gateway unready.
	Warnings []string `json:"warnings,omitempty"`
}

// report runs (or reuses) every probe, all at once, and the store space
// reading. It returns the errors of the probes that failed.
func (rd *readiness) report(ctx context.Context) (readinessAnswer, []error) {
	answer := readinessAnswer{Ready: true, Checks: make(map[string]string, len(rd.probes)+1)}
	errs := make([]error, len(rd.probes))
	var (
		wg    sync.WaitGroup
		space StoreSpace
		known bool
	)
	for i, c := range rd.probes {
		wg.Go(func() { _, errs[i] = c.probe.get(ctx) })
	}
	if rd.space != nil {
		wg.Go(func() { space, known = rd.readSpace(ctx) })
	}
	wg.Wait()
	var failed []error
	for i, c := range rd.probes {
		if errs[i] != nil {
			answer.Ready = false
			answer.Checks[c.name] = errs[i].Error()
			failed = append(failed, errs[i])
			continue
		}
		answer.Checks[c.name] = "ok"
	}
	if known && space.Size*100 >= space.Quota*spaceWarningPercent {
		answer.Warnings = append(answer.Warnings, fmt.Sprintf(
			"etcd's database is %d%% of its quota (%s of %s): compact and defragment etcd before it is full and refuses every write",
			space.Size*100/space.Quota, mebibytes(space.Size), mebibytes(space.Quota)))
	}
	return answer, failed
}

// readSpace returns the store's space reading, and false when there is
// none: no StoreSpace, or the reading failed (the probes say why).
func (rd *readiness) readSpace(ctx context.Context) (StoreSpace, bool) {
	if rd.space == nil {
		return StoreSpace{}, false
	}
	space, err := rd.space.get(ctx)
	return space, err == nil && space.Quota > 0
}

// mebibytes formats n bytes in MiB.
func mebibytes(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// readyz answers whether the gateway is ready: every readiness probe
// passes and it is not draining.
func (g *API) readyz(w http.ResponseWriter, r *http.Request) {
	answer, failed := g.readiness.report(r.Context())
	for _, err := range failed {
		if errors.Is(err, api.ErrNoSpace) {
			g.edge.HintNoSpace()
		}
	}
	if g.draining.Load() {
		answer.Ready = false
		answer.Checks["gateway"] = "draining"
	}
	status := http.StatusOK
	if !answer.Ready {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", problemhttp.RetryAfterSeconds)
	}
	writeJSON(w, status, answer)
}

// Probe is a named readiness probe of a dependency, such as "etcd" or
// "s3", which /readyz runs.
type Probe struct {
	Name string
	// Ping returns nil when the dependency is ready, and otherwise why
	// it is not.
	Ping func(ctx context.Context) error
}

// StoreSpace is how full the fence store's database is (etcd's, as one
// member reports it), in bytes.
type StoreSpace struct {
	// Size is the database's size, which its quota bounds.
	Size int64
	// InUse is the part of Size that holds data; defragmenting gives the
	// rest back.
	InUse int64
	// Quota is the size at which the store refuses writes (etcd's NOSPACE
	// alarm). Zero means unknown.
	Quota int64
}

// spaceCollector exports the fence store's space reading (Config.
// StoreSpace) at each scrape, through the readiness cache: a scrape reads
// it at most once per Config.ReadinessCache, shared with /readyz. It
// exports nothing when the latest reading failed (the readiness probes
// say why), rather than a size of zero.
type spaceCollector struct {
	readiness          *readiness
	size, inUse, quota *prometheus.Desc
}

func newSpaceCollector(rd *readiness) *spaceCollector {
	return &spaceCollector{
		readiness: rd,
		size: prometheus.NewDesc("fencegate_etcd_db_size_bytes",
			"Size of etcd's database, as the member the gateway's connection reaches reports it: what etcd compares with its quota.", nil, nil),
		inUse: prometheus.NewDesc("fencegate_etcd_db_size_in_use_bytes",
			"The part of etcd's database that holds data; defragmenting gives the rest back.", nil, nil),
		quota: prometheus.NewDesc("fencegate_etcd_db_quota_bytes",
			"etcd's database quota (--quota-backend-bytes): at this size etcd raises its NOSPACE alarm and refuses every write.", nil, nil),
	}
}

// Describe sends the three gauges' descriptions.
func (c *spaceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.size
	ch <- c.inUse
	ch <- c.quota
}

// Collect reads the space (or reuses a fresh reading) and sends it.
func (c *spaceCollector) Collect(ch chan<- prometheus.Metric) {
	space, ok := c.readiness.readSpace(context.Background())
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(space.Size))
	ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(space.InUse))
	ch <- prometheus.MustNewConstMetric(c.quota, prometheus.GaugeValue, float64(space.Quota))
}
