package robustness

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"fencegate/internal/devstack"
)

// Names the harness gives things.
const (
	// Bucket is the bucket, in S3, that every S3 history writes to.
	Bucket = "robustness"
	// GCSBucket is the bucket, in GCS (fake-gcs-server), that every GCS
	// history writes to: the gateways' config maps it to the gcs store.
	GCSBucket = "robustness-gcs"
	// EtcdPrefix is the gateways' --etcd-prefix.
	EtcdPrefix = "rb/"
	// HWMPrefix starts every high-water mark key in etcd.
	HWMPrefix = EtcdPrefix + "hwm/"
	// etcdRequestTimeout is the gateways' --etcd-request-timeout.
	etcdRequestTimeout = time.Second
	// readyTimeout bounds how long a process may take to be ready.
	readyTimeout = 45 * time.Second
	// maxPause bounds how long a pause-after-fence holds a write.
	maxPause = 3 * time.Second
)

// ClusterConfig configures a Cluster.
type ClusterConfig struct {
	// Dir holds the members' data, the objects and every log. Required.
	Dir string
	// Bin holds the built fencegate and etcdnode binaries (BuildBinaries).
	// Required.
	Bin string
	// Members and Gateways count the etcd members and the gateways. Zero
	// means 3 of each.
	Members, Gateways int
	// Hooks are extra FENCEGATE_UNSAFE_TEST_HOOKS items for every gateway,
	// such as "swap-order" or "unconditional-write". Every gateway always
	// gets pause-after-fence, pointed at its PauseController (unarmed, it
	// pauses nothing).
	Hooks []string
	// Logf logs the harness's steps. Nil means silence.
	Logf func(format string, args ...any)
	// Seed seeds the proxies' jitter.
	Seed uint64
	// TokenChecks is every gateway's --token-checks, such as "*=plausible".
	// Empty means none.
	TokenChecks string
	// MarkRetention is every gateway's --mark-retention, with
	// --mark-eviction-interval evictorInterval. Zero means the gateways'
	// defaults.
	MarkRetention time.Duration
}

// Cluster is the system under test, on 127.0.0.1: etcd members and
// gateways as child processes, each in its own process group, versitygw,
// and the fault proxies between them:
//
//	member <- peer proxy <- every other member   (one proxy per member, links told apart by X-Server-From)
//	gateway -> etcd link proxy -> member          (one per gateway and member)
//	gateway -> S3 link proxy -> S3 proxy -> versitygw (one per gateway; the S3 proxy records writes)
//	gateway -> GCS link proxy -> GCS proxy -> fake-gcs-server (likewise, for the bucket GCSBucket)
type Cluster struct {
	cfg      ClusterConfig
	Members  []*Member
	Gateways []*Gateway
	S3       *devstack.S3Server
	S3Proxy  *StoreProxy
	// GCS is fake-gcs-server, which holds GCSBucket; GCSProxy records the
	// writes to it.
	GCS      *devstack.GCSServer
	GCSProxy *StoreProxy
	// Partner is the partner API behind every gateway's partner route
	// PartnerRoute.
	Partner *PartnerServer
	// Client reaches every member directly, for the harness and the
	// workload's locks.
	Client *clientv3.Client
	// APIKey is the bearer key of the gateways' one identity
	// (writeGatewayConfig), which every REST request must send
	// (Cluster.Authorize); S3AccessKey and S3SecretKey are its S3 access
	// key, for the S3 API.
	APIKey, S3AccessKey, S3SecretKey string

	idMu      sync.Mutex
	memberIDs map[string]string // hex member id -> name
	// ports are the members' peer and client ports, reserved until Close.
	ports []*devstack.ReservedPort
}

// Member is one etcd member.
type Member struct {
	Name string
	// ID is the member's id, known once the cluster has started.
	ID uint64
	// PeerProxy carries every connection other members open to this one.
	PeerProxy *Proxy
	ClientURL string
	args      []string
	bin       string
	logPath   string
	mu        sync.Mutex
	cmd       *exec.Cmd
	exited    chan struct{}
	stopped   bool
	starts    int
}

// Gateway is one fencegate process.
type Gateway struct {
	Name string
	// URL is http://host:port of the gateway's REST API; S3URL of its S3
	// API (the door of package s3api), which signs in with S3AccessKey.
	URL, S3URL string
	// EtcdLinks are its connections to each member, in member order.
	EtcdLinks []*Proxy
	// S3Link is its connection to the S3 proxy, GCSLink to the GCS proxy.
	S3Link, GCSLink *Proxy
	// Pause is the controller of its pause-after-fence hook.
	Pause   *PauseController
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// unsafeHooksBuildTag compiles fencegate's unsafe test hooks in
// (cmd/fencegate/testhooks.go).
const unsafeHooksBuildTag = "fencegate_unsafe_hooks"

// Binaries are the executables the harness runs.
type Binaries struct {
	Fencegate, Etcdnode string
}

// BuildBinaries builds fencegate (the real binary) and etcdnode into dir
// with `go build`, without the race detector (the children are the
// system under test, not the test). fencegate gets the build tag that
// compiles in its unsafe test hooks (every gateway here has the pause
// hook); a normal build would refuse to start with them asked for.
func BuildBinaries(ctx context.Context, dir string) (Binaries, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return Binaries{}, fmt.Errorf("build: the go tool is not on PATH: %w", err)
	}
	bins := Binaries{Fencegate: filepath.Join(dir, "fencegate"), Etcdnode: filepath.Join(dir, "etcdnode")}
	for out, pkg := range map[string]string{bins.Fencegate: "fencegate/cmd/fencegate", bins.Etcdnode: "fencegate/internal/robustness/etcdnode"} {
		args := []string{"build", "-o", out, pkg}
		if pkg == "fencegate/cmd/fencegate" {
			args = []string{"build", "-tags", unsafeHooksBuildTag, "-o", out, pkg}
		}
		// No bound of its own: on a loaded machine a cold build can take
		// long, and the test's -timeout (ctx) bounds it.
		cmd := exec.CommandContext(ctx, goTool, args...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		output, err := cmd.CombinedOutput()
		if err != nil {
			return Binaries{}, fmt.Errorf("go build %s: %w\n%s", pkg, err, output)
		}
	}
	return bins, nil
}

// StartCluster starts versitygw, the members and the gateways, and waits
// until every gateway is ready. On error, everything started is stopped.
func StartCluster(ctx context.Context, cfg ClusterConfig, bins Binaries) (_ *Cluster, err error) {
	if cfg.Members == 0 {
		cfg.Members = 3
	}
	if cfg.Gateways == 0 {
		cfg.Gateways = 3
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	c := &Cluster{cfg: cfg, memberIDs: make(map[string]string),
		APIKey: rand.Text(), S3AccessKey: S3AccessKeyID, S3SecretKey: rand.Text()}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()

	c.S3, err = devstack.StartVersityGW(ctx, devstack.S3Config{Dir: c.s3Dir()})
	if err != nil {
		return nil, err
	}
	if err := c.S3.CreateBucket(ctx, Bucket); err != nil {
		return nil, err
	}
	var gatewayNames []string
	for i := range cfg.Gateways {
		gatewayNames = append(gatewayNames, fmt.Sprintf("gateway-%d", i+1))
	}
	c.S3Proxy, err = NewS3Proxy(c.S3.Endpoint(), gatewayNames, cfg.Seed)
	if err != nil {
		return nil, err
	}

	c.GCS, err = devstack.StartFakeGCS(ctx, devstack.GCSConfig{Dir: filepath.Join(cfg.Dir, "gcs")})
	if err != nil {
		return nil, err
	}
	if err := c.GCS.CreateBucket(ctx, GCSBucket); err != nil {
		return nil, err
	}
	c.GCSProxy, err = NewGCSProxy("http://"+c.GCS.Host(), gatewayNames, cfg.Seed+1)
	if err != nil {
		return nil, err
	}

	if c.Partner, err = NewPartnerServer(cfg.Seed); err != nil {
		return nil, err
	}

	if err := c.startMembers(ctx, bins.Etcdnode); err != nil {
		return nil, err
	}
	for i, name := range gatewayNames {
		if err := c.startGateway(ctx, bins.Fencegate, name, uint64(i)); err != nil {
			return nil, err
		}
	}
	cfg.Logf("cluster up: %d members, %d gateways, versitygw at %s", len(c.Members), len(c.Gateways), c.S3.Endpoint())
	return c, nil
}

// s3Dir is versitygw's posix root: each bucket is a directory in it.
func (c *Cluster) s3Dir() string { return filepath.Join(c.cfg.Dir, "s3") }

// BucketDir is the directory that holds Bucket's objects, one file per
// object (a key's "/" separates directories). A file placed there directly
// is an object that versitygw serves without an ETag: it keeps ETags in
// an extended attribute that only its own writes set.
func (c *Cluster) BucketDir() string { return filepath.Join(c.s3Dir(), Bucket) }

// S3AccessKeyID is the access key id of the gateways' identity on their
// S3 API.
const S3AccessKeyID = "RBROBUSTNESS"

// writeGatewayConfig writes gateway's --config file: the partner route
// PartnerRoute to c.Partner, with the resource accounts/{account}; the
// bucket GCSBucket in the gcs store at gcsEndpoint (its GCS link); the
// tickets' life, ticketExpiry (objects.ticket_expiry); and
// one identity, the suite's, with c.APIKey for the REST API and the S3
// access key c.S3AccessKey for the S3 API (whose secret is in a file next
// to the config). The S3 API needs its access keys in the auth config,
// which turns authentication on for the REST API too: so every request of
// the suite carries the key (Cluster.Authorize). The grants cover what the
// suite touches: objects in S3 and GCS, partner requests, and their marks.
func (c *Cluster) writeGatewayConfig(gateway, gcsEndpoint string) (string, error) {
	path := filepath.Join(c.cfg.Dir, gateway+".yaml")
	secretFile := gateway + ".s3.secret"
	keyHash := sha256.Sum256([]byte(c.APIKey))
	config := fmt.Sprintf(`# The robustness suite's gateways: flags give the rest.
partners:
  - name: %s
    upstream: %s
    methods: [POST]
    resource: accounts/{account}
    timeout: %s
    max_wait: %s
    idempotency_key: optional
    idempotency_ttl: 10m
    max_body_bytes: 4KiB
buckets:
  - name: %s
    store: gcs
    endpoint: %s
objects:
  ticket_expiry: %s
auth:
  identities:
    - name: robustness
      grants:
        - prefix: s3/
          operations: [read, write, delete]
        - prefix: gcs/
          operations: [read, write, delete]
        - prefix: partner/
          operations: [read, write]
      api_keys:
        - sha256:%s
      s3_keys:
        - access_key_id: %s
          secret_file: %s
`, PartnerRoute, c.Partner.URL(), partnerTimeout, partnerMaxWait, GCSBucket, gcsEndpoint, ticketExpiry,
		hex.EncodeToString(keyHash[:]), c.S3AccessKey, secretFile)
	if err := os.MkdirAll(c.cfg.Dir, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(c.cfg.Dir, secretFile), []byte(c.S3SecretKey+"\n"), 0o600); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, []byte(config), 0o600)
}

// Authorize adds the suite's bearer key to a REST request to a gateway.
func (c *Cluster) Authorize(req *http.Request) {
	req.Header.Set("Authorization", "Bearer "+c.APIKey)
}

// memberName returns the name of the member whose id is hex, or "".
func (c *Cluster) memberName(hex string) string {
	c.idMu.Lock()
	defer c.idMu.Unlock()
	return c.memberIDs[hex]
}

func (c *Cluster) startMembers(ctx context.Context, bin string) error {
	var initial []string
	// A member restarts (after Kill) on the ports it had: its peers reach
	// it through its peer proxy's target and the gateways through their
	// links' targets. So the ports stay reserved while the cluster lives,
	// down times included; the member listens on them with SO_REUSEPORT.
	ports, err := devstack.ReservePorts(2 * c.cfg.Members)
	if err != nil {
		return err
	}
	c.ports = ports
	for i := range c.cfg.Members {
		name := fmt.Sprintf("member-%d", i+1)
		peer, client := ports[2*i], ports[2*i+1]
		proxy, err := NewProxy(ProxyConfig{
			Name:     "peers->" + name,
			Target:   peer.Addr(),
			MemberOf: c.memberName,
			Seed:     c.cfg.Seed + uint64(i),
		})
		if err != nil {
			return err
		}
		dir := filepath.Join(c.cfg.Dir, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		m := &Member{
			Name:      name,
			PeerProxy: proxy,
			ClientURL: "http://" + client.Addr(),
			bin:       bin,
			logPath:   filepath.Join(dir, "etcd.log"),
			args: []string{
				"--name", name,
				"--data-dir", filepath.Join(dir, "data"),
				"--listen-peer-url", "http://" + peer.Addr(),
				"--advertise-peer-url", proxy.URL(),
				"--listen-client-url", "http://" + client.Addr(),
				"--heartbeat-interval", "50",
				"--election-timeout", "500",
				"--snapshot-count", "2000",
				"--log-file", filepath.Join(dir, "etcd.log"),
				"--socket-reuse-port",
			},
		}
		c.Members = append(c.Members, m)
		initial = append(initial, name+"="+proxy.URL())
	}
	for _, m := range c.Members {
		m.args = append(m.args, "--initial-cluster", strings.Join(initial, ","))
	}
	errs := make(chan error, len(c.Members))
	for _, m := range c.Members {
		go func() { errs <- m.start(ctx) }()
	}
	var all []error
	for range c.Members {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		return err
	}
	var endpoints []string
	for _, m := range c.Members {
		endpoints = append(endpoints, m.ClientURL)
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	c.Client = client
	listCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := client.MemberList(listCtx)
	if err != nil {
		return fmt.Errorf("member list: %w", err)
	}
	c.idMu.Lock()
	defer c.idMu.Unlock()
	for _, pm := range resp.Members {
		c.memberIDs[strconv.FormatUint(pm.ID, 16)] = pm.Name
		for _, m := range c.Members {
			if m.Name == pm.Name {
				m.ID = pm.ID
			}
		}
	}
	return nil
}

// start runs the member and waits for its ready line.
func (m *Member) start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cmd := exec.Command(m.bin, m.args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	logFile, err := os.OpenFile(m.logPath+".stderr", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", m.Name, err)
	}
	m.starts++
	m.cmd, m.exited, m.stopped = cmd, make(chan struct{}), false
	ready := make(chan struct{})
	go func() {
		scanner := bufio.NewScanner(stdout)
		signalled := false
		for scanner.Scan() {
			if !signalled && scanner.Text() == "etcdnode: ready" {
				close(ready)
				signalled = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	exited := m.exited
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case <-ready:
		return nil
	case <-exited:
		return fmt.Errorf("%s exited before it was ready (%v); see %s%s", m.Name, cmd.ProcessState, m.logPath, m.logTails())
	case <-timer.C:
		return fmt.Errorf("%s not ready after %v; see %s%s", m.Name, readyTimeout, m.logPath, m.logTails())
	case <-ctx.Done():
		return ctx.Err()
	}
}

// logTails returns the last lines of the member's log and stderr, for an
// error: the test's directory, with the files, is gone once it fails.
func (m *Member) logTails() string {
	const maxLines = 8
	var b strings.Builder
	for _, path := range []string{m.logPath, m.logPath + ".stderr"} {
		data, err := os.ReadFile(path)
		if err != nil || len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		lines = lines[max(0, len(lines)-maxLines):]
		fmt.Fprintf(&b, "\n%s ends:\n\t%s", filepath.Base(path), strings.Join(lines, "\n\t"))
	}
	return b.String()
}

// Running reports whether the member's process is alive (stopped or not).
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// Stopped reports whether the member is paused with SIGSTOP.
func (m *Member) Stopped() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopped
}

// Kill sends SIGKILL to the member's process group and waits for it to
// exit: a crash. Its data directory stays, for Restart.
func (m *Member) Kill() {
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.stopped = false
	m.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
	}
}

// Restart starts a member that is not running, on its data directory.
func (m *Member) Restart(ctx context.Context) error {
	if m.Running() {
		return nil
	}
	return m.start(ctx)
}

// Stop pauses the member with SIGSTOP.
func (m *Member) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil && m.cmd.Process != nil && !m.stopped {
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGSTOP)
		m.stopped = true
	}
}

// Continue resumes a member paused with Stop.
func (m *Member) Continue() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil && m.cmd.Process != nil && m.stopped {
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGCONT)
		m.stopped = false
	}
}

// Starts returns how many times the member's process was started.
func (m *Member) Starts() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.starts
}

func (c *Cluster) startGateway(ctx context.Context, bin, name string, index uint64) error {
	g := &Gateway{Name: name, logPath: filepath.Join(c.cfg.Dir, name+".log")}
	c.Gateways = append(c.Gateways, g) // closed by Close, whatever happens below
	var endpoints []string
	for j, m := range c.Members {
		proxy, err := NewProxy(ProxyConfig{
			Name:   name + "->" + m.Name,
			Target: strings.TrimPrefix(m.ClientURL, "http://"),
			Source: name,
			Seed:   c.cfg.Seed + 100*index + uint64(j),
		})
		if err != nil {
			return err
		}
		g.EtcdLinks = append(g.EtcdLinks, proxy)
		endpoints = append(endpoints, proxy.URL())
	}
	var err error
	g.S3Link, err = NewProxy(ProxyConfig{Name: name + "->s3", Target: c.S3Proxy.Addr(name), Source: name, Seed: c.cfg.Seed + 100*index + 99})
	if err != nil {
		return err
	}
	g.GCSLink, err = NewProxy(ProxyConfig{Name: name + "->gcs", Target: c.GCSProxy.Addr(name), Source: name, Seed: c.cfg.Seed + 100*index + 98})
	if err != nil {
		return err
	}
	configFile, err := c.writeGatewayConfig(name, g.GCSLink.URL()+"/storage/v1/")
	if err != nil {
		return err
	}
	g.Pause, err = NewPauseController(maxPause)
	if err != nil {
		return err
	}
	hooks := append([]string{"pause-after-fence=" + g.Pause.Addr()}, c.cfg.Hooks...)
	for attempt := 1; ; attempt++ {
		ports, err := devstack.FreePorts(2)
		if err != nil {
			return err
		}
		port, s3Port := ports[0], ports[1]
		g.URL = fmt.Sprintf("http://127.0.0.1:%d", port)
		g.S3URL = fmt.Sprintf("http://127.0.0.1:%d", s3Port)
		args := []string{"serve",
			"--config", configFile,
			"--listen", fmt.Sprintf("127.0.0.1:%d", port),
			"--s3-listen", fmt.Sprintf("127.0.0.1:%d", s3Port),
			"--etcd-endpoints", strings.Join(endpoints, ","),
			"--etcd-prefix", EtcdPrefix,
			"--etcd-request-timeout", etcdRequestTimeout.String(),
			"--etcd-dial-timeout", "2s",
			"--s3-endpoint", g.S3Link.URL(),
			"--s3-path-style",
			"--s3-access-key", c.S3.AccessKey,
			"--s3-secret-key", c.S3.SecretKey,
			"--log-level", "warn",
			"--shutdown-timeout", "2s",
		}
		if c.cfg.TokenChecks != "" {
			args = append(args, "--token-checks", c.cfg.TokenChecks)
		}
		if c.cfg.MarkRetention != 0 {
			args = append(args, "--mark-retention", c.cfg.MarkRetention.String(), "--mark-eviction-interval", evictorInterval.String())
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(filteredEnv(), "FENCEGATE_UNSAFE_TEST_HOOKS="+strings.Join(hooks, ","))
		logFile, err := os.OpenFile(g.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			logFile.Close()
			return fmt.Errorf("start %s: %w", name, err)
		}
		g.cmd, g.exited = cmd, make(chan struct{})
		exited := g.exited
		go func() {
			_ = cmd.Wait()
			logFile.Close()
			close(exited)
		}()
		err = g.waitReady(ctx, readyTimeout)
		if err == nil {
			return nil
		}
		g.kill()
		if attempt == 3 || ctx.Err() != nil {
			return err
		}
	}
}

// filteredEnv is this process's environment without FENCEGATE_ variables,
// which would set the gateway's flags behind the harness's back.
func filteredEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FENCEGATE_") {
			env = append(env, kv)
		}
	}
	return env
}

// waitReady polls /readyz until it answers 200.
func (g *Gateway) waitReady(ctx context.Context, bound time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(bound)
	last := "no answer"
	for time.Now().Before(deadline) {
		select {
		case <-g.exited:
			return fmt.Errorf("%s exited; see %s", g.Name, g.logPath)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.URL+"/readyz", nil)
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status + " " + string(body)
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %v (last: %s); see %s", g.Name, bound, last, g.logPath)
}

// kill stops the gateway's process group.
func (g *Gateway) kill() {
	if g.cmd == nil || g.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-g.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-g.exited:
		return
	case <-time.After(3 * time.Second):
	}
	_ = syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
	_ = g.cmd.Process.Kill()
	<-g.exited
}

// Leader returns the member that the running members say leads, or an
// error if none says so within the timeout.
func (c *Cluster) Leader(ctx context.Context, timeout time.Duration) (*Member, error) {
	deadline := time.Now().Add(timeout)
	for {
		for _, m := range c.Members {
			if !m.Running() || m.Stopped() {
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			status, err := c.Client.Status(sctx, m.ClientURL)
			cancel()
			if err != nil || status.Leader == 0 {
				continue
			}
			for _, l := range c.Members {
				if l.ID == status.Leader && l.Running() && !l.Stopped() {
					return l, nil
				}
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("no etcd leader within %v", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Followers returns the running members other than leader.
func (c *Cluster) Followers(leader *Member) []*Member {
	var out []*Member
	for _, m := range c.Members {
		if m != leader && m.Running() && !m.Stopped() {
			out = append(out, m)
		}
	}
	return out
}

// Isolate cuts m off from every other member: its own peer proxy swallows
// everything, and the others' swallow what comes from m.
func (c *Cluster) Isolate(m *Member) {
	for _, other := range c.Members {
		if other == m {
			other.PeerProxy.SetFault(LinkFault{BlackholeTx: true, BlackholeRx: true})
		} else {
			other.PeerProxy.SetFault(LinkFault{BlackholeTx: true, BlackholeRx: true, From: []string{m.Name}})
		}
	}
}

// Proxies returns every fault proxy.
func (c *Cluster) Proxies() []*Proxy {
	var out []*Proxy
	for _, m := range c.Members {
		out = append(out, m.PeerProxy)
	}
	for _, g := range c.Gateways {
		out = append(out, g.EtcdLinks...)
		if g.S3Link != nil {
			out = append(out, g.S3Link)
		}
		if g.GCSLink != nil {
			out = append(out, g.GCSLink)
		}
	}
	return out
}

// Heal removes every fault: proxies forward again, the S3 proxy stops
// injecting, held writes go on, paused members continue and crashed ones
// restart. Then it waits until etcd has a leader and answers linearizable
// reads through every member, and every gateway is ready.
func (c *Cluster) Heal(ctx context.Context) error {
	for _, p := range c.Proxies() {
		p.Heal()
	}
	c.SetStoreFault(S3Fault{})
	for _, g := range c.Gateways {
		g.Pause.ReleaseAll()
	}
	var errs []error
	for _, m := range c.Members {
		m.Continue()
		if err := m.Restart(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.WaitHealthy(ctx, readyTimeout)
}

// WaitHealthy waits until every member serves linearizable reads and
// every gateway is ready.
func (c *Cluster) WaitHealthy(ctx context.Context, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for _, m := range c.Members {
		for {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			status, err := c.Client.Status(rctx, m.ClientURL)
			if err == nil && status.Leader != 0 {
				_, err = c.Client.Get(rctx, EtcdPrefix+"health")
			} else if err == nil {
				err = errors.New("no leader")
			}
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("etcd %s not healthy after %v: %w", m.Name, bound, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, g := range c.Gateways {
		if err := g.waitReady(ctx, time.Until(deadline)); err != nil {
			return err
		}
	}
	return nil
}

// Close stops everything the cluster started.
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for _, g := range c.Gateways {
		wg.Go(g.kill)
	}
	wg.Wait()
	for _, g := range c.Gateways {
		if g.Pause != nil {
			g.Pause.Close()
		}
	}
	if c.Client != nil {
		_ = c.Client.Close()
	}
	for _, m := range c.Members {
		wg.Go(m.Kill)
	}
	wg.Wait()
	for _, p := range c.ports {
		p.Close()
	}
	for _, p := range c.Proxies() {
		p.Close()
	}
	if c.S3Proxy != nil {
		c.S3Proxy.Close()
	}
	if c.GCSProxy != nil {
		c.GCSProxy.Close()
	}
	if c.Partner != nil {
		c.Partner.Close()
	}
	if c.S3 != nil {
		c.S3.Close()
	}
	if c.GCS != nil {
		c.GCS.Close()
	}
}

// SetStoreFault puts f in force on both stores' proxies.
func (c *Cluster) SetStoreFault(f S3Fault) {
	c.S3Proxy.SetFault(f)
	c.GCSProxy.SetFault(f)
}
