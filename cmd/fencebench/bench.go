package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	s3backend "fencegate/backends/s3"
	"fencegate/tokenstore"
)

// bench holds a run's clients and gateway processes.
type bench struct {
	cfg      config
	st       *stack
	bin      string
	runID    string // starts every key, so that runs on one bucket never meet
	progress *progress

	metrics       *http.Client      // for etcd's /metrics
	direct        *s3.Client        // modeDirectSDK's
	s3api         *s3.Client        // modeS3API's
	s3apiURL      string            // the S3 API gateway's endpoint
	directPool    *http.Transport   // direct's
	directObjects *s3backend.Client // modeDirect's
	etcd          *clientv3.Client
	fences        *tokenstore.Store // modeClientSide's and modeStoreRaiseUnbatched's: no group commit
	groupFences   *tokenstore.Store // modeStoreRaise's: group commit, as the gateway's
	objects       *s3backend.Client // modeClientSide's
	http          *http.Client
	tickets       *ticketClients             // modeTicket's (ticket.go); nil without it
	proxy         *countingProxy             // in front of S3, for the stale gateways
	gateways      map[string]*gatewayProcess // by mode
	bodies        map[int64]*bodySource
	gcs           *gcsBench // the GCS cells' (gcs.go); nil without them
}

// maxPool bounds every connection pool: the largest concurrency a run may
// use, so that no request waits for a connection.
const maxPool = 4096

func newBench(ctx context.Context, cfg config, st *stack, bin string, p *progress) (_ *bench, err error) {
	b := &bench{
		cfg:      cfg,
		st:       st,
		bin:      bin,
		runID:    "run-" + strings.ToLower(rand.Text()[:8]),
		progress: p,
		metrics:  &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}},
		http:     newHTTPClient(maxPool),
		gateways: map[string]*gatewayProcess{},
		bodies:   map[int64]*bodySource{},
	}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	b.direct, b.directPool = newDirectClient(st, maxPool)
	if _, err := b.direct.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(st.bucket)}); err != nil &&
		!strings.Contains(err.Error(), "BucketAlreadyOwnedByYou") && !strings.Contains(err.Error(), "BucketAlreadyExists") {
		return nil, fmt.Errorf("create bucket %s: %w", st.bucket, err)
	}
	b.etcd, err = clientv3.New(clientv3.Config{Endpoints: st.etcdEndpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	// A client fencing for itself sends its own transaction: it has no
	// other writers' raises to group with.
	if b.fences, err = tokenstore.New(b.etcd, tokenstore.Config{DisableGroupCommit: true}); err != nil {
		return nil, err
	}
	if b.groupFences, err = tokenstore.New(b.etcd, tokenstore.Config{}); err != nil {
		return nil, err
	}
	// The client-side and the direct writers each get a backend of their
	// own: two pools, as two clients would have.
	newObjects := func() (*s3backend.Client, error) {
		return s3backend.New(ctx, s3backend.Config{
			Endpoint:        st.s3Endpoint,
			AccessKeyID:     st.accessKey,
			SecretAccessKey: st.secretKey,
			UsePathStyle:    true,
			MaxConnsPerHost: maxPool,
		})
	}
	b.objects, err = newObjects()
	if err != nil {
		return nil, err
	}
	b.directObjects, err = newObjects()
	if err != nil {
		return nil, err
	}
	if b.proxy, err = startCountingProxy(st.s3Endpoint); err != nil {
		return nil, err
	}
	for _, m := range cfg.modes {
		gwBin, s3Endpoint := bin, st.s3Endpoint
		switch m {
		case modeGateway, modeTicket:
		case modeBaseline:
			gwBin = cfg.baselineFencegate
		case modeStale:
			s3Endpoint = b.proxy.url
		case modeStaleBaseline:
			gwBin, s3Endpoint = cfg.baselineFencegate, b.proxy.url
		default:
			continue
		}
		g, err := startMeasuredGateway(ctx, st, m, gwBin, s3Endpoint, cfg.gatewayLogLevel)
		if err != nil {
			return nil, err
		}
		b.gateways[m] = g
	}
	if err := b.startGCS(ctx); err != nil {
		return nil, err
	}
	if slices.Contains(cfg.modes, modeTicket) {
		b.tickets = newTicketClients(maxPool)
	}
	if slices.Contains(cfg.modes, modeS3API) || slices.Contains(cfg.modes, modeS3APINetHTTP) {
		g, endpoint, err := startS3APIGateway(ctx, st, bin, cfg.gatewayLogLevel)
		if err != nil {
			return nil, err
		}
		b.gateways[modeS3API] = g
		b.s3api = newS3APIClient(st, endpoint, maxPool)
		b.s3apiURL = endpoint
	}
	return b, nil
}

func (b *bench) close() {
	for _, g := range b.gateways {
		g.stop()
	}
	b.gcs.close()
	b.http.CloseIdleConnections()
	b.tickets.close()
	if b.directPool != nil {
		b.directPool.CloseIdleConnections()
	}
	if b.proxy != nil {
		b.proxy.close()
	}
	if b.etcd != nil {
		_ = b.etcd.Close()
	}
}

// configSummary is the part of the configuration a report shows.
func (b *bench) configSummary() reportConfig {
	rc := reportConfig{
		Set:             b.cfg.set,
		Modes:           b.cfg.modes,
		Duration:        b.cfg.duration.String(),
		Rounds:          b.cfg.rounds,
		Warmup:          b.cfg.warmup.String(),
		MaxRequests:     b.cfg.maxRequests,
		Fencegate:       b.bin,
		FencegateBuild:  buildOf(b.bin),
		Baseline:        b.cfg.baselineFencegate,
		GatewayLogLevel: b.cfg.gatewayLogLevel,
		StaleClient:     b.cfg.staleClient,
		EtcdFsync:       !b.cfg.etcdNoFsync,
		S3KeepAlive:     b.cfg.s3KeepAlive && b.cfg.s3Endpoint == "",
		S3Data:          b.st.s3Data,
		EtcdStarted:     len(b.cfg.etcdEndpoints) == 0,
		S3Started:       b.cfg.s3Endpoint == "",
	}
	if b.cfg.baselineFencegate != "" {
		rc.BaselineBuild = buildOf(b.cfg.baselineFencegate)
	}
	return rc
}

func (b *bench) body(size int64) *bodySource {
	if s, ok := b.bodies[size]; ok {
		return s
	}
	s := newBodySource(size)
	b.bodies[size] = s
	return s
}

// snapshot is the resource counters at one edge of a window.
type snapshot struct {
	gateway, etcd, s3, self time.Duration
	machine                 time.Duration // all CPUs' busy time; -1: unknown
	etcdRequests            int64
	// ticketBytes is what the load has written to the ticket gateway's
	// connections (ticket.go).
	ticketBytes int64
	errs        []error
}

// moved returns s moved on by what the counters moved from from to to:
// the end of a window made of s's and that one. A counter unknown (-1)
// on any side stays unknown; errors are kept.
func (s snapshot) moved(from, to snapshot) snapshot {
	add := func(a, f, t time.Duration) time.Duration {
		if a < 0 || f < 0 || t < 0 {
			return -1
		}
		return a + t - f
	}
	s.gateway = add(s.gateway, from.gateway, to.gateway)
	s.etcd = add(s.etcd, from.etcd, to.etcd)
	s.s3 = add(s.s3, from.s3, to.s3)
	s.self = add(s.self, from.self, to.self)
	s.machine = add(s.machine, from.machine, to.machine)
	s.etcdRequests += to.etcdRequests - from.etcdRequests
	s.ticketBytes += to.ticketBytes - from.ticketBytes
	s.errs = slices.Concat(s.errs, from.errs, to.errs)
	return s
}

// measurement is what a cell's rounds measured: their windows together,
// and counters whose end minus start is what they moved over all of them.
type measurement struct {
	w          window
	start, end snapshot
	// Stale cells: the requests etcd (from anyone) and S3 (from the stale
	// gateway) received over its rounds, warm-ups included.
	staleEtcd, staleS3 int64
	staleErrs          []error // reading etcd's count
}

// add adds a later round of the same cell.
func (m *measurement) add(o measurement) {
	m.w.add(o.w)
	m.end = m.end.moved(o.start, o.end)
	m.staleEtcd += o.staleEtcd
	m.staleS3 += o.staleS3
	m.staleErrs = append(m.staleErrs, o.staleErrs...)
}

// result is the cell's figures from m.
func (m measurement) result(c cell) cellResult {
	res := newCellResult(c, m.w, m.start, m.end)
	if !c.stale() {
		return res
	}
	if err := firstErr(m.staleErrs); err != nil {
		res.Notes = append(res.Notes, "etcd requests not counted: "+err.Error())
	} else {
		n := m.staleEtcd
		res.StaleEtcdRequests = &n
	}
	n := m.staleS3
	res.StaleS3Requests = &n
	return res
}

// take reads the counters; gatewayPID is the cell's gateway process (0:
// none), storePID its store's (the s3 figures: versitygw's, or
// fake-gcs-server's for a GCS cell).
// etcd's request count is read first at the start of a window and last at
// its end, so that the scrape's own CPU stays out of the window.
func (b *bench) take(ctx context.Context, gatewayPID, storePID int, start bool) snapshot {
	var s snapshot
	readRequests := func() {
		n, err := etcdRequests(ctx, b.metrics, b.st.etcdEndpoints[0])
		s.etcdRequests = n
		s.errs = append(s.errs, err)
	}
	if start {
		readRequests()
	}
	read := func(pid int) time.Duration {
		if pid == 0 {
			return -1
		}
		d, err := processCPU(pid)
		if err != nil {
			return -1
		}
		return d
	}
	s.gateway, s.etcd, s.s3 = read(gatewayPID), read(b.st.etcdPID), read(storePID)
	if b.tickets != nil {
		s.ticketBytes = b.tickets.sent.Load()
	}
	if d, err := selfCPU(); err == nil {
		s.self = d
	} else {
		s.self = -1
	}
	if d, err := machineBusy(); err == nil {
		s.machine = d
	} else {
		s.machine = -1
	}
	if !start {
		readRequests()
	}
	return s
}

// runShape measures the cells of one shape (the modes of one pattern,
// size and concurrency; see plan) in cfg.rounds rounds. Each round gives
// every cell an equal share of the window, in plan order in even rounds
// and in reverse in odd ones (and see shapeOrder for the two gateway
// builds), so that drift on a noisy machine and the order of measurement
// (the later of two cells run back to back tends to do a little better)
// hit every mode alike. A round that other processes
// disturbed runs again, up to cfg.retryDisturbed times; the least
// disturbed counts. cells are the run's from first on, of total; the
// progress lines number them so.
func (b *bench) runShape(ctx context.Context, cells []cell, first, total int) ([]cellResult, error) {
	label := func(i int) string { return fmt.Sprintf("[%d/%d] %s", first+i+1, total, cells[i]) }
	rounds := b.cfg.rounds
	measured := make([]measurement, len(cells))
	disturbed := make([][]string, len(cells))
	for round := range rounds {
		for _, i := range shapeOrder(cells, round) {
			c := cells[i]
			var m measurement
			var other float64
			for attempt := range 1 + b.cfg.retryDisturbed {
				b.progress.cell = fmt.Sprintf("%s, round %d of %d", label(i), round+1, rounds)
				if attempt > 0 {
					b.progress.note("%s: other processes used %.2f cores; again", b.progress.cell, other)
				}
				r, err := b.measure(ctx, c, round, attempt)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", c, err)
				}
				o := r.result(c).otherCores()
				if attempt == 0 || o < other {
					m, other = r, o
				}
				if other <= disturbedCores {
					break
				}
			}
			if other > disturbedCores {
				disturbed[i] = append(disturbed[i], fmt.Sprintf("round %d: %.2f cores", round+1, other))
			}
			if round == 0 {
				measured[i] = m
			} else {
				measured[i].add(m)
			}
		}
	}
	results := make([]cellResult, len(cells))
	for i, c := range cells {
		res := measured[i].result(c)
		if len(disturbed[i]) > 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("disturbed: other processes used more than %.2f cores (%s); figures not comparable",
				disturbedCores, strings.Join(disturbed[i], ", ")))
		}
		b.progress.cell = label(i)
		b.progress.done(res)
		results[i] = res
	}
	return results, nil
}

// roundOrder returns the order in which round runs a shape's n cells:
// forward in even rounds, backward in odd ones.
func roundOrder(n, round int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
		if round%2 == 1 {
			order[i] = n - 1 - i
		}
	}
	return order
}

// measure runs one round of a cell: its own keys, a warm-up, and a
// window of its share of its time (config.window) and of cfg.maxRequests.
func (b *bench) measure(ctx context.Context, c cell, round, attempt int) (measurement, error) {
	prefix := fmt.Sprintf("%s/%s/%s/%s/c%d/r%d/a%d/", b.runID, c.mode, c.pattern, byteSize(c.size), c.concurrency, round, attempt)
	keys := func(i int) string { return prefix + "hot" }
	if c.pattern == patternDistinct || c.pattern == patternRaise {
		keys = func(i int) string { return fmt.Sprintf("%sw%d", prefix, i) }
	}
	var (
		op       operation
		gateway  *gatewayProcess
		storePID = b.st.s3PID
	)
	switch c.mode {
	case modeDirect:
		op = directPut(b.directObjects, b.st.bucket, c.size)
	case modeDirectSDK:
		op = directSDKPut(b.direct, b.st.bucket, c.size)
	case modeClientSide:
		op = clientSidePut(b.fences, b.objects, b.st.bucket, c.size, writeToken(c.pattern))
	case modeGateway, modeBaseline:
		gateway = b.gateways[c.mode]
		op = gatewayPut(b.http, gateway.url, b.st.bucket, c.size, writeTokenHeader(c.pattern))
	case modeGCSDirect, modeGCSGateway:
		op, gateway = b.gcsOperation(c)
		storePID = b.gcs.pid
	case modeS3API:
		gateway = b.gateways[c.mode]
		op = s3APIPut(b.s3api, b.st.bucket, c.size)
	case modeS3APINetHTTP:
		gateway = b.gateways[modeS3API]
		var err error
		if op, err = s3APINetHTTPPut(ctx, b.http, b.s3api, b.s3apiURL, b.st.bucket, c.size); err != nil {
			return measurement{}, err
		}
	case modeTicket:
		gateway = b.gateways[c.mode]
		op = ticketPut(b.tickets, gateway.url, b.st.bucket, c.size, writeTokenHeader(c.pattern))
	case modeStoreRaise:
		op = storeRaise(b.groupFences, b.st.bucket)
	case modeStoreRaiseUnbatched:
		op = storeRaise(b.fences, b.st.bucket)
	case modeStale, modeStaleBaseline:
		gateway = b.gateways[c.mode]
		op = stalePut(b.http, b.cfg.staleClient == "raw", gateway.url, b.st.bucket, c.size)
		if err := b.prime(ctx, gateway, c, keys); err != nil {
			return measurement{}, err
		}
	}
	gatewayPID := 0
	if gateway != nil {
		gatewayPID = gateway.pid
	}
	// For stale cells, the etcd and S3 requests are counted over the
	// whole round, warm-up included, not only over the window.
	var staleBefore snapshot
	var proxyBefore int64
	if c.stale() {
		staleBefore = b.take(ctx, 0, storePID, true)
		proxyBefore = b.proxy.requests.Load()
	}
	rounds := int64(b.cfg.rounds)
	l := &load{
		op:          op,
		concurrency: c.concurrency,
		keys:        keys,
		body:        b.body(c.size),
		warmup:      b.cfg.warmup,
		duration:    b.cfg.window(c) / time.Duration(rounds),
		maxRequests: (b.cfg.maxRequests + rounds - 1) / rounds,
		progress:    b.progress.update,
	}
	var m measurement
	m.w = l.run(ctx,
		func() { m.start = b.take(ctx, gatewayPID, storePID, true) },
		func() { m.end = b.take(ctx, gatewayPID, storePID, false) },
	)
	if err := ctx.Err(); err != nil {
		return measurement{}, err
	}
	if c.size >= 1<<20 && !c.stale() {
		// Large objects are not read again: free the space (on tmpfs,
		// memory) for the cells to come.
		b.deleteObjects(ctx, c, keys)
	}
	if c.stale() {
		after := b.take(ctx, 0, storePID, false)
		m.staleEtcd = after.etcdRequests - staleBefore.etcdRequests
		m.staleErrs = slices.Concat(staleBefore.errs, after.errs)
		m.staleS3 = b.proxy.requests.Load() - proxyBefore
	}
	return m, nil
}

// prime writes every key of a stale cell once with primeToken, through
// the cell's gateway, so that it knows each object's high-water mark.
func (b *bench) prime(ctx context.Context, g *gatewayProcess, c cell, keys func(int) string) error {
	n := 1
	if c.pattern == patternDistinct {
		n = c.concurrency
	}
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			url := g.url + "/v1/objects/" + b.st.bucket + "/" + keys(i)
			status, body, err := put(ctx, b.http, url, primeToken.String(), strings.NewReader("primed"), int64(len("primed")))
			if err == nil && status != http.StatusCreated && status != http.StatusOK {
				err = &errStatus{status, string(body)}
			}
			if err != nil {
				errs <- fmt.Errorf("prime %s: %w", keys(i), err)
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when closed and empty
}

// deleteObjects removes a cell's objects straight from S3, unfenced: they
// are the benchmark's own, and their keys are never used again.
func (b *bench) deleteObjects(ctx context.Context, c cell, keys func(int) string) {
	n := 1
	if c.pattern == patternDistinct {
		n = c.concurrency
	}
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			_, _ = b.direct.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.st.bucket), Key: aws.String(keys(i))})
		})
	}
	wg.Wait()
}

func firstErr(lists ...[]error) error {
	for _, l := range lists {
		for _, err := range l {
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// shapeOrder returns the order in which round runs cells, a shape's:
// roundOrder's, with the gateway and baseline cells trading places in
// the third and fourth of every four rounds. Forward and backward alone,
// the gateway would always follow the mode before it in plan order
// (client-side fencing, which leaves etcd and the load tool the most to
// clean up) and the baseline never would; trading places every other
// pair of rounds has each build follow the same modes as often, so that
// the two builds are measured alike.
func shapeOrder(cells []cell, round int) []int {
	order := roundOrder(len(cells), round)
	if round/2%2 == 0 {
		return order
	}
	gateway, baseline := -1, -1
	for place, i := range order {
		switch cells[i].mode {
		case modeGateway:
			gateway = place
		case modeBaseline:
			baseline = place
		}
	}
	if gateway >= 0 && baseline >= 0 {
		order[gateway], order[baseline] = order[baseline], order[gateway]
	}
	return order
}
