package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"fencegate/internal/devstack"
)

// stack is what a run writes to: etcd, the S3 server and its bucket, and
// the processes whose CPU is measured. Servers it started itself are
// stopped by close.
type stack struct {
	etcdEndpoints []string
	etcdPID       int // 0: unknown (external etcd without --etcd-pid)
	s3Endpoint    string
	s3PID         int
	accessKey     string
	secretKey     string
	bucket        string
	s3Data        string // where versitygw keeps objects: tmpfs, disk, a directory, or "" (not started here)
	workDir       string
	closers       []func() // in reverse order of start
}

// startStack starts what cfg does not name: an etcd in a child process
// (this program again, as `fencebench etcd-server`, so that its CPU is its
// own) and versitygw through devstack, both on loopback.
func startStack(ctx context.Context, cfg config) (*stack, error) {
	st := &stack{
		etcdEndpoints: cfg.etcdEndpoints,
		etcdPID:       cfg.etcdPID,
		s3Endpoint:    cfg.s3Endpoint,
		s3PID:         cfg.s3PID,
		accessKey:     cfg.s3AccessKey,
		secretKey:     cfg.s3SecretKey,
		bucket:        cfg.bucket,
		workDir:       cfg.workDir,
	}
	if len(st.etcdEndpoints) == 0 {
		endpoint, pid, stop, err := startEtcdChild(ctx, filepath.Join(cfg.workDir, "etcd"), etcdChildOptions{noFsync: cfg.etcdNoFsync})
		if err != nil {
			return nil, err
		}
		st.closers = append(st.closers, stop)
		st.etcdEndpoints, st.etcdPID = []string{endpoint}, pid
	}
	if st.s3Endpoint == "" {
		bin, err := devstack.FindVersityGW()
		if err != nil {
			st.close()
			return nil, err
		}
		if cfg.s3KeepAlive {
			if bin, err = keepAliveWrapper(bin, cfg.workDir); err != nil {
				st.close()
				return nil, err
			}
		}
		dir := cfg.s3Dir
		if dir == "" && cfg.s3Tmpfs {
			if tmp, err := os.MkdirTemp("/dev/shm", "fencebench-s3-"); err == nil {
				dir = tmp
				st.s3Data = "tmpfs"
				if !cfg.keep {
					st.closers = append(st.closers, func() { _ = os.RemoveAll(tmp) })
				}
			}
		}
		if dir == "" {
			dir = filepath.Join(cfg.workDir, "s3")
			st.s3Data = "disk"
		}
		if st.s3Data == "" {
			st.s3Data = dir
		}
		srv, err := devstack.StartVersityGW(ctx, devstack.S3Config{Binary: bin, Dir: dir})
		if err != nil {
			st.close()
			return nil, err
		}
		st.closers = append(st.closers, srv.Close)
		if err := srv.CreateBucket(ctx, st.bucket); err != nil {
			st.close()
			return nil, err
		}
		st.s3Endpoint, st.accessKey, st.secretKey = srv.Endpoint(), srv.AccessKey, srv.SecretKey
		st.s3PID = childPID("versitygw")
	}
	return st, nil
}

// keepAliveWrapper writes a script that runs versitygw with --keep-alive
// before the arguments devstack gives it, and returns its path.
// versitygw closes every connection after one response unless told
// otherwise, which would make every S3 request of every mode pay for a
// TCP connection; AWS S3 keeps connections alive. The script execs
// versitygw, which keeps the script's pid and takes its command name.
func keepAliveWrapper(bin, workDir string) (string, error) {
	dir := filepath.Join(workDir, "versitygw-keep-alive")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "versitygw")
	script := "#!/bin/sh\nexec " + shellQuote(bin) + " --keep-alive \"$@\"\n"
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		return "", err
	}
	return path, nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// close stops what startStack started.
func (st *stack) close() {
	for i := len(st.closers) - 1; i >= 0; i-- {
		st.closers[i]()
	}
	st.closers = nil
}

// etcdServerCommand is the hidden subcommand that runs etcd in a child
// process.
const etcdServerCommand = "etcd-server"

// etcdServerMain runs the etcd-server subcommand and exits when args
// (the program's, without its name) ask for it, and returns otherwise.
// startEtcdChild runs the program it is in that way: fencebench, or a
// test binary whose TestMain calls this.
func etcdServerMain(args []string) {
	if len(args) == 0 || args[0] != etcdServerCommand {
		return
	}
	if err := runEtcdServer(args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "fencebench %s: %v\n", etcdServerCommand, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runEtcdServer is `fencebench etcd-server --dir D`: an embedded
// single-member etcd on loopback (configured as `fencegate dev`
// configures its own, see devstack.EtcdConfig) that prints
// "endpoint <URL>" once it serves, and stops when its standard input
// closes (the parent closed it, or died).
func runEtcdServer(args []string) error {
	fs := flag.NewFlagSet(etcdServerCommand, flag.ContinueOnError)
	dir := fs.String("dir", "", "data `directory`")
	noFsync := fs.Bool("unsafe-no-fsync", false, "skip fsync")
	quota := fs.Int64("quota-backend-bytes", 0, "etcd's --quota-backend-bytes (0: etcd's default)")
	retention := fs.Duration("compaction-retention", 0, "periodic auto-compaction retention (0: devstack's default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	etcd, err := devstack.StartEtcd(context.Background(), devstack.EtcdConfig{
		Dir: *dir, UnsafeNoFsync: *noFsync, QuotaBackendBytes: *quota, CompactionRetention: *retention,
	})
	if err != nil {
		return err
	}
	defer etcd.Close()
	fmt.Printf("endpoint %s\n", etcd.Endpoints()[0])
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// etcdChildOptions configure the etcd of startEtcdChild; zero values
// are devstack's defaults.
type etcdChildOptions struct {
	noFsync             bool
	quotaBytes          int64         // 0: etcd's default (2 GiB)
	compactionRetention time.Duration // 0: devstack.DefaultCompactionRetention
}

// startEtcdChild runs `fencebench etcd-server` and returns its endpoint,
// its pid, and a function that stops it.
func startEtcdChild(ctx context.Context, dir string, opts etcdChildOptions) (endpoint string, pid int, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", 0, nil, fmt.Errorf("start etcd: %w", err)
	}
	cmd := exec.Command(self, etcdServerCommand, "--dir", dir, "--unsafe-no-fsync="+strconv.FormatBool(opts.noFsync),
		"--quota-backend-bytes="+strconv.FormatInt(opts.quotaBytes, 10), "--compaction-retention="+opts.compactionRetention.String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", 0, nil, fmt.Errorf("start etcd: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", 0, nil, fmt.Errorf("start etcd: %w", err)
	}
	var stderr tail
	cmd.Stderr = &stderr
	isolate(cmd)
	if err := cmd.Start(); err != nil {
		return "", 0, nil, fmt.Errorf("start etcd: %w", err)
	}
	exited := make(chan struct{})
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	stop = func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	select {
	case line := <-lines:
		endpoint, ok := strings.CutPrefix(strings.TrimSpace(line), "endpoint ")
		if !ok {
			stop()
			return "", 0, nil, fmt.Errorf("start etcd: child said %q; stderr:\n%s", line, stderr.String())
		}
		return endpoint, cmd.Process.Pid, stop, nil
	case <-ctx.Done():
		stop()
		return "", 0, nil, fmt.Errorf("start etcd: %w", ctx.Err())
	case <-time.After(60 * time.Second):
		stop()
		return "", 0, nil, fmt.Errorf("start etcd: not ready after 60s; stderr:\n%s", stderr.String())
	}
}

// gatewayProcess is a `fencegate serve` child process.
type gatewayProcess struct {
	name    string
	url     string // http://127.0.0.1:port
	pid     int
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
}

// startMeasuredGateway is startGateway for a gateway that make bench
// measures: with oneEvictionPass's flags after extra.
func startMeasuredGateway(ctx context.Context, st *stack, name, bin, s3Endpoint, logLevel string, extra ...string) (*gatewayProcess, error) {
	return startGateway(ctx, st, name, bin, s3Endpoint, logLevel, slices.Concat(extra, oneEvictionPass)...)
}

// oneEvictionPass are the flags of every gateway that make bench
// measures: its mark evictor makes the pass it makes on starting, over
// the few marks there are then, and no other in the run. Every minute one
// of the run's gateways would otherwise list every mark the run has
// written, tens of thousands, a page per etcd request, while the others
// each make two: etcd and gateway CPU that no cell's writes cause, in the
// windows it falls in, and etcd requests in the stale cells' count, which
// must be zero for the stale path alone. make soak-footprint and make
// abuse run their gateways with the default interval.
var oneEvictionPass = []string{"--mark-eviction-interval", "24h"}

// startGateway runs `bin serve` on a free loopback port, in front of the
// stack's etcd and of s3Endpoint (the stack's S3 server, or a proxy in
// front of it), logging to a file in the work directory, and waits until
// its /readyz answers 200. Settings come from flags and the credentials
// from the environment, with every other FENCEGATE_* variable removed, so
// that the gateway runs with its defaults whatever the caller's shell
// holds. extra are more flags of `fencegate serve`, such as --config.
func startGateway(ctx context.Context, st *stack, name, bin, s3Endpoint, logLevel string, extra ...string) (*gatewayProcess, error) {
	var lastErr error
	for range 3 { // the free port may be taken before the child binds it
		port, err := devstack.FreePort()
		if err != nil {
			return nil, err
		}
		g, err := launchGateway(ctx, st, name, bin, s3Endpoint, logLevel, port, extra)
		if err == nil {
			return g, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, lastErr
}

func launchGateway(ctx context.Context, st *stack, name, bin, s3Endpoint, logLevel string, port int, extra []string) (*gatewayProcess, error) {
	addr := "127.0.0.1:" + strconv.Itoa(port)
	logPath := filepath.Join(st.workDir, "gateway-"+name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	args := []string{"serve",
		"--listen", addr,
		"--etcd-endpoints", strings.Join(st.etcdEndpoints, ","),
		"--s3-endpoint", s3Endpoint,
		"--s3-path-style",
		"--log-level", logLevel,
	}
	cmd := exec.Command(bin, append(args, extra...)...)
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FENCEGATE_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "FENCEGATE_S3_ACCESS_KEY="+st.accessKey, "FENCEGATE_S3_SECRET_KEY="+st.secretKey)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	isolate(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start gateway %s: %w", name, err)
	}
	g := &gatewayProcess{name: name, url: "http://" + addr, pid: cmd.Process.Pid, cmd: cmd, exited: make(chan struct{}), logPath: logPath}
	go func() {
		_ = cmd.Wait()
		close(g.exited)
	}()
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(g.url + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return g, nil
			}
		}
		select {
		case <-g.exited:
			return nil, fmt.Errorf("gateway %s (%s) exited before it was ready:\n%s", name, bin, readTail(logPath))
		case <-ctx.Done():
			g.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			g.stop()
			return nil, fmt.Errorf("gateway %s not ready after 30s:\n%s", name, readTail(logPath))
		}
	}
}

// stop shuts the gateway down (SIGTERM, then SIGKILL after 10 seconds).
func (g *gatewayProcess) stop() {
	terminate(g.cmd)
	select {
	case <-g.exited:
	case <-time.After(10 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.exited
	}
}

// readTail returns the end of a log file, for error messages.
func readTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4<<10 {
		b = b[len(b)-4<<10:]
	}
	return string(b)
}

// tail keeps the last 16 KiB written to it.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - 16<<10; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

func (t *tail) String() string { return string(t.b) }

// countingProxy is a reverse proxy in front of the S3 server that counts
// the requests it forwards. Only the gateways of the stale phase use it:
// it proves that their refusals ask nothing of S3.
type countingProxy struct {
	server   *http.Server
	url      string
	requests atomic.Int64
}

func startCountingProxy(target string) (*countingProxy, error) {
	targetURL, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := listenLoopback()
	if err != nil {
		return nil, err
	}
	p := &countingProxy{url: "http://" + ln.Addr().String()}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(targetURL)
			r.Out.Host = r.In.Host // SigV4 signed the proxy's host
		},
		Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64},
	}
	p.server = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.requests.Add(1)
			rp.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = p.server.Serve(ln) }()
	return p, nil
}

func (p *countingProxy) close() { _ = p.server.Close() }

// etcdRequests returns how many gRPC requests etcd's server has received
// since it started: the sum of grpc_server_started_total in its /metrics.
// It counts every client's requests, so it bounds any one client's.
func etcdRequests(ctx context.Context, client *http.Client, endpoint string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("etcd metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("etcd metrics: %s", resp.Status)
	}
	var total float64
	found := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "grpc_server_started_total{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("etcd metrics: %q: %w", line, err)
		}
		total += v
		found = true
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("etcd metrics: %w", err)
	}
	if !found {
		return 0, errors.New("etcd metrics: no grpc_server_started_total")
	}
	return int64(total), nil
}
