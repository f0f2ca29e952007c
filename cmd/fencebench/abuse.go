package main

// `fencebench abuse` runs bounded attacks, one after another, against one
// gateway on loopback, with authentication on, while a well-behaved client
// writes and reads its own small objects; after each attack it prints one
// line: what the attackers got, the well-behaved client's latency, and
// the gateway's resident memory, goroutines and log bytes.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"fencegate/api"
)

// abuseCommand is the subcommand that runs the attacks.
const abuseCommand = "abuse"

// The attacks, in the order they run. The session flood is last: the
// sessions it creates live for an hour, and would weigh on the others.
const (
	attackSlowReaders   = "slow-readers"
	attackStalledBodies = "stalled-bodies"
	attackTrickled      = "trickled-bodies"
	attackUnauthFlood   = "unauth-flood"
	attackReadyzFlood   = "readyz-flood"
	attackLockWaiters   = "lock-waiters"
	attackTicketFlood   = "ticket-flood"
	attackSessionFlood  = "session-flood"
)

var allAttacks = []string{attackSlowReaders, attackStalledBodies, attackTrickled, attackUnauthFlood, attackReadyzFlood, attackLockWaiters, attackTicketFlood, attackSessionFlood}

// wellBehavedLimit is the verdict's bound on the well-behaved client's
// 99th percentile latency during an attack.
const wellBehavedLimit = time.Second

type abuseConfig struct {
	attacks       []string
	duration      time.Duration
	timeout       time.Duration
	slowReaders   int
	stalledBodies int
	trickled      int
	floodConns    int
	readyzClients int
	lockWaiters   int
	ticketFlood   int
	bigBytes      int64
	fencegate     string
	workDir       string
	keep          bool
	// serveFlags are extra `fencegate serve` flags for the gateway.
	serveFlags []string
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, " ") }

func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

const abuseUsageText = `fencebench abuse runs bounded attacks against one fencegate (auth on) on
loopback, one after another, while a well-behaved client writes and reads
its own small objects, and prints one line per attack. The attackers and the
well-behaved client are two identities, each with its own API key, so that
per-identity limits count each one's own requests and sessions. It exits
non-zero if
the well-behaved client got an error, or its p99 latency reached 1s,
during any attack.

Usage: fencebench abuse [flags]

Flags:
`

func parseAbuseFlags(args []string, stderr io.Writer) (abuseConfig, error) {
	fs := flag.NewFlagSet("fencebench abuse", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, abuseUsageText)
		fs.PrintDefaults()
	}
	var (
		cfg     abuseConfig
		attacks string
		big     = byteSize(32 << 20)
	)
	fs.StringVar(&attacks, "attacks", strings.Join(allAttacks, ","), "comma-separated `attacks` to run")
	fs.DurationVar(&cfg.duration, "duration", 15*time.Second, "how long each attack lasts")
	fs.DurationVar(&cfg.timeout, "timeout", 15*time.Minute, "bound on the whole run")
	fs.IntVar(&cfg.slowReaders, "slow-readers", 260, "connections that GET the big object and never read the answer (4 KiB receive buffer)")
	fs.IntVar(&cfg.stalledBodies, "stalled-bodies", 260, "PUTs that announce 16 MiB and send nothing")
	fs.IntVar(&cfg.trickled, "trickled-bodies", 260, "PUTs that announce 400 KiB (a buffered body) and send 1 KiB every 200ms")
	fs.IntVar(&cfg.floodConns, "flood-conns", 8, "connections sending unauthenticated PUTs whose target is 60 KB of raw 0x80 bytes")
	fs.IntVar(&cfg.readyzClients, "readyz-clients", 128, "concurrent clients of GET /readyz")
	fs.IntVar(&cfg.lockWaiters, "lock-waiters", 2000, "sessions waiting (wait 60) for a held lock")
	fs.IntVar(&cfg.ticketFlood, "ticket-flooders", 32, "clients that ask, one request after another, for multipart tickets of 10,000 parts (about 15 MB to build each answer) and read 1 MiB of each")
	fs.Var(&big, "big-bytes", "size of the object the slow readers GET; more than the kernel lets a socket buffer (tcp_wmem) by 1 MiB at least")
	fs.StringVar(&cfg.fencegate, "fencegate", "", "the fencegate `binary` (default: next to this program, else bin/fencegate of the repository)")
	fs.StringVar(&cfg.workDir, "dir", "", "working `directory` for data and the gateway's log (default: a temporary one, removed at the end)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the working directory")
	fs.Var((*stringList)(&cfg.serveFlags), "serve-flag", "an extra `flag` for the gateway's fencegate serve, e.g. --serve-flag=--max-requests-per-client=64 (repeatable)")
	if err := fs.Parse(args); err != nil {
		return abuseConfig{}, err
	}
	if fs.NArg() > 0 {
		return abuseConfig{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg.bigBytes = int64(big)
	cfg.attacks = splitList(attacks)
	var errs []error
	for _, a := range cfg.attacks {
		if !slices.Contains(allAttacks, a) {
			errs = append(errs, fmt.Errorf("--attacks: unknown attack %q (want some of %s)", a, strings.Join(allAttacks, ",")))
		}
	}
	for _, n := range []int{cfg.slowReaders, cfg.stalledBodies, cfg.trickled, cfg.floodConns, cfg.readyzClients, cfg.lockWaiters, cfg.ticketFlood} {
		if n < 1 || n > 10000 {
			errs = append(errs, fmt.Errorf("attacker counts must be 1 to 10000, not %d", n))
		}
	}
	if cfg.duration <= 0 || cfg.timeout <= 0 || cfg.bigBytes < 1 {
		errs = append(errs, errors.New("--duration, --timeout and --big-bytes must be positive"))
	}
	if slices.Contains(cfg.attacks, attackSlowReaders) && cfg.bigBytes >= 1 {
		if least, err := minSlowReadBytes(); err == nil && cfg.bigBytes < least {
			errs = append(errs, fmt.Errorf("--big-bytes %d: the gateway's socket takes that much of an answer nobody reads, so a slow reader would hold no request; use at least %d", cfg.bigBytes, least))
		}
	}
	if len(errs) > 0 {
		return abuseConfig{}, errors.Join(errs...)
	}
	return cfg, nil
}

// abuseMain runs the subcommand and returns the exit status.
func abuseMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseAbuseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "fencebench abuse: %v\n", err)
		return 2
	}
	results, err := runAbuse(ctx, cfg, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "fencebench abuse: %v\n", err)
		return 1
	}
	failed := 0
	for _, r := range results {
		if !r.ok() {
			failed++
		}
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "fencebench abuse: %d of %d attacks failed the verdict (well-behaved errors, or p99 >= %v)\n", failed, len(results), wellBehavedLimit)
		return 1
	}
	return 0
}

// abuseResult is what one attack did.
type abuseResult struct {
	Attack     string
	Attackers  int
	Answers    map[string]int // status code, or what else the attackers got
	N          int            // the well-behaved client's requests
	Errors     int
	FirstError string
	P50, P99   float64 // milliseconds
	RSSKiB     int64   // at the end of the attack, its connections still open
	PeakKiB    int64   // during the attack
	Goroutines int     // the most seen during the attack
	LogBytes   int64   // written by the gateway from the attack's start until it settled
	// Settle is how long the gateway's goroutines took to come back near
	// where they were before the first attack, after the attackers left
	// (at most 15 seconds: Settled false).
	Settle  time.Duration
	Settled bool
	Exited  bool // the gateway died
}

func (r abuseResult) ok() bool {
	return !r.Exited && r.N > 0 && r.Errors == 0 && r.P99 < float64(wellBehavedLimit/time.Millisecond)
}

func (r abuseResult) String() string {
	keys := slices.Sorted(maps.Keys(r.Answers))
	var answers []string
	for _, k := range keys {
		answers = append(answers, fmt.Sprintf("%s:%d", k, r.Answers[k]))
	}
	verdict := "ok"
	if !r.ok() {
		verdict = "FAIL"
	}
	s := fmt.Sprintf("abuse: %s attackers=%d answers={%s} well_behaved p50=%s p99=%s n=%d errors=%d rss=%s peak_rss=%s goroutines=%d log_bytes=%s verdict=%s",
		r.Attack, r.Attackers, strings.Join(answers, ","), fmtMillis(r.P50), fmtMillis(r.P99), r.N, r.Errors,
		fmtKiB(r.RSSKiB), fmtKiB(r.PeakKiB), r.Goroutines, fmtBytes(r.LogBytes), verdict)
	if r.Settled {
		s += fmt.Sprintf(" settle=%.1fs", r.Settle.Seconds())
	} else {
		s += fmt.Sprintf(" settle=>%.0fs", r.Settle.Seconds())
	}
	if r.Exited {
		s += " (the gateway exited)"
	}
	if r.FirstError != "" {
		s += fmt.Sprintf(" first_error=%q", r.FirstError)
	}
	return s
}

func fmtMillis(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%.2fs", ms/1000)
	}
	return fmt.Sprintf("%.1fms", ms)
}

func fmtBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%dB", n)
	}
	return fmtKiB(n / 1024)
}

func fmtKiB(kib int64) string {
	if kib >= 1024 {
		return fmt.Sprintf("%.0fMiB", float64(kib)/1024)
	}
	return fmt.Sprintf("%dKiB", kib)
}

// abuser is the gateway under attack and what its clients share.
type abuser struct {
	cfg  abuseConfig
	g    *gatewayProcess
	addr string // host:port
	// key is the API key of the attackers (and of setup and clean-up);
	// wellKey the well-behaved client's, another identity's.
	key, wellKey string
	token        atomic.Int64
	// control is the client of setup, metrics and clean-up requests.
	control *http.Client
}

// runAbuse starts the stack and a gateway with auth, runs the attacks and
// prints a line for each. Its error is for a run that could not be made;
// the verdicts are in the results.
func runAbuse(ctx context.Context, cfg abuseConfig, stdout, stderr io.Writer) ([]abuseResult, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	bin, err := findFencegate(cfg.fencegate)
	if err != nil {
		return nil, err
	}
	if cfg.workDir == "" {
		dir, err := os.MkdirTemp("", "fencebench-abuse-")
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
	fmt.Fprintf(stderr, "fencebench abuse: %d attacks, %v each; data and logs in %s\n", len(cfg.attacks), cfg.duration, cfg.workDir)
	st, err := startStack(ctx, config{bucket: "dev", workDir: cfg.workDir, s3KeepAlive: true, s3Tmpfs: true, keep: cfg.keep})
	if err != nil {
		return nil, err
	}
	defer st.close()

	// Two identities with the same grants: per-identity limits (live
	// sessions, --max-requests-per-client) must count the attackers'
	// deeds against the attackers, not the well-behaved client.
	key, wellKey := newAPIKey(), newAPIKey()
	configPath := filepath.Join(cfg.workDir, "abuse.yaml")
	yaml := "auth:\n  identities:\n" + identityYAML("abuse-attackers", key) + identityYAML("abuse-well-behaved", wellKey)
	if err := os.WriteFile(configPath, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	g, err := startGateway(ctx, st, "abuse", bin, st.s3Endpoint, "info", append([]string{"--config", configPath}, cfg.serveFlags...)...)
	if err != nil {
		return nil, err
	}
	defer g.stop()
	a := &abuser{
		cfg: cfg, g: g, addr: strings.TrimPrefix(g.url, "http://"), key: key, wellKey: wellKey,
		control: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 32}},
	}
	if slices.Contains(cfg.attacks, attackSlowReaders) {
		status, body, err := a.do(ctx, a.control, http.MethodPut, "/v1/objects/dev/big", a.token.Add(1), newGenerator(cfg.bigBytes), cfg.bigBytes)
		if err != nil || status != http.StatusCreated && status != http.StatusOK {
			return nil, fmt.Errorf("put the big object: %d %s %v", status, body, err)
		}
	}
	baseline, err := a.goroutines(ctx)
	if err != nil {
		return nil, err
	}
	var results []abuseResult
	for _, name := range cfg.attacks {
		if ctx.Err() != nil {
			break
		}
		r, err := a.runAttack(ctx, name, baseline)
		if err != nil {
			return results, fmt.Errorf("%s: %w", name, err)
		}
		results = append(results, r)
		fmt.Fprintln(stdout, r)
		if r.Exited {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return results, fmt.Errorf("run stopped: %w", context.Cause(ctx))
	}
	return results, nil
}

// newAPIKey returns a random API key.
func newAPIKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// identityYAML is one entry of the config file's auth.identities: name,
// with every operation but admin on every resource, and key.
func identityYAML(name, key string) string {
	sum := sha256.Sum256([]byte(key))
	return "    - name: " + name + "\n      grants:\n        - {prefix: \"\", operations: [read, write, delete, lock]}\n" +
		"      api_keys: [\"sha256:" + hex.EncodeToString(sum[:]) + "\"]\n"
}

// answerTally counts what the attackers got.
type answerTally struct {
	mu sync.Mutex
	m  map[string]int
}

func (t *answerTally) add(what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]int{}
	}
	t.m[what]++
}

func (t *answerTally) status(code int) { t.add(strconv.Itoa(code)) }

// attack runs attackers until ctx ends, closes their connections, and
// returns. prepare (optional) runs before the measured window, clean
// after it.
type attack struct {
	attackers int
	prepare   func(ctx context.Context) error
	run       func(ctx context.Context, t *answerTally)
	clean     func(ctx context.Context)
}

func (a *abuser) attack(name string) attack {
	switch name {
	case attackSlowReaders:
		return attack{attackers: a.cfg.slowReaders, run: func(ctx context.Context, t *answerTally) {
			a.each(ctx, a.cfg.slowReaders, func(ctx context.Context, i int) { a.slowReader(ctx, t) })
		}}
	case attackStalledBodies:
		return attack{attackers: a.cfg.stalledBodies, run: func(ctx context.Context, t *answerTally) {
			a.each(ctx, a.cfg.stalledBodies, func(ctx context.Context, i int) {
				a.slowBody(ctx, t, fmt.Sprintf("/v1/objects/dev/stalled/%d", i), 16<<20, 0)
			})
		}}
	case attackTrickled:
		return attack{attackers: a.cfg.trickled, run: func(ctx context.Context, t *answerTally) {
			a.each(ctx, a.cfg.trickled, func(ctx context.Context, i int) {
				a.slowBody(ctx, t, fmt.Sprintf("/v1/objects/dev/trickled/%d", i), 400<<10, 1<<10)
			})
		}}
	case attackUnauthFlood:
		return attack{attackers: a.cfg.floodConns, run: func(ctx context.Context, t *answerTally) {
			a.each(ctx, a.cfg.floodConns, func(ctx context.Context, i int) { a.unauthFlood(ctx, t) })
		}}
	case attackReadyzFlood:
		return attack{attackers: a.cfg.readyzClients, run: func(ctx context.Context, t *answerTally) {
			client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: a.cfg.readyzClients}}
			defer client.CloseIdleConnections()
			a.each(ctx, a.cfg.readyzClients, func(ctx context.Context, i int) {
				for ctx.Err() == nil {
					status, _, err := a.do(ctx, client, http.MethodGet, "/readyz", 0, nil, 0)
					if err != nil {
						if !ended(ctx) {
							t.add("error")
						}
						continue
					}
					t.status(status)
				}
			})
		}}
	case attackLockWaiters:
		return a.lockWaiters()
	case attackTicketFlood:
		return attack{attackers: a.cfg.ticketFlood, run: func(ctx context.Context, t *answerTally) {
			client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: a.cfg.ticketFlood}}
			defer client.CloseIdleConnections()
			body := fmt.Sprintf(`{"size": %d, "part_size": %d}`, int64(api.MaxParts)*api.MinPartSize, int64(api.MinPartSize))
			a.each(ctx, a.cfg.ticketFlood, func(ctx context.Context, i int) {
				for ctx.Err() == nil {
					status, _, err := a.do(ctx, client, http.MethodPost, fmt.Sprintf("/v1/tickets/dev/ticket-flood/%d", i), a.token.Add(1), strings.NewReader(body), int64(len(body)))
					if err != nil {
						if !ended(ctx) {
							t.add("error")
						}
						continue
					}
					t.status(status)
				}
			})
		}}
	case attackSessionFlood:
		return attack{attackers: 1, run: func(ctx context.Context, t *answerTally) {
			client := &http.Client{Transport: &http.Transport{Proxy: nil}}
			defer client.CloseIdleConnections()
			for ctx.Err() == nil {
				status, _, err := a.do(ctx, client, http.MethodPost, "/v1/sessions", 0, strings.NewReader(`{"ttl": 3600}`), -1)
				if err != nil {
					if !ended(ctx) {
						t.add("error")
					}
					continue
				}
				t.status(status)
			}
		}}
	}
	panic("unknown attack " + name)
}

// runAttack runs one attack for the configured duration beside the
// well-behaved client, samples the gateway meanwhile, and waits (up to
// 15 seconds) for the gateway's goroutines to settle before it counts
// the log bytes.
func (a *abuser) runAttack(ctx context.Context, name string, baseline int) (abuseResult, error) {
	at := a.attack(name)
	if at.prepare != nil {
		if err := at.prepare(ctx); err != nil {
			return abuseResult{}, err
		}
	}
	logBefore := fileSize(a.g.logPath)
	_ = resetPeakRSS(a.g.pid)
	res := abuseResult{Attack: name, Attackers: at.attackers}
	actx, cancel := context.WithTimeout(ctx, a.cfg.duration)
	defer cancel()
	var t answerTally
	var wg sync.WaitGroup
	wg.Go(func() { at.run(actx, &t) })
	var latencies []time.Duration
	wg.Go(func() { latencies, res.Errors, res.FirstError = a.wellBehaved(actx) })
	// Sample until just before the end, while the attackers are still
	// connected.
	sampleCtx, stopSampling := context.WithTimeout(actx, a.cfg.duration*9/10)
	defer stopSampling()
	for sampleCtx.Err() == nil {
		if n, err := a.goroutines(sampleCtx); err == nil {
			res.Goroutines = max(res.Goroutines, n)
		}
		if rss, _, err := memoryKiB(a.g.pid); err == nil {
			res.RSSKiB = rss
		}
		sleepCtx(sampleCtx, 250*time.Millisecond)
	}
	wg.Wait()
	if rss, peak, err := memoryKiB(a.g.pid); err == nil {
		res.PeakKiB = max(peak, res.RSSKiB)
		if res.RSSKiB == 0 {
			res.RSSKiB = rss
		}
	}
	if at.clean != nil {
		at.clean(ctx)
	}
	select {
	case <-a.g.exited:
		res.Exited = true
	default:
	}
	settleStart := time.Now()
	for !res.Exited && time.Since(settleStart) < 15*time.Second && ctx.Err() == nil {
		if n, err := a.goroutines(ctx); err == nil && n <= baseline+baseline/5+20 {
			res.Settled = true
			break
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	res.Settle = time.Since(settleStart)
	sleepCtx(ctx, 300*time.Millisecond) // the log queue's last batch
	res.LogBytes = fileSize(a.g.logPath) - logBefore
	res.Answers = t.m
	slices.Sort(latencies)
	res.N = len(latencies)
	res.P50, res.P99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
	if math.IsNaN(res.P99) && len(latencies) > 0 { // too few for a 99th percentile: the worst
		res.P99 = float64(latencies[len(latencies)-1]) / float64(time.Millisecond)
	}
	if math.IsNaN(res.P50) {
		res.P50 = 0
	}
	return res, nil
}

// wellBehaved writes a 1 KiB object with a fresh, higher token and reads
// it back, in a loop over four objects of its own, until ctx ends, on its
// own keep-alive connection, with its own API key. Each request may take
// 10 seconds.
func (a *abuser) wellBehaved(ctx context.Context) (latencies []time.Duration, errs int, firstError string) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	body := bytes.Repeat([]byte("w"), 1<<10)
	fail := func(what string) {
		errs++
		if firstError == "" {
			firstError = what
		}
	}
	for i := 0; ctx.Err() == nil; i++ {
		path := fmt.Sprintf("/v1/objects/dev/well-behaved/%d", i%4)
		start := time.Now()
		status, answer, err := a.doAs(context.Background(), client, a.wellKey, http.MethodPut, path, a.token.Add(1), bytes.NewReader(body), int64(len(body)))
		latencies = append(latencies, time.Since(start))
		if err != nil || status != http.StatusCreated && status != http.StatusOK {
			fail(fmt.Sprintf("PUT %s: %d %.200s %v", path, status, answer, err))
			continue
		}
		start = time.Now()
		status, answer, err = a.doAs(context.Background(), client, a.wellKey, http.MethodGet, path, 0, nil, 0)
		latencies = append(latencies, time.Since(start))
		if err != nil || status != http.StatusOK || !bytes.Equal(answer, body) {
			fail(fmt.Sprintf("GET %s: %d %.200s %v", path, status, answer, err))
		}
	}
	return latencies, errs, firstError
}

// do sends one request with the attackers' API key (and the token, if
// not 0) and reads the answer whole (up to 1 MiB). size -1: unknown
// length.
func (a *abuser) do(ctx context.Context, client *http.Client, method, path string, token int64, body io.Reader, size int64) (int, []byte, error) {
	return a.doAs(ctx, client, a.key, method, path, token, body, size)
}

// doAs is do with the API key key.
func (a *abuser) doAs(ctx context.Context, client *http.Client, key, method, path string, token int64, body io.Reader, size int64) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+a.addr+path, body)
	if err != nil {
		return 0, nil, err
	}
	if size >= 0 && body != nil {
		req.ContentLength = size
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if token != 0 {
		req.Header.Set(api.HeaderFenceToken, strconv.FormatInt(token, 10))
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

// goroutines reads go_goroutines from the gateway's /metrics.
func (a *abuser) goroutines(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.g.url+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := a.control.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f), err
		}
	}
	return 0, errors.New("gateway metrics: no go_goroutines")
}

// ended says whether the attack's window is over: ctx is done, or its
// deadline (which is also the connections' deadline) has passed.
func ended(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(deadline)
}

// each runs n attackers until ctx ends, and waits for them.
func (a *abuser) each(ctx context.Context, n int, f func(ctx context.Context, i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(ctx, i) })
	}
	wg.Wait()
}

// dial connects to the gateway; the connection is closed when ctx ends.
func (a *abuser) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", a.addr)
	if err != nil {
		return nil, err
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	return conn, nil
}

// readStatus reads an answer's status line, and tallies its code, or
// "none" when none came before ctx ended, or "error".
func readStatus(ctx context.Context, br *bufio.Reader, t *answerTally) {
	line, err := br.ReadString('\n')
	if err != nil {
		if ended(ctx) || errors.Is(err, os.ErrDeadlineExceeded) {
			t.add("none")
		} else {
			t.add("error")
		}
		return
	}
	fields := strings.Fields(line)
	if len(fields) < 2 {
		t.add("error")
		return
	}
	t.add(fields[1])
}

// minSlowReadBytes is the least size of the object the slow readers GET
// for their requests to stay in flight: more than the gateway's socket
// takes of an answer nobody reads (its send buffer at the most the kernel
// grows it to, the reader's small window, the server's own buffers). A
// smaller answer is written whole at once and its request ends: the
// attack would hold nothing.
func minSlowReadBytes() (int64, error) {
	n, err := sendBufferMax()
	if err != nil {
		return 0, fmt.Errorf("the socket buffers' sizes: %w", err)
	}
	return n + 1<<20, nil
}

// slowReader GETs the big object over a connection with a 4 KiB receive
// buffer, reads the status line and nothing more, and holds the
// connection until ctx ends.
func (a *abuser) slowReader(ctx context.Context, t *answerTally) {
	conn, err := a.dial(ctx)
	if err != nil {
		t.add("dial-error")
		return
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	if _, err := io.WriteString(conn, "GET /v1/objects/dev/big HTTP/1.1\r\nHost: "+a.addr+"\r\nAuthorization: Bearer "+a.key+"\r\n\r\n"); err != nil {
		t.add("error")
		return
	}
	readStatus(ctx, bufio.NewReaderSize(conn, 512), t)
	<-ctx.Done()
}

// slowBody PUTs path announcing size bytes, and sends chunk bytes every
// 200ms (none if chunk is 0) until ctx ends, tallying the answer if one
// comes.
func (a *abuser) slowBody(ctx context.Context, t *answerTally, path string, size int64, chunk int) {
	conn, err := a.dial(ctx)
	if err != nil {
		t.add("dial-error")
		return
	}
	defer conn.Close()
	head := fmt.Sprintf("PUT %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n%s: %d\r\nContent-Length: %d\r\n\r\n",
		path, a.addr, a.key, api.HeaderFenceToken, a.token.Add(1), size)
	if _, err := io.WriteString(conn, head); err != nil {
		t.add("error")
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		readStatus(ctx, bufio.NewReaderSize(conn, 512), t)
	}()
	if chunk > 0 {
		b := bytes.Repeat([]byte("t"), chunk)
		for sent := int64(0); sent+int64(chunk) < size; sent += int64(chunk) {
			select {
			case <-ctx.Done():
			case <-done:
			case <-time.After(200 * time.Millisecond):
				if _, err := conn.Write(b); err == nil {
					continue
				}
			}
			break
		}
	}
	select {
	case <-ctx.Done():
	case <-done:
	}
	_ = conn.Close()
	<-done
}

// unauthFlood sends PUTs without credentials whose target is 60 KB of
// raw 0x80 bytes, each after the last one's answer, reconnecting when
// the gateway closes the connection, until ctx ends.
func (a *abuser) unauthFlood(ctx context.Context, t *answerTally) {
	req := []byte("PUT /v1/objects/dev/" + strings.Repeat("\x80", 60000) + " HTTP/1.1\r\nHost: " + a.addr + "\r\nContent-Length: 0\r\n\r\n")
	var conn net.Conn
	var br *bufio.Reader
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	for ctx.Err() == nil {
		if conn == nil {
			c, err := a.dial(ctx)
			if err != nil {
				if !ended(ctx) {
					t.add("dial-error")
				}
				return
			}
			conn, br = c, bufio.NewReader(c)
		}
		_, err := conn.Write(req)
		var resp *http.Response
		if err == nil {
			resp, err = http.ReadResponse(br, nil)
		}
		if err != nil {
			if !ended(ctx) {
				t.add("error")
			}
			_ = conn.Close()
			conn = nil
			continue
		}
		t.status(resp.StatusCode)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.Close {
			_ = conn.Close()
			conn = nil
		}
	}
}

// lockWaiters is the long-poll attack: one session holds a lock, and
// before the window each waiter asks for a session of its own; in the
// window every waiter that got one asks for the lock with wait 60, and is
// cut off when the window ends. A waiter whose session was refused (429:
// the attackers' identity has its most live sessions; or 503, still so
// after three retries: the identity's sessions changed too often while
// the gateway counted them) does not wait: it is counted as session-429
// or session-503. Afterwards every session is revoked.
func (a *abuser) lockWaiters() attack {
	const lock = "abuse-held"
	n := a.cfg.lockWaiters
	sessions := make([]string, n+1) // the holder's is the last; "": refused
	refusals := make([]int, n)      // the status of a waiter's refused session
	newSession := func(ctx context.Context) (session string, status int, err error) {
		for try := 0; ; try++ {
			var body []byte
			status, body, err = a.do(ctx, a.control, http.MethodPost, "/v1/sessions", 0, strings.NewReader(`{"ttl": 3600}`), -1)
			if err == nil && status == http.StatusServiceUnavailable && try < 3 {
				sleepCtx(ctx, time.Duration(try+1)*50*time.Millisecond)
				continue
			}
			var s struct{ Session string }
			if err == nil && status == http.StatusCreated {
				err = json.Unmarshal(body, &s)
			} else if err == nil && status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
				err = fmt.Errorf("%d %s", status, body)
			}
			return s.Session, status, err
		}
	}
	create := func(ctx context.Context) error {
		// The holder's session first, so that the waiters cannot take
		// the identity's last one.
		holder, status, err := newSession(ctx)
		if err == nil && status != http.StatusCreated {
			err = fmt.Errorf("%d", status)
		}
		if err != nil {
			return fmt.Errorf("create the holder's session: %w", err)
		}
		sessions[n] = holder
		errs := make([]error, n)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
					sessions[i], refusals[i], errs[i] = newSession(ctx)
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("create sessions: %w", err)
		}
		status, body, err := a.do(ctx, a.control, http.MethodPost, "/v1/locks/"+lock, 0, strings.NewReader(`{"session": "`+sessions[n]+`", "wait": 0}`), -1)
		if err != nil || status != http.StatusOK {
			return fmt.Errorf("hold the lock: %d %s %v", status, body, err)
		}
		return nil
	}
	return attack{
		attackers: n,
		prepare:   create,
		run: func(ctx context.Context, t *answerTally) {
			client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: n}}
			defer client.CloseIdleConnections()
			a.each(ctx, n, func(ctx context.Context, i int) {
				if sessions[i] == "" {
					t.add(fmt.Sprintf("session-%d", refusals[i]))
					return
				}
				status, _, err := a.do(ctx, client, http.MethodPost, "/v1/locks/"+lock, 0, strings.NewReader(`{"session": "`+sessions[i]+`", "wait": 60}`), -1)
				switch {
				case err != nil && ended(ctx):
					t.add("waiting")
				case err != nil:
					t.add("error")
				default:
					t.status(status)
				}
			})
		},
		clean: func(ctx context.Context) {
			var next atomic.Int64
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					for i := int(next.Add(1) - 1); i < len(sessions); i = int(next.Add(1) - 1) {
						if sessions[i] != "" {
							_, _, _ = a.do(ctx, a.control, http.MethodDelete, "/v1/sessions/"+sessions[i], 0, nil, 0)
						}
					}
				})
			}
			wg.Wait()
		},
	}
}

func fileSize(path string) int64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return info.Size()
}
