// Command fencebench measures fencegate side by side with the ways of
// writing to S3 it replaces, in one run, against one etcd and one S3
// server:
//
//   - direct: conditional PUTs straight to S3, no fencing, with
//     fencegate's backends/s3 (the same signed request as the gateway's);
//   - direct-sdk: the same through aws-sdk-go-v2's PutObject operation;
//   - clientside: the client fences by itself (HEAD, etcd transaction,
//     conditional PUT, with fencegate's tokenstore and backends/s3);
//   - gateway: PUTs through `fencegate serve`, run as a child process;
//   - stale: PUTs through the gateway with a token it knows is stale;
//   - ticket: a ticket from the gateway, then the bytes straight to S3
//     on it (ticket.go);
//   - store-raise, store-raise-unbatched: fence raises alone through
//     tokenstore, with and without group commit, no S3 (raise.go).
//
// Accepted writes carry one token (a lock holder writing again), or, in
// the raise pattern, a new, larger token each (raise.go).
//
// Each is driven by closed-loop workers at several concurrencies, on
// distinct objects (a key per worker) or one hot object, with several body
// sizes. For each cell it reports throughput, latency percentiles, CPU
// seconds per 1,000 requests taken by each process (the gateway, etcd,
// versitygw, and this program), and the gateway's throughput as a
// fraction of direct and of client-side fencing. It ends with a 1 GiB
// upload through a fresh gateway process, measuring how much its resident
// memory grows, and a one-line summary.
//
// With no endpoints given it starts everything itself on loopback: etcd
// in a child process (this program again, `fencebench etcd-server`) and
// versitygw through internal/devstack, under a temporary directory that
// it removes. The gateway binary is bin/fencegate (make build).
//
// Usage:
//
//	fencebench [flags]      (fencebench -h lists them)
//	make bench              the short standard set
//	fencebench abuse [flags]
//	make abuse              bounded attacks on one gateway, with a
//	                        well-behaved client's latency during each (abuse.go)
//	fencebench footprint [flags]
//	make soak-footprint     10 minutes of writes against an etcd with a
//	                        64 MiB quota: its size must level off (footprint.go)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	etcdServerMain(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if len(os.Args) > 1 && os.Args[1] == abuseCommand {
		status := abuseMain(ctx, os.Args[2:], os.Stdout, os.Stderr)
		stop()
		os.Exit(status)
	}
	if len(os.Args) > 1 && os.Args[1] == footprintCommand {
		status := footprintMain(ctx, os.Args[2:], os.Stdout, os.Stderr)
		stop()
		os.Exit(status)
	}
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "fencebench: %v\n", err)
		os.Exit(2)
	}
	err = run(ctx, cfg, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fencebench: %v\n", err)
		os.Exit(1)
	}
}

// config is everything a run needs, from flags.
type config struct {
	set           string
	modes         []string
	concurrencies []int
	patterns      []string
	sizes         []int64
	duration      time.Duration
	warmup        time.Duration
	maxRequests   int64
	timeout       time.Duration
	uploadBytes   int64
	// largeUploadBytes is --large-upload-bytes (largeupload.go).
	largeUploadBytes int64
	// ticketLargeBytes is --ticket-large-bytes (ticket.go).
	ticketLargeBytes int64
	staleSummaryC    int
	// rounds is how many rounds each shape's cells run in (see
	// bench.runShape).
	rounds int
	// retryDisturbed is how many times a round of a cell runs again when
	// other processes took more than disturbedCores during its window.
	retryDisturbed int
	json           bool

	fencegate         string
	baselineFencegate string
	gatewayLogLevel   string
	staleClient       string

	etcdEndpoints []string
	etcdPID       int
	etcdNoFsync   bool
	s3KeepAlive   bool
	s3Tmpfs       bool
	s3Endpoint    string
	s3PID         int
	s3AccessKey   string
	s3SecretKey   string
	bucket        string
	s3Dir         string
	workDir       string
	keep          bool
}

const usageText = `fencebench measures fencegate against direct conditional PUTs to S3 and
against client-side fencing, side by side in one run, and ends with a
one-line summary.

Usage: fencebench [flags]

With no --etcd-endpoints and --s3-endpoint it starts etcd (a child process)
and versitygw (bin/versitygw, see make tools) on loopback, under a temporary
directory. The gateway is bin/fencegate (make build), run as a child
process with its default settings.

Flags:
`

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("fencebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	var (
		cfg                                  config
		modes, concurrencies, patterns, size string
		endpoints                            string
		upload                               = byteSize(1 << 30)
		largeUpload                          byteSize
		ticketLarge                          byteSize
	)
	fs.StringVar(&cfg.set, "set", "short", "standard `set` of cells: short (make bench, about 5 minutes) or full (every mode, concurrency, pattern and size)")
	fs.StringVar(&modes, "modes", "", "comma-separated `modes` to run (default: direct,direct-sdk,clientside,gateway,ticket,stale,store-raise,store-raise-unbatched,s3api,s3api-nethttp,gcs-direct,gcs-gateway (gcs.go), and baseline,stale-baseline with --baseline-fencegate)")
	fs.StringVar(&concurrencies, "concurrency", "", "comma-separated `list` of concurrencies; with --patterns and --sizes it replaces the set by their cross product (default of each: 1,8,64,256; distinct,hot,raise; 1KiB,64KiB,4MiB)")
	fs.StringVar(&patterns, "patterns", "", "comma-separated `list`: distinct (a key per worker), hot (one key), raise (a key per worker, a new, larger token each write;\nthe store-raise modes run only in it)")
	fs.StringVar(&size, "sizes", "", "comma-separated body `sizes`, such as 1KiB,64KiB,4MiB")
	fs.DurationVar(&cfg.duration, "duration", 3*time.Second, "measurement window of each cell, over all its rounds")
	fs.IntVar(&cfg.rounds, "rounds", 4, "rounds each shape runs in: every mode of the shape measures for its share of --duration, in turn\n(in order, then in reverse), so that drift and the order of measurement hit the modes alike")
	fs.DurationVar(&cfg.warmup, "warmup", 500*time.Millisecond, "warm-up of each cell, after every worker's first request")
	fs.Int64Var(&cfg.maxRequests, "max-requests", 500000, "end a cell's windows after this many requests, over all its rounds")
	fs.DurationVar(&cfg.timeout, "timeout", 30*time.Minute, "bound on the whole run")
	fs.Var(&upload, "upload-bytes", "size of the upload through a fresh gateway whose RSS growth is measured (0: none)")
	addLargeUploadFlag(fs, &largeUpload)
	addTicketLargeFlag(fs, &ticketLarge)
	fs.IntVar(&cfg.staleSummaryC, "stale-summary-concurrency", 4, "concurrency of the stale cell (distinct, 1KiB) that the summary line reports")
	fs.IntVar(&cfg.retryDisturbed, "retry-disturbed", 2, "run a round of a cell again up to this many times when other processes used more than 0.15 cores during its window\n(the report keeps the least disturbed run, and says so)")
	fs.BoolVar(&cfg.json, "json", false, "print the results as JSON instead of tables")
	fs.StringVar(&cfg.fencegate, "fencegate", "", "the fencegate `binary` to measure (default: next to this program, else bin/fencegate of the repository)")
	fs.StringVar(&cfg.baselineFencegate, "baseline-fencegate", "", "another fencegate `binary`, such as a build of the previous commit, measured in the same run as modes baseline and stale-baseline")
	fs.StringVar(&cfg.gatewayLogLevel, "gateway-log-level", "info", "the gateways' --log-level (info is fencegate's default: an access log line per request, to a file)")
	fs.StringVar(&cfg.staleClient, "stale-client", "raw", "HTTP `client` of the stale cells: raw (a minimal keep-alive HTTP/1.1 client, as in wrk) or nethttp (Go's net/http, as the other gateway cells)")
	fs.StringVar(&endpoints, "etcd-endpoints", "", "an etcd to use instead of starting one (comma-separated `URLs`)")
	fs.IntVar(&cfg.etcdPID, "etcd-pid", 0, "`pid` of the etcd given with --etcd-endpoints, for its CPU figures")
	fs.BoolVar(&cfg.etcdNoFsync, "etcd-unsafe-no-fsync", false, "start etcd without fsync (not what production does)")
	fs.BoolVar(&cfg.s3KeepAlive, "s3-keep-alive", true, "start versitygw with --keep-alive (it closes every connection after one answer otherwise; AWS S3 keeps them)")
	fs.StringVar(&cfg.s3Endpoint, "s3-endpoint", "", "an S3 server `URL` to use instead of starting versitygw (path-style)")
	fs.IntVar(&cfg.s3PID, "s3-pid", 0, "`pid` of the S3 server given with --s3-endpoint, for its CPU figures")
	fs.StringVar(&cfg.s3AccessKey, "s3-access-key", "", "access key `id` for --s3-endpoint (or $AWS_ACCESS_KEY_ID)")
	fs.StringVar(&cfg.bucket, "bucket", "bench", "bucket to write to (created if missing)")
	fs.BoolVar(&cfg.s3Tmpfs, "s3-tmpfs", true, "keep the objects of the versitygw it starts on tmpfs (/dev/shm), so that etcd's fsyncs do not wait\nfor them: on one ext4 file system, etcd's fsync would also flush versitygw's new files,\na coupling no deployment has (false: under --dir, on the same disk as etcd)")
	fs.StringVar(&cfg.s3Dir, "s3-dir", "", "`directory` for the objects of the versitygw it starts (default: see --s3-tmpfs)")
	fs.StringVar(&cfg.workDir, "dir", "", "working `directory` for data and gateway logs (default: a temporary one, removed at the end)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the working directory")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg.uploadBytes = int64(upload)
	cfg.largeUploadBytes = int64(largeUpload)
	cfg.ticketLargeBytes = int64(ticketLarge)
	cfg.etcdEndpoints = splitList(endpoints)
	if cfg.s3AccessKey == "" {
		cfg.s3AccessKey = os.Getenv("AWS_ACCESS_KEY_ID")
	}
	cfg.s3SecretKey = os.Getenv("AWS_SECRET_ACCESS_KEY")
	var errs []error
	if cfg.s3Endpoint != "" && (cfg.s3AccessKey == "" || cfg.s3SecretKey == "") {
		errs = append(errs, errors.New("--s3-endpoint needs --s3-access-key (or $AWS_ACCESS_KEY_ID) and $AWS_SECRET_ACCESS_KEY"))
	}
	if cfg.staleClient != "raw" && cfg.staleClient != "nethttp" {
		errs = append(errs, fmt.Errorf("--stale-client %q: want raw or nethttp", cfg.staleClient))
	}
	if cfg.set != "short" && cfg.set != "full" {
		errs = append(errs, fmt.Errorf("--set %q: want short or full", cfg.set))
	}
	cfg.modes = splitList(modes)
	if len(cfg.modes) == 0 {
		cfg.modes = []string{modeDirect, modeDirectSDK, modeClientSide, modeGateway, modeS3API, modeS3APINetHTTP, modeTicket, modeStale, modeStoreRaise, modeStoreRaiseUnbatched, modeGCSDirect, modeGCSGateway}
		if cfg.baselineFencegate != "" {
			cfg.modes = append(cfg.modes, modeBaseline, modeStaleBaseline)
		}
	}
	for _, m := range cfg.modes {
		switch m {
		case modeDirect, modeDirectSDK, modeClientSide, modeGateway, modeS3API, modeS3APINetHTTP, modeTicket, modeStale, modeStoreRaise, modeStoreRaiseUnbatched, modeGCSDirect, modeGCSGateway:
		case modeBaseline, modeStaleBaseline:
			if cfg.baselineFencegate == "" {
				errs = append(errs, fmt.Errorf("--modes %s needs --baseline-fencegate", m))
			}
		default:
			errs = append(errs, fmt.Errorf("--modes: unknown mode %q", m))
		}
	}
	for _, c := range splitList(concurrencies) {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 || n > 4096 {
			errs = append(errs, fmt.Errorf("--concurrency %q: want 1 to 4096", c))
		}
		cfg.concurrencies = append(cfg.concurrencies, n)
	}
	cfg.patterns = splitList(patterns)
	for _, p := range cfg.patterns {
		if p != patternDistinct && p != patternHot && p != patternRaise {
			errs = append(errs, fmt.Errorf("--patterns %q: want distinct, hot or raise", p))
		}
	}
	for _, s := range splitList(size) {
		var b byteSize
		if err := b.Set(s); err != nil || b < prefixBytes || b > 1<<30 {
			errs = append(errs, fmt.Errorf("--sizes %q: want 16B to 1GiB", s))
		}
		cfg.sizes = append(cfg.sizes, int64(b))
	}
	if cfg.rounds < 1 || cfg.rounds > 20 {
		errs = append(errs, fmt.Errorf("--rounds %d: want 1 to 20", cfg.rounds))
	}
	if cfg.duration <= 0 || cfg.warmup < 0 || cfg.retryDisturbed < 0 || cfg.maxRequests < 1 || cfg.timeout <= 0 || cfg.uploadBytes < 0 {
		errs = append(errs, errors.New("--duration, --max-requests and --timeout must be positive, --warmup, --retry-disturbed and --upload-bytes not negative"))
	}
	if cfg.ticketLargeBytes != 0 && (cfg.ticketLargeBytes < prefixBytes || cfg.ticketLargeBytes > 1<<30) {
		errs = append(errs, fmt.Errorf("--ticket-large-bytes %s: want 0, or 16B to 1GiB", byteSize(cfg.ticketLargeBytes)))
	}
	if len(errs) > 0 {
		return config{}, errors.Join(errs...)
	}
	return cfg, nil
}

// run plans the cells, starts the stack, runs every cell and the upload,
// and reports.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	bin, err := findFencegate(cfg.fencegate)
	if err != nil {
		return err
	}
	if cfg.workDir == "" {
		dir, err := os.MkdirTemp("", "fencebench-")
		if err != nil {
			return err
		}
		cfg.workDir = dir
		if !cfg.keep {
			defer os.RemoveAll(dir)
		}
	} else if err := os.MkdirAll(cfg.workDir, 0o700); err != nil {
		return err
	}
	cells := plan(cfg)
	progress := newProgress(stderr)
	var windows time.Duration
	for _, c := range cells {
		windows += cfg.window(c)
	}
	progress.note("fencebench: %d cells, %v of windows in all (%v a cell, more in some shapes) in %d rounds; data and logs in %s", len(cells), windows, cfg.duration, cfg.rounds, cfg.workDir)

	st, err := startStack(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.close()
	b, err := newBench(ctx, cfg, st, bin, progress)
	if err != nil {
		return err
	}
	defer b.close()

	rep := &report{
		Date:    time.Now().UTC().Format(time.RFC3339),
		Machine: machineInfo(),
		Config:  b.configSummary(),
	}
	for i := 0; i < len(cells) && ctx.Err() == nil; {
		n := shapeLen(cells[i:])
		results, err := b.runShape(ctx, cells[i:i+n], i, len(cells))
		if err != nil {
			return err
		}
		rep.Cells = append(rep.Cells, results...)
		i += n
	}
	if slices.Contains(cfg.modes, modeGateway) && ctx.Err() == nil {
		progress.cell = "events: subscribers' cost per write"
		if rep.Events, err = b.eventsCell(ctx); err != nil {
			return err
		}
	}
	if cfg.uploadBytes > 0 && ctx.Err() == nil {
		bins := []struct{ name, bin string }{{modeGateway, bin}}
		if cfg.baselineFencegate != "" {
			bins = append(bins, struct{ name, bin string }{modeBaseline, cfg.baselineFencegate})
		}
		for _, g := range bins {
			progress.cell = fmt.Sprintf("upload %s through a fresh %s", byteSize(cfg.uploadBytes), g.name)
			up, err := b.upload(ctx, g.name, g.bin, cfg.uploadBytes)
			if err != nil {
				return fmt.Errorf("upload through %s: %w", g.name, err)
			}
			rep.Uploads = append(rep.Uploads, up)
			progress.note("upload through %s: %s in %.1fs, RSS +%.1f MiB", g.name, byteSize(up.Bytes), up.Seconds, up.RSSGrowthMiB)
		}
	}
	if cfg.largeUploadBytes > 0 && ctx.Err() == nil {
		progress.cell = fmt.Sprintf("upload %s in parts through a fresh %s", byteSize(cfg.largeUploadBytes), modeGateway)
		up, err := b.largeUpload(ctx, bin, cfg.largeUploadBytes)
		if err != nil {
			return fmt.Errorf("large upload: %w", err)
		}
		rep.Uploads = append(rep.Uploads, up)
		progress.note("upload in parts: %s in %.1fs, RSS +%.1f MiB", byteSize(up.Bytes), up.Seconds, up.RSSGrowthMiB)
	}
	progress.clear()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("run stopped: %w", context.Cause(ctx))
	}
	rep.finish(cfg)
	if cfg.json {
		err = rep.writeJSON(stdout)
	} else {
		err = rep.writeText(stdout)
	}
	if err != nil {
		return err
	}
	return rep.failures()
}

// findFencegate returns the gateway binary: the flag's, else fencegate
// next to this program, else bin/fencegate of the repository around the
// working directory.
func findFencegate(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	var tried []string
	if exe, err := os.Executable(); err == nil {
		path := filepath.Join(filepath.Dir(exe), "fencegate")
		if isExecutable(path) {
			return path, nil
		}
		tried = append(tried, path)
	}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				path := filepath.Join(dir, "bin", "fencegate")
				if isExecutable(path) {
					return path, nil
				}
				tried = append(tried, path)
				break
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", fmt.Errorf("no fencegate binary (looked for %s): run make build, or pass --fencegate", strings.Join(tried, ", "))
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// byteSize is a flag.Value for sizes in bytes, such as 1024, 64KiB or
// 1GiB.
type byteSize int64

func (b *byteSize) Set(s string) error {
	number, factor := strings.TrimSpace(s), int64(1)
	for _, u := range []struct {
		suffix string
		factor int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if n, ok := strings.CutSuffix(number, u.suffix); ok {
			number, factor = n, u.factor
			break
		}
	}
	n, err := strconv.ParseInt(number, 10, 64)
	if err != nil || n < 0 || n > 1<<40/factor {
		return fmt.Errorf("want a size such as 1024, 64KiB or 1GiB")
	}
	*b = byteSize(n * factor)
	return nil
}

func (b byteSize) String() string {
	n := int64(b)
	for _, u := range []struct {
		suffix string
		factor int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.factor && n%u.factor == 0 {
			return strconv.FormatInt(n/u.factor, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// The two access patterns.
const (
	patternDistinct = "distinct" // a key per worker
	patternHot      = "hot"      // one key for all workers
	// patternRaise (raise.go) is distinct with a new token each write.
)

// cell is one measurement: a mode, a pattern, a body size, a concurrency.
type cell struct {
	mode        string
	pattern     string
	size        int64
	concurrency int
}

func (c cell) String() string {
	return fmt.Sprintf("%s %s %s c%d", c.mode, c.pattern, byteSize(c.size), c.concurrency)
}

func (c cell) stale() bool { return c.mode == modeStale || c.mode == modeStaleBaseline }

// plan lists the cells of a run, the modes of one shape (pattern, size,
// concurrency) next to each other: they run together, in rounds (see
// bench.runShape).
func plan(cfg config) []cell {
	type shape struct {
		pattern     string
		size        int64
		concurrency int
	}
	// store shapes are the store-raise modes': raises alone, no body.
	var accepted, stale, store []shape
	custom := len(cfg.concurrencies) > 0 || len(cfg.patterns) > 0 || len(cfg.sizes) > 0
	switch {
	case custom || cfg.set == "full":
		concurrencies := orDefault(cfg.concurrencies, []int{1, 8, 64, 256})
		patterns := orDefault(cfg.patterns, []string{patternDistinct, patternHot, patternRaise})
		sizes := orDefault(cfg.sizes, []int64{1 << 10, 64 << 10, 4 << 20})
		for _, s := range sizes {
			for _, p := range patterns {
				for _, c := range concurrencies {
					accepted = append(accepted, shape{p, s, c})
				}
			}
		}
		staleConcurrencies := concurrencies
		if !custom {
			staleConcurrencies = []int{1, 4, 8, 64, 256}
		}
		for _, p := range patterns {
			if p == patternRaise {
				for _, c := range concurrencies {
					store = append(store, shape{p, 0, c})
				}
				continue // a stale write raises nothing
			}
			for _, c := range staleConcurrencies {
				stale = append(stale, shape{p, sizes[0], c})
			}
		}
	default: // short
		accepted = []shape{
			{patternDistinct, 1 << 10, 1},
			{patternDistinct, 1 << 10, 64},
			{patternHot, 1 << 10, 64},
			{patternDistinct, 64 << 10, 8},
			{patternDistinct, 4 << 20, 8},
			{patternRaise, 1 << 10, 64},
		}
		stale = []shape{{patternDistinct, 1 << 10, 1}, {patternDistinct, 1 << 10, 4}, {patternDistinct, 1 << 10, 8}, {patternDistinct, 1 << 10, 64}}
		store = []shape{{patternRaise, 0, raiseCeilingConcurrency}}
	}
	var cells []cell
	for _, s := range accepted {
		for _, m := range cfg.modes {
			if m == modeDirect || m == modeDirectSDK || m == modeClientSide || m == modeGateway || m == modeBaseline ||
				(m == modeS3API || m == modeS3APINetHTTP) && s3APIShape(s.pattern, s.size, s.concurrency) ||
				m == modeTicket && (custom || cfg.set == "full" || ticketShortShape(s.pattern, s.size, s.concurrency)) {
				cells = append(cells, cell{m, s.pattern, s.size, s.concurrency})
			}
		}
	}
	for _, s := range stale {
		for _, m := range cfg.modes {
			if m == modeStale || m == modeStaleBaseline {
				cells = append(cells, cell{m, s.pattern, s.size, s.concurrency})
			}
		}
	}
	for _, s := range store {
		for _, m := range cfg.modes {
			if storeMode(m) {
				cells = append(cells, cell{m, s.pattern, s.size, s.concurrency})
			}
		}
	}
	cells = append(cells, ticketLargeCells(cfg, cells)...)
	return append(cells, gcsCells(cfg)...)
}

// shapeLen returns how many cells at the start of cells share the first
// one's shape: the same pattern, size and concurrency, and stale or not.
func shapeLen(cells []cell) int {
	n := 1
	for n < len(cells) {
		a, b := cells[0], cells[n]
		if a.pattern != b.pattern || a.size != b.size || a.concurrency != b.concurrency || a.stale() != b.stale() {
			break
		}
		n++
	}
	return n
}

func orDefault[T any](v, def []T) []T {
	if len(v) > 0 {
		return slices.Clone(v)
	}
	return def
}
