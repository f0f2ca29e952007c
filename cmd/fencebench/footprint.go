package main

// `fencebench footprint` is a soak of etcd's footprint: it writes as fast
// as it can through one `fencegate serve`, in front of an etcd with a
// small quota (--quota-backend-bytes) and periodic auto-compaction on, as
// `fencegate dev` and compose/ configure theirs, and versitygw on disk.
// Every write carries a new, larger token, on a rotating set of objects;
// some are deletes (of objects that are there, and of objects that are
// not), some are stale writes that the gateway must refuse with 409. It
// prints etcd's database size every minute, and fails if etcd ran out of
// space, if the size did not level off, if a stale write was accepted, or
// if any write got another answer than the one it must get.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"fencegate/api"
)

// footprintCommand is the subcommand that runs the soak.
const footprintCommand = "footprint"

const (
	// levelOffTolerance is how much larger than the middle third's
	// largest size the last third's may be, and the size still be said to
	// have levelled off (see judgeLevelOff).
	levelOffTolerance = 0.10
	// levelOffSlackBytes is the growth always allowed, however small the
	// database: 32 pages of bbolt's 4 KiB. A database of under a MiB (the
	// short run of make test) grows by a few pages when a branch splits
	// or the freelist takes a page more, and 10% of it is only 16 pages,
	// less than that noise: a run on a loaded machine measured 0.63 MiB
	// then 0.70 MiB (+11%, 70 KiB) with a flat key count. A database that
	// still grows (no compaction) adds far more: the history of a third
	// of the run, megabytes at the soak's rates.
	levelOffSlackBytes = 128 << 10
	// footprintBodyBytes is the size of every object written: small, so
	// that the run measures etcd, not S3.
	footprintBodyBytes = 128
	// The operation mix of a visit to an object that has a mark, in
	// percent; the rest are PUTs with a new token. An object without a
	// mark is always PUT.
	footprintDeletePercent = 15
	footprintStalePercent  = 15
	// footprintFirstToken is the first token written: stale tokens are
	// taken below an object's mark, and must stay at least 1.
	footprintFirstToken = 1000
	// footprintMaxErrors is how many unexpected answers the result keeps
	// word for word.
	footprintMaxErrors = 5
)

type footprintConfig struct {
	duration    time.Duration
	quotaBytes  int64
	objects     int
	concurrency int
	// reportEvery is how often a line of etcd's size is printed.
	reportEvery time.Duration
	// compactionRetention is etcd's periodic auto-compaction retention;
	// negative turns auto-compaction off (to see the soak fail).
	compactionRetention time.Duration
	etcdNoFsync         bool
	fencegate           string
	workDir             string
	keep                bool
	seed                uint64
}

const footprintUsageText = `fencebench footprint writes as fast as it can through one fencegate serve,
in front of an etcd with a small quota (--quota-backend-bytes) and periodic
auto-compaction on, and versitygw on disk: every write a new, larger token on
a rotating set of objects, with deletes and stale writes among them. It
prints etcd's database size every minute (more often in runs under 6
minutes), then a one-line summary, and exits non-zero if etcd raised its
NOSPACE alarm, if the size did not level off (the largest size of the last
third of the run more than 10% above the largest of the middle third; to be
judged, every object must have been written three compaction retentions
before the last third), if a stale write was accepted, or if any write got
an answer other than the one it must get.

Usage: fencebench footprint [flags]

Flags:
`

func parseFootprintFlags(args []string, stderr io.Writer) (footprintConfig, error) {
	fs := flag.NewFlagSet("fencebench footprint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, footprintUsageText)
		fs.PrintDefaults()
	}
	var (
		cfg       footprintConfig
		quota     = byteSize(64 << 20)
		retention time.Duration
	)
	fs.DurationVar(&cfg.duration, "duration", 10*time.Minute, "how long to write")
	fs.Var(&quota, "quota", "etcd's --quota-backend-bytes")
	fs.IntVar(&cfg.objects, "objects", 100000, "size of the rotating set of objects")
	fs.IntVar(&cfg.concurrency, "concurrency", 32, "writers, each with its own share of the objects")
	fs.DurationVar(&cfg.reportEvery, "report-every", 0, "how often to print etcd's size (default: every minute, or every sixth of --duration if shorter)")
	fs.DurationVar(&retention, "compaction-retention", 0, "etcd's periodic auto-compaction retention (default: a sixtieth of --duration, at least 1s;\nnegative: auto-compaction off, which the soak must then fail)")
	fs.BoolVar(&cfg.etcdNoFsync, "etcd-unsafe-no-fsync", false, "start etcd without fsync (faster on a slow disk; no effect on its size)")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the operation mix")
	fs.StringVar(&cfg.fencegate, "fencegate", "", "the fencegate `binary` (default: next to this program, else bin/fencegate of the repository)")
	fs.StringVar(&cfg.workDir, "dir", "", "working `directory` for data and the gateway's log (default: a temporary one, removed at the end)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the working directory")
	if err := fs.Parse(args); err != nil {
		return footprintConfig{}, err
	}
	if fs.NArg() > 0 {
		return footprintConfig{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg.quotaBytes = int64(quota)
	cfg.compactionRetention = retention
	if retention == 0 {
		// Short, so that the history kept (one to two retentions) stays
		// small beside the set's keys, whatever the write rate, and the
		// size is steady well before the middle third (see judgeLevelOff).
		cfg.compactionRetention = max(cfg.duration/60, time.Second).Truncate(time.Second)
	}
	if cfg.reportEvery <= 0 {
		cfg.reportEvery = min(time.Minute, cfg.duration/6)
	}
	var errs []error
	if cfg.duration < 6*time.Second {
		errs = append(errs, errors.New("--duration must be at least 6s"))
	}
	if cfg.quotaBytes < 1<<20 {
		errs = append(errs, errors.New("--quota must be at least 1MiB"))
	}
	if cfg.objects < 1 || cfg.concurrency < 1 || cfg.concurrency > 1000 {
		errs = append(errs, errors.New("--objects must be positive, --concurrency 1 to 1000"))
	}
	// The size is judged from the middle third on: by then the history
	// kept must have reached its largest (see judgeLevelOff).
	if cfg.compactionRetention > cfg.duration/6 {
		errs = append(errs, fmt.Errorf("--compaction-retention %v is longer than a sixth of --duration: the size could not level off before the middle third", cfg.compactionRetention))
	}
	if len(errs) > 0 {
		return footprintConfig{}, errors.Join(errs...)
	}
	return cfg, nil
}

// footprintMain runs the subcommand and returns the exit status.
func footprintMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFootprintFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "fencebench footprint: %v\n", err)
		return 2
	}
	res, err := runFootprint(ctx, cfg, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "fencebench footprint: %v\n", err)
		return 1
	}
	if failures := res.failures(); len(failures) > 0 {
		for _, f := range failures {
			fmt.Fprintf(stderr, "fencebench footprint: FAIL: %s\n", f)
		}
		return 1
	}
	return 0
}

// etcdSample is what etcd said of itself at one moment of the run.
type etcdSample struct {
	At              time.Duration // since the writers started
	DBSize          int64         // the database's size, which its quota bounds
	DBSizeInUse     int64         // the part of it not free for reuse
	Revision        int64
	CompactRevision int64 // 0: never compacted
	Keys            int64
	// Puts is the keys etcd has put since it started
	// (etcd_mvcc_put_total): a raise of a mark is one, and under group
	// commit several raises share one revision.
	Puts    int64
	NoSpace bool  // the NOSPACE alarm is raised
	Writes  int64 // answered so far
}

// footprintResult is what a run came to.
type footprintResult struct {
	Config  footprintConfig
	Elapsed time.Duration // the writers' time

	Puts            int64 // accepted, as 201 or 200
	DeletesExisting int64 // 204, the object was there: raises the mark
	DeletesAbsent   int64 // 204, the object was not there: no mark
	StaleRefused    int64 // 409 stale-token
	StaleAccepted   int64 // a stale write that got a 2xx
	Unexpected      int64 // any other answer, or none
	Errors          []string

	// CoveredAt is when every object of the set had a mark (0: never).
	CoveredAt time.Duration
	Samples   []etcdSample
	// StartRevision is etcd's revision when the writers started.
	StartRevision int64
	// BytesPerRevision is what a revision costs before compaction (see
	// bytesPerRevision; 0: unknown).
	BytesPerRevision float64
	LevelOff         levelOff
	SampleErrors     int64
	FirstSampleError string
}

func (r *footprintResult) writes() int64 {
	return r.Puts + r.DeletesExisting + r.DeletesAbsent + r.StaleRefused + r.StaleAccepted + r.Unexpected
}

// raises counts the writes that raised a mark: each is one etcd put
// (and at most one revision: the gateway's group commit puts several
// marks in one).
func (r *footprintResult) raises() int64 { return r.Puts + r.DeletesExisting }

func (r *footprintResult) noSpace() bool {
	for _, s := range r.Samples {
		if s.NoSpace {
			return true
		}
	}
	return false
}

// failures lists what makes the run fail, each in a sentence.
func (r *footprintResult) failures() []string {
	var out []string
	if r.noSpace() {
		out = append(out, "etcd raised its NOSPACE alarm: the database reached its quota")
	}
	if !r.LevelOff.OK {
		out = append(out, "etcd's database size did not level off: "+r.LevelOff.Reason)
	}
	if r.StaleAccepted > 0 {
		out = append(out, fmt.Sprintf("%d stale writes were accepted", r.StaleAccepted))
	}
	if r.Unexpected > 0 {
		out = append(out, fmt.Sprintf("%d writes got an unexpected answer", r.Unexpected))
	}
	if len(r.Errors) > 0 {
		out = append(out, "the first wrong answers: "+strings.Join(r.Errors, "; "))
	}
	if r.raises() == 0 || r.StaleRefused == 0 || r.DeletesExisting == 0 {
		out = append(out, fmt.Sprintf("the run wrote too little to judge: %d raises, %d stale writes refused, %d deletes of existing objects", r.raises(), r.StaleRefused, r.DeletesExisting))
	}
	return out
}

// summary is the final line.
func (r *footprintResult) summary() string {
	verdict := "ok"
	if len(r.failures()) > 0 {
		verdict = "FAIL"
	}
	last := etcdSample{}
	if len(r.Samples) > 0 {
		last = r.Samples[len(r.Samples)-1]
	}
	compaction := "off"
	if r.Config.compactionRetention > 0 {
		compaction = "periodic/" + r.Config.compactionRetention.String()
	}
	covered := "never"
	if r.CoveredAt > 0 {
		covered = r.CoveredAt.Round(time.Second).String()
	}
	revisions := last.Revision - r.StartRevision
	perRevision := "n/a"
	if r.BytesPerRevision > 0 {
		perRevision = strconv.FormatFloat(r.BytesPerRevision, 'f', 0, 64)
	}
	perRaise := 0.0
	if r.raises() > 0 {
		perRaise = float64(revisions) / float64(r.raises())
	}
	return fmt.Sprintf("footprint: verdict=%s duration=%v objects=%d quota=%s compaction=%s writes=%d (%.0f/s) puts=%d deletes=%d (existing %d, absent %d) "+
		"stale_refused=%d stale_accepted=%d unexpected=%d revisions=%d (%.2f per raise) bytes_per_revision=%s "+
		"db_size max_middle=%s max_last=%s (%+.1f%%) final=%s in_use=%s (%.0f%% of quota) compacted_to=%d keys=%d set_covered_at=%s nospace=%t",
		verdict, r.Config.duration, r.Config.objects, byteSize(r.Config.quotaBytes), compaction, r.writes(), float64(r.writes())/r.Elapsed.Seconds(),
		r.Puts, r.DeletesExisting+r.DeletesAbsent, r.DeletesExisting, r.DeletesAbsent,
		r.StaleRefused, r.StaleAccepted, r.Unexpected, revisions, perRaise, perRevision,
		fmtMiB(r.LevelOff.MiddleMax), fmtMiB(r.LevelOff.LastMax), r.LevelOff.growth()*100, fmtMiB(last.DBSize), fmtMiB(last.DBSizeInUse),
		100*float64(last.DBSize)/float64(r.Config.quotaBytes), last.CompactRevision, last.Keys, covered, r.noSpace())
}

func fmtMiB(n int64) string { return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20)) }

// levelOff is the verdict on the size's growth.
type levelOff struct {
	MiddleMax, LastMax int64
	OK                 bool
	Reason             string // why not OK
}

func (l levelOff) growth() float64 {
	if l.MiddleMax == 0 {
		return 0
	}
	return float64(l.LastMax)/float64(l.MiddleMax) - 1
}

// judgeLevelOff says whether etcd's database size levelled off during a
// run of duration d with compaction retention r (negative: off), in which
// every object of the set had its mark at covered (0: never): whether the
// largest size sampled in the last third of the run is at most
// levelOffTolerance above the largest sampled in the middle third, or at
// most levelOffSlackBytes above it, whichever allows more.
//
// Why this definition. The size (what the quota bounds) is the database
// file's high-water mark, which never shrinks without defragmentation, so
// the question is only whether it still grows. With periodic compaction
// at retention r, etcd compacts every r up to the revision of r before,
// so it keeps one to two retentions of history, whose pages each
// compaction frees and the next writes reuse: once every object of the
// set has its key and then the history has reached its largest (within
// 3r: two retentions, and one more for a compaction that comes late), a
// steady load needs no new pages, and the size stays where it is but for
// fragmentation and for the history of a faster moment, which the
// tolerance allows for. The run must reach that point before its last
// third, or there is nothing to compare the last third with. The middle
// third, not the first, is the reference, because the first holds the
// growth that is meant to stop: the keys being created and the history
// filling up. Without compaction every third of the run adds the same
// history, g bytes, on top of the keys' b: the last third's largest size
// is then (b+3g)/(b+2g) of the middle's, over 1.1 whenever g > b/8, far
// below what a soak writes (at 120 bytes a revision, a third of 10
// minutes at 500 writes a second is 12 MB, against 13 MB for 100,000
// keys).
func judgeLevelOff(samples []etcdSample, covered, r, d time.Duration) levelOff {
	var l levelOff
	var middle, last int
	for _, s := range samples {
		switch {
		case s.At >= 2*d/3:
			l.LastMax = max(l.LastMax, s.DBSize)
			last++
		case s.At >= d/3:
			l.MiddleMax = max(l.MiddleMax, s.DBSize)
			middle++
		}
	}
	steady := covered + 3*max(r, 0)
	switch {
	case middle == 0 || last == 0:
		l.Reason = fmt.Sprintf("%d samples of the size in the middle third and %d in the last; want some in each", middle, last)
	case covered == 0 || steady > 2*d/3:
		l.Reason = fmt.Sprintf("cannot judge: every object of the set had its mark at %v, and three compaction retentions later is %v, after the last third began at %v "+
			"(the writers were too slow for the set: lower --objects or lengthen --duration)",
			covered.Round(time.Second), steady.Round(time.Second), (2 * d / 3).Round(time.Second))
		if covered == 0 {
			l.Reason = "cannot judge: the writers never gave every object of the set its mark (lower --objects or lengthen --duration)"
		}
	case float64(l.LastMax) > max(float64(l.MiddleMax)*(1+levelOffTolerance), float64(l.MiddleMax+levelOffSlackBytes)):
		l.Reason = fmt.Sprintf("the last third's largest size, %s, is %.1f%% above the middle third's, %s (at most %.0f%%, or %d KiB)",
			fmtMiB(l.LastMax), l.growth()*100, fmtMiB(l.MiddleMax), levelOffTolerance*100, levelOffSlackBytes>>10)
	default:
		l.OK = true
	}
	return l
}

// bytesPerRevision is what a revision costs etcd before compaction: the
// growth of the size in use per revision, from the writers' start to the
// last sample before compaction removed any of their revisions. It is 0
// (unknown) when fewer than 1,000 revisions were written before that,
// as with a retention of a few seconds.
func bytesPerRevision(samples []etcdSample, startRevision int64) float64 {
	if len(samples) == 0 {
		return 0
	}
	first := samples[0]
	var before *etcdSample
	for i := range samples {
		if samples[i].CompactRevision > startRevision {
			break
		}
		before = &samples[i]
	}
	if before == nil || before.Revision-first.Revision < 1000 {
		return 0
	}
	return float64(before.DBSizeInUse-first.DBSizeInUse) / float64(before.Revision-first.Revision)
}

// footprinter is a run: the gateway, etcd's client, and the tallies.
type footprinter struct {
	cfg      footprintConfig
	base     string // the objects' URL prefix
	http     *http.Client
	etcd     *clientv3.Client
	metrics  *http.Client
	endpoint string // etcd's
	body     []byte

	nextToken atomic.Uint64
	covered   atomic.Int64 // objects with a mark
	start     time.Time
	coveredAt atomic.Int64 // nanoseconds since start; 0: not yet

	puts, deletesExisting, deletesAbsent atomic.Int64
	staleRefused, staleAccepted          atomic.Int64
	unexpected                           atomic.Int64
	mu                                   sync.Mutex
	errors                               []string
}

// footprintObject is what its writer knows of one object. Each object
// has one writer, so the answer every write must get is known.
type footprintObject struct {
	key string
	// mark is the object's high-water mark: the token of its last PUT,
	// or of its last DELETE that found it there (0: none). A DELETE of an
	// absent object raises no mark (fencegate's default), so a stale
	// token is one below the mark, not merely below the last token sent.
	mark   api.Token
	exists bool
}

// runFootprint starts etcd, versitygw and the gateway, runs the writers
// and the sampler for cfg.duration, and returns the result. Its error is
// for a run that could not be made; the verdict is the result's.
func runFootprint(ctx context.Context, cfg footprintConfig, stdout, stderr io.Writer) (*footprintResult, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.duration+5*time.Minute)
	defer cancel()
	bin, err := findFencegate(cfg.fencegate)
	if err != nil {
		return nil, err
	}
	if cfg.workDir == "" {
		dir, err := os.MkdirTemp("", "fencebench-footprint-")
		if err != nil {
			return nil, err
		}
		cfg.workDir = dir
		if !cfg.keep {
			defer os.RemoveAll(dir)
		}
	} else if err := os.MkdirAll(cfg.workDir, 0o700); err != nil {
		return nil, err
	}
	compaction := "off"
	if cfg.compactionRetention > 0 {
		compaction = "periodic, retention " + cfg.compactionRetention.String()
	}
	fmt.Fprintf(stderr, "fencebench footprint: %v, %d objects, %d writers, etcd quota %s, auto-compaction %s; data and logs in %s\n",
		cfg.duration, cfg.objects, cfg.concurrency, byteSize(cfg.quotaBytes), compaction, cfg.workDir)

	endpoint, pid, stopEtcd, err := startEtcdChild(ctx, filepath.Join(cfg.workDir, "etcd"), etcdChildOptions{
		noFsync: cfg.etcdNoFsync, quotaBytes: cfg.quotaBytes, compactionRetention: cfg.compactionRetention,
	})
	if err != nil {
		return nil, err
	}
	defer stopEtcd()
	// versitygw on disk, as a deployment has it.
	st, err := startStack(ctx, config{
		etcdEndpoints: []string{endpoint}, etcdPID: pid,
		bucket: "footprint", workDir: cfg.workDir, s3KeepAlive: true, keep: cfg.keep,
	})
	if err != nil {
		return nil, err
	}
	defer st.close()
	g, err := startGateway(ctx, st, "footprint", bin, st.s3Endpoint, "warn")
	if err != nil {
		return nil, err
	}
	defer g.stop()
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer etcd.Close()

	f := &footprinter{
		cfg:      cfg,
		base:     g.url + "/v1/objects/" + st.bucket + "/",
		http:     newHTTPClient(cfg.concurrency),
		etcd:     etcd,
		metrics:  &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}},
		endpoint: endpoint,
		body:     bytes.Repeat([]byte("footprint "), footprintBodyBytes/10+1)[:footprintBodyBytes],
	}
	f.nextToken.Store(footprintFirstToken)
	return f.run(ctx, stdout, stderr)
}

// run runs the writers for the configured duration, sampling etcd
// meanwhile, and prints a line every report interval and the summary.
func (f *footprinter) run(ctx context.Context, stdout, stderr io.Writer) (*footprintResult, error) {
	res := &footprintResult{Config: f.cfg}
	first, err := f.sample(ctx, 0)
	if err != nil {
		return nil, err
	}
	res.StartRevision = first.Revision
	res.Samples = append(res.Samples, first)

	f.start = time.Now()
	loadCtx, stopLoad := context.WithTimeout(ctx, f.cfg.duration)
	defer stopLoad()
	var writers sync.WaitGroup
	for w := range f.cfg.concurrency {
		writers.Add(1)
		go func() {
			defer writers.Done()
			f.write(ctx, loadCtx, w)
		}()
	}
	done := make(chan struct{})
	go func() {
		writers.Wait()
		close(done)
	}()

	sampleEvery := min(time.Second, f.cfg.duration/30)
	reportEvery := f.cfg.reportEvery
	ticker := time.NewTicker(sampleEvery)
	defer ticker.Stop()
	nextReport := reportEvery
	for running := true; running; {
		select {
		case <-ticker.C:
		case <-done:
			running = false
		case <-ctx.Done():
			return nil, fmt.Errorf("run stopped: %w", context.Cause(ctx))
		}
		at := time.Since(f.start)
		s, err := f.sample(ctx, at)
		if err != nil {
			res.SampleErrors++
			if res.FirstSampleError == "" {
				res.FirstSampleError = err.Error()
			}
			continue
		}
		res.Samples = append(res.Samples, s)
		if at >= nextReport && running {
			fmt.Fprintln(stdout, f.line(s))
			for nextReport <= at {
				nextReport += reportEvery
			}
		}
	}
	res.Elapsed = time.Since(f.start)
	res.Puts, res.DeletesExisting, res.DeletesAbsent = f.puts.Load(), f.deletesExisting.Load(), f.deletesAbsent.Load()
	res.StaleRefused, res.StaleAccepted, res.Unexpected = f.staleRefused.Load(), f.staleAccepted.Load(), f.unexpected.Load()
	res.Errors = f.errors
	res.CoveredAt = time.Duration(f.coveredAt.Load())
	res.BytesPerRevision = bytesPerRevision(res.Samples, res.StartRevision)
	res.LevelOff = judgeLevelOff(res.Samples, res.CoveredAt, f.cfg.compactionRetention, f.cfg.duration)
	if res.SampleErrors > 0 {
		fmt.Fprintf(stderr, "fencebench footprint: %d samples of etcd failed, the first: %s\n", res.SampleErrors, res.FirstSampleError)
	}
	fmt.Fprintln(stdout, res.summary())
	return res, nil
}

// line is the report of one sample.
func (f *footprinter) line(s etcdSample) string {
	alarm := "none"
	if s.NoSpace {
		alarm = "NOSPACE"
	}
	return fmt.Sprintf("footprint: t=%v db_size=%s in_use=%s revision=%d compacted_to=%d keys=%d writes=%d (%.0f/s) alarm=%s",
		s.At.Round(time.Second), fmtMiB(s.DBSize), fmtMiB(s.DBSizeInUse), s.Revision, s.CompactRevision, s.Keys,
		s.Writes, float64(s.Writes)/s.At.Seconds(), alarm)
}

// write is writer w: until loadCtx is done, it visits its objects in
// turn (every concurrency-th object of the set, from the w-th), one
// operation a visit. Requests use ctx, so that the last ones are
// answered rather than cut off when the load ends.
func (f *footprinter) write(ctx, loadCtx context.Context, w int) {
	var objects []footprintObject
	for i := w; i < f.cfg.objects; i += f.cfg.concurrency {
		objects = append(objects, footprintObject{key: fmt.Sprintf("obj-%07d", i)})
	}
	if len(objects) == 0 {
		return
	}
	rng := rand.New(rand.NewPCG(f.cfg.seed, uint64(w)))
	for i := 0; loadCtx.Err() == nil; i = (i + 1) % len(objects) {
		o := &objects[i]
		switch n := rng.IntN(100); {
		case o.mark == 0:
			f.put(ctx, o)
		case n < footprintStalePercent:
			// A token below the mark, by up to 1,000.
			stale := o.mark - 1 - api.Token(rng.IntN(int(min(o.mark-1, 1000))))
			f.stale(ctx, o, stale, n%2 == 0)
		case n < footprintStalePercent+footprintDeletePercent:
			f.delete(ctx, o)
		default:
			f.put(ctx, o)
		}
	}
}

// put writes o with a new token: 201 if o was absent, 200 if it was
// there.
func (f *footprinter) put(ctx context.Context, o *footprintObject) {
	token := api.Token(f.nextToken.Add(1))
	want := http.StatusCreated
	if o.exists {
		want = http.StatusOK
	}
	status, body, err := f.do(ctx, http.MethodPut, o.key, token)
	if err != nil || status != want {
		f.fail(o, http.MethodPut, token, want, status, body, err)
		return
	}
	f.puts.Add(1)
	f.marked(o, token)
	o.exists = true
}

// delete deletes o with a new token: 204, raising the mark only if o was
// there.
func (f *footprinter) delete(ctx context.Context, o *footprintObject) {
	token := api.Token(f.nextToken.Add(1))
	status, body, err := f.do(ctx, http.MethodDelete, o.key, token)
	if err != nil || status != http.StatusNoContent {
		f.fail(o, http.MethodDelete, token, http.StatusNoContent, status, body, err)
		return
	}
	if o.exists {
		f.deletesExisting.Add(1)
		f.marked(o, token)
		o.exists = false
	} else {
		f.deletesAbsent.Add(1)
	}
}

// stale writes (or, with del, deletes) o with a token below its mark:
// 409 stale-token, and nothing changes.
func (f *footprinter) stale(ctx context.Context, o *footprintObject, token api.Token, del bool) {
	method := http.MethodPut
	if del {
		method = http.MethodDelete
	}
	status, body, err := f.do(ctx, method, o.key, token)
	switch {
	case err == nil && status == http.StatusConflict && bytes.Contains(body, []byte("stale-token")):
		f.staleRefused.Add(1)
	case err == nil && status >= 200 && status < 300:
		f.staleAccepted.Add(1)
		f.keep(o, method, token, http.StatusConflict, status, body, nil)
	default:
		f.fail(o, method, token, http.StatusConflict, status, body, err)
	}
}

// marked records that token raised o's mark.
func (f *footprinter) marked(o *footprintObject, token api.Token) {
	if o.mark == 0 && f.covered.Add(1) == int64(f.cfg.objects) {
		f.coveredAt.Store(int64(time.Since(f.start)))
	}
	o.mark = token
}

// fail counts an unexpected answer and keeps the first few. After one, the
// object's state is unknown; its writer carries on as if it were
// unchanged, and the next answers on it may be unexpected too.
func (f *footprinter) fail(o *footprintObject, method string, token api.Token, want, status int, body []byte, err error) {
	f.unexpected.Add(1)
	f.keep(o, method, token, want, status, body, err)
}

// keep keeps the description of an answer that fails the run, if fewer
// than footprintMaxErrors are kept.
func (f *footprinter) keep(o *footprintObject, method string, token api.Token, want, status int, body []byte, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errors) >= footprintMaxErrors {
		return
	}
	what := fmt.Sprintf("status %d %q", status, truncate(string(body), 200))
	if err != nil {
		what = err.Error()
	}
	f.errors = append(f.errors, fmt.Sprintf("%s %s token %d (mark %d, exists %t) at %v: %s, want %d",
		method, o.key, token, o.mark, o.exists, time.Since(f.start).Round(time.Millisecond), what, want))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// do sends one fenced request and reads the answer whole (up to 64 KiB),
// so that the connection is reused.
func (f *footprinter) do(ctx context.Context, method, key string, token api.Token) (int, []byte, error) {
	var body io.Reader
	if method == http.MethodPut {
		body = bytes.NewReader(f.body)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.base+key, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set(api.HeaderFenceToken, token.String())
	resp, err := f.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, b, nil
}

// sample reads etcd's size, revision and alarms from its status, and its
// compaction revision and key count from its metrics.
func (f *footprinter) sample(ctx context.Context, at time.Duration) (etcdSample, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s := etcdSample{At: at, Writes: f.writes()}
	status, err := f.etcd.Status(ctx, f.endpoint)
	if err != nil {
		return s, fmt.Errorf("etcd status: %w", err)
	}
	s.DBSize, s.DBSizeInUse, s.Revision = status.DbSize, status.DbSizeInUse, status.Header.Revision
	alarms, err := f.etcd.AlarmList(ctx)
	if err != nil {
		return s, fmt.Errorf("etcd alarms: %w", err)
	}
	for _, a := range alarms.Alarms {
		if a.Alarm == etcdserverpb.AlarmType_NOSPACE {
			s.NoSpace = true
		}
	}
	gauges, err := etcdGauges(ctx, f.metrics, f.endpoint, "etcd_debugging_mvcc_compact_revision", "etcd_debugging_mvcc_keys_total", "etcd_mvcc_put_total")
	if err != nil {
		return s, err
	}
	s.CompactRevision, s.Keys, s.Puts = int64(gauges[0]), int64(gauges[1]), int64(gauges[2])
	return s, nil
}

func (f *footprinter) writes() int64 {
	return f.puts.Load() + f.deletesExisting.Load() + f.deletesAbsent.Load() + f.staleRefused.Load() + f.staleAccepted.Load() + f.unexpected.Load()
}

// etcdGauges reads metrics without labels from etcd's /metrics, in the
// order of names; a metric it does not find is an error.
func etcdGauges(ctx context.Context, client *http.Client, endpoint string, names ...string) ([]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("etcd metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("etcd metrics: %s", resp.Status)
	}
	values := make([]float64, len(names))
	found := make([]bool, len(names))
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		for i, n := range names {
			if name == n {
				v, err := strconv.ParseFloat(value, 64)
				if err != nil {
					return nil, fmt.Errorf("etcd metrics: %s %q: %w", name, value, err)
				}
				values[i], found[i] = v, true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("etcd metrics: %w", err)
	}
	for i, ok := range found {
		if !ok {
			return nil, fmt.Errorf("etcd metrics: no %s", names[i])
		}
	}
	return values, nil
}
