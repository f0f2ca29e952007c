package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap/zapcore"

	"fencegate/backends/s3"
	"fencegate/gateway"
	"fencegate/internal/devstack"
	"fencegate/tokenstore"
)

// serveConfig is everything `fencegate serve` needs, from flags and
// environment.
type serveConfig struct {
	listen  string
	etcd    etcdConfig
	s3      s3.Config
	gateway limits
	http    httpConfig
	log     logConfig
	tracing tracingConfig
	// tokenChecks are the token checks per bucket or partner route (--token-checks).
	tokenChecks tokenChecks
	// features are the config file's partner routes and auth.
	features features
}

// etcdConfig says how to reach etcd and where fencegate's keys live.
type etcdConfig struct {
	endpoints      []string
	prefix         string
	username       string
	password       string
	tls            *tls.Config // nil: plain TCP, or TLS with system roots for https:// endpoints
	dialTimeout    time.Duration
	requestTimeout time.Duration
}

// limits are the gateway's body, header and transfer-rate limits, those
// of the lock API, and whether deletes of absent objects leave marks in
// etcd. For the lock API's, 0 means no limit.
type limits struct {
	bufferBytes       int64
	bufferBudgetBytes int64
	maxBodyBytes      int64
	maxHeaderBytes    int
	// transferChunkTimeout is gateway.Config.TransferChunkTimeout.
	transferChunkTimeout time.Duration
	// maxRequestsPerClient is gateway.Config.MaxRequestsPerClient (0: no
	// limit).
	maxRequestsPerClient int

	maxSessionsPerIdentity int // tokenstore.Config.MaxSessionsPerIdentity
	maxLocksPerSession     int // tokenstore.Config.MaxLocksPerSession
	maxLockWaiters         int // gateway.Config.MaxLockWaiters

	tombstonesForAbsent bool // gateway.Config.TombstonesForAbsent
}

// defaultLimits are the limits' defaults: an 8 MiB replay buffer, 256 MiB
// of buffered bodies for all requests together, S3's 5 GiB limit for a
// single PUT, 64 KiB of headers, object bodies moving at least 64 KiB
// every 10 seconds, 128 object requests in flight per client (half the
// S3 pool's default 256 connections, so that no one client can hold them
// all), and the lock API's packages' defaults.
func defaultLimits() limits {
	return limits{bufferBytes: 8 << 20, bufferBudgetBytes: 256 << 20, maxBodyBytes: 5 << 30, maxHeaderBytes: 64 << 10,
		transferChunkTimeout:   10 * time.Second,
		maxRequestsPerClient:   128,
		maxSessionsPerIdentity: tokenstore.DefaultMaxSessionsPerIdentity,
		maxLocksPerSession:     tokenstore.DefaultMaxLocksPerSession,
		maxLockWaiters:         gateway.DefaultMaxLockWaiters}
}

// limitFlags are the values of the limits' flags.
type limitFlags struct {
	buffer, bufferBudget, maxBody, maxHeader byteSize
	transferChunk                            time.Duration
	perClient                                int
	maxSessions, maxLocks, maxLockWaiters    int
	tombstonesForAbsent                      bool
}

// addLimitFlags adds the limits' flags, with their defaults, to fs.
func addLimitFlags(fs *flag.FlagSet) *limitFlags {
	d := defaultLimits()
	l := &limitFlags{buffer: byteSize(d.bufferBytes), bufferBudget: byteSize(d.bufferBudgetBytes), maxBody: byteSize(d.maxBodyBytes), maxHeader: byteSize(d.maxHeaderBytes)}
	fs.Var(&l.buffer, "buffer-bytes", "largest body held in memory (`bytes`, such as 8MiB), so that a write that lost a race\ncan be retried; larger bodies stream, and a lost race on them is a retryable 409")
	fs.Var(&l.bufferBudget, "buffer-budget-bytes", "most memory that the bodies held in memory (see --buffer-bytes) take, all requests'\ntogether (`bytes`); a body that finds it in use is refused with a retryable 503 gateway-busy")
	fs.Var(&l.maxBody, "max-body-bytes", "largest request body accepted (`bytes`; 413 beyond)")
	fs.Var(&l.maxHeader, "max-header-bytes", "largest request header block accepted (`bytes`; 431 beyond)")
	fs.DurationVar(&l.transferChunk, "transfer-chunk-timeout", d.transferChunkTimeout, "minimum rate of object bodies to and from clients: each 64 KiB must move within this\n`duration`, else the client is cut off and its S3 request ended")
	fs.IntVar(&l.perClient, "max-requests-per-client", d.maxRequestsPerClient, "most object requests one client (its identity; its address with auth off) may have\nin flight (429 beyond; 0: no limit)")
	fs.IntVar(&l.maxSessions, "max-sessions-per-identity", d.maxSessionsPerIdentity, "most live sessions of one identity, across every gateway on the etcd cluster\n(`n`; 429 too-many-sessions beyond; 0: no limit)")
	fs.IntVar(&l.maxLocks, "max-locks-per-session", d.maxLocksPerSession, "most locks one session holds plus queues it waits in\n(`n`; 429 too-many-locks beyond; 0: no limit)")
	fs.IntVar(&l.maxLockWaiters, "max-lock-waiters", d.maxLockWaiters, "most lock requests with a wait above 0 that this gateway serves at once\n(`n`; 503 too-many-waiters beyond; 0: no limit)")
	fs.BoolVar(&l.tombstonesForAbsent, "tombstones-for-absent", false, "a DELETE of an object that is not there raises its high-water mark, a tombstone kept\nin etcd for ever (default: it only checks the token, and leaves no mark)")
	return l
}

func (l *limitFlags) limits() limits {
	return limits{bufferBytes: int64(l.buffer), bufferBudgetBytes: int64(l.bufferBudget), maxBodyBytes: int64(l.maxBody), maxHeaderBytes: int(l.maxHeader),
		transferChunkTimeout: l.transferChunk, maxRequestsPerClient: l.perClient,
		maxSessionsPerIdentity: l.maxSessions, maxLocksPerSession: l.maxLocks, maxLockWaiters: l.maxLockWaiters,
		tombstonesForAbsent: l.tombstonesForAbsent}
}

// noLimitIfZero maps a flag's 0 (no limit) to the packages' negative.
func noLimitIfZero(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

const serveDescription = `
Serve fencegate's HTTP API: fenced writes to S3, with high-water marks of
fencing tokens kept in etcd. This is the default command.

Other commands:
  fencegate dev       run a local etcd and S3 server and a gateway in front of them
  fencegate version   print build information

S3 credentials: with --s3-access-key and --s3-secret-key empty, the AWS SDK's
default chain is used (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, shared
config files, instance roles).

On SIGTERM or SIGINT, /readyz starts failing, the listener stays open for
--drain-delay, then closes; requests in flight may finish within
--shutdown-timeout.

--config FILE reads a YAML file that gives the same settings as the flags,
plus partner routes and auth (identities, hashed API keys, client
certificates); flags and FENCEGATE_* variables override it. Check a file
with fencegate config check FILE.`

// parseServe reads serve's flags and environment and validates them.
func parseServe(args []string, lookupEnv lookupEnvFunc, stdout io.Writer) (serveConfig, error) {
	cmd := newCommand("serve", "fencegate [serve] [flags]", serveDescription)
	fs := cmd.fs
	var (
		cfg                       serveConfig
		endpoints                 string
		caFile, certFile, keyFile string
	)
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:8080", "`host:port` to serve HTTP on")
	fs.StringVar(&endpoints, "etcd-endpoints", "", "comma-separated etcd client `URLs`, such as\nhttp://etcd-1:2379,http://etcd-2:2379 (required)")
	fs.StringVar(&cfg.etcd.prefix, "etcd-prefix", "fencegate/", "`prefix` of every etcd key fencegate writes")
	fs.StringVar(&cfg.etcd.username, "etcd-username", "", "etcd user `name` (with --etcd-password)")
	fs.StringVar(&cfg.etcd.password, "etcd-password", "", "etcd `password`")
	fs.StringVar(&caFile, "etcd-ca", "", "PEM `file` of the CAs that sign etcd's server certificates\n(empty: the system's roots, for https:// endpoints)")
	fs.StringVar(&certFile, "etcd-cert", "", "PEM `file` of the client certificate for etcd (with --etcd-key)")
	fs.StringVar(&keyFile, "etcd-key", "", "PEM `file` of the client certificate's private key")
	fs.DurationVar(&cfg.etcd.dialTimeout, "etcd-dial-timeout", 5*time.Second, "bound on connecting (and authenticating) to etcd")
	fs.DurationVar(&cfg.etcd.requestTimeout, "etcd-request-timeout", 2*time.Second, "bound on each etcd request, such as a fence check")
	fs.StringVar(&cfg.s3.Endpoint, "s3-endpoint", "", "S3 server `URL`, such as http://127.0.0.1:7070 (empty: AWS S3 in --s3-region)")
	fs.StringVar(&cfg.s3.Region, "s3-region", "us-east-1", "S3 signing `region`")
	fs.StringVar(&cfg.s3.AccessKeyID, "s3-access-key", "", "S3 access key `id` (with --s3-secret-key; empty: the AWS SDK's default chain)")
	fs.StringVar(&cfg.s3.SecretAccessKey, "s3-secret-key", "", "S3 secret access `key`")
	fs.BoolVar(&cfg.s3.UsePathStyle, "s3-path-style", false, "address buckets as endpoint/bucket/key, as most S3-compatible servers need")
	fs.IntVar(&cfg.s3.MaxConnsPerHost, "s3-max-conns", 256, "most connections to S3 at once; requests beyond wait for one")
	fs.DurationVar(&cfg.s3.ConnWaitTimeout, "s3-conn-wait-timeout", 5*time.Second, "bound on a request's wait for a connection to S3 (504 upstream-timeout beyond)")
	lim := addLimitFlags(fs)
	fs.Var(&cfg.tokenChecks, "token-checks", tokenChecksUsage)
	addHTTPFlags(fs, &cfg.http)
	addLogFlags(fs, &cfg.log)
	addTracingFlags(fs, &cfg.tracing)
	cmd.addConfigFlag()
	if err := cmd.parse(args, lookupEnv, stdout); err != nil {
		return serveConfig{}, err
	}

	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	check(checkListen("listen", cfg.listen))
	cfg.etcd.endpoints = splitList(endpoints)
	check(checkEtcdEndpoints(cfg.etcd.endpoints))
	if cfg.etcd.prefix == "" {
		check(errors.New("--etcd-prefix must not be empty"))
	}
	if (cfg.etcd.username == "") != (cfg.etcd.password == "") {
		check(errors.New("--etcd-username and --etcd-password go together: set both or neither"))
	}
	tlsConfig, err := etcdTLS(caFile, certFile, keyFile)
	check(err)
	cfg.etcd.tls = tlsConfig
	if tlsConfig != nil {
		for _, e := range cfg.etcd.endpoints {
			if strings.HasPrefix(e, "http://") {
				check(fmt.Errorf("--etcd-endpoints %q is http:// but --etcd-ca, --etcd-cert or --etcd-key is set: use https://", e))
			}
		}
	}
	check(positive("etcd-dial-timeout", cfg.etcd.dialTimeout))
	check(positive("etcd-request-timeout", cfg.etcd.requestTimeout))
	check(checkS3Endpoint(cfg.s3.Endpoint))
	if cfg.s3.Region == "" {
		check(errors.New("--s3-region must not be empty"))
	}
	if cfg.s3.MaxConnsPerHost < 1 {
		check(fmt.Errorf("--s3-max-conns %d: must be at least 1", cfg.s3.MaxConnsPerHost))
	}
	check(positive("s3-conn-wait-timeout", cfg.s3.ConnWaitTimeout))
	if (cfg.s3.AccessKeyID == "") != (cfg.s3.SecretAccessKey == "") {
		check(errors.New("--s3-access-key and --s3-secret-key go together: set both or neither (neither: the AWS SDK's default chain)"))
	}
	cfg.gateway = lim.limits()
	check(checkLimits(cfg.gateway))
	check(cfg.http.check())
	check(cfg.http.loadTLS())
	check(cfg.log.check())
	check(cfg.tracing.check())
	check(checkUnsafeTestHooksEnv(lookupEnv))
	cfg.features, err = cmd.features(cfg.http)
	check(err)
	if err == nil {
		check(cfg.tokenChecks.checkRoutes(cfg.features.partners))
	}
	if len(errs) > 0 {
		return serveConfig{}, &usageError{fmt.Errorf("serve: %w", errors.Join(errs...))}
	}
	return cfg, nil
}

// runServe is `fencegate serve`.
func runServe(ctx context.Context, args []string, lookupEnv lookupEnvFunc, stdout, stderr io.Writer) error {
	cfg, err := parseServe(args, lookupEnv, stdout)
	if err != nil {
		return err
	}
	logger, logs := newLogger(stderr, cfg.log)
	defer logs.Close()
	if err := serve(ctx, cfg, logger); err != nil && !interrupted(ctx, err) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// interrupted reports whether err only says that ctx was cancelled, as a
// signal during start does: that is a clean exit, not a failure.
func interrupted(ctx context.Context, err error) bool {
	return ctx.Err() != nil && errors.Is(err, context.Canceled)
}

// serve connects to etcd and S3 and serves the gateway until ctx is done,
// then shuts down gracefully.
func serve(ctx context.Context, cfg serveConfig, logger *slog.Logger) error {
	ln, err := listen(cfg.listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	tracing, err := startTracing(ctx, cfg.tracing)
	if err != nil {
		return err
	}
	// Runs last: the spans of requests that ended during the shutdown
	// are exported too.
	defer tracing.shutdown(logger)
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.etcd.endpoints,
		DialTimeout: cfg.etcd.dialTimeout,
		Username:    cfg.etcd.username,
		Password:    cfg.etcd.password,
		TLS:         cfg.etcd.tls,
		Logger:      devstack.ZapLogger(logger.With("component", "etcd-client"), zapcore.WarnLevel),
	})
	if err != nil {
		return fmt.Errorf("etcd client for %v: %w", cfg.etcd.endpoints, err)
	}
	defer client.Close()
	gw, err := newGatewayWith(ctx, logger, client, tokenstore.Config{
		Prefix:         cfg.etcd.prefix,
		RequestTimeout: cfg.etcd.requestTimeout,
		Policies:       cfg.tokenChecks,
	}, cfg.s3, cfg.gateway, cfg.features, tracing.tracer())
	if err != nil {
		return err
	}
	gw.probe(ctx)
	logger.Info("listening", "addr", ln.Addr().String(), "tls", cfg.http.tls != nil, "etcd", cfg.etcd.endpoints, "s3", s3EndpointForLog(cfg.s3.Endpoint),
		"partner_routes", len(cfg.features.partners), "auth", cfg.features.auth != nil, "otlp_endpoint", cfg.tracing.endpoint)
	return serveHTTP(ctx, logger, ln, cfg.http, gw)
}

// wiredGateway is a gateway with the stores it was built on.
type wiredGateway struct {
	*gateway.Gateway
	logger  *slog.Logger
	fences  *tokenstore.Store
	objects *s3.Client
	limits  limits
}

// newGateway builds the token store, the S3 backend and the gateway on
// them, with readiness probes of both.
func newGateway(ctx context.Context, logger *slog.Logger, client *clientv3.Client, storeCfg tokenstore.Config, s3cfg s3.Config, lim limits) (*wiredGateway, error) {
	return newGatewayWith(ctx, logger, client, storeCfg, s3cfg, lim, features{}, nil)
}

// newGatewayWith is newGateway with the config file's features (partner
// routes and auth) and a tracer (nil: no tracing).
func newGatewayWith(ctx context.Context, logger *slog.Logger, client *clientv3.Client, storeCfg tokenstore.Config, s3cfg s3.Config, lim limits, f features, tracer trace.Tracer) (*wiredGateway, error) {
	storeCfg.MaxSessionsPerIdentity = noLimitIfZero(lim.maxSessionsPerIdentity)
	storeCfg.MaxLocksPerSession = noLimitIfZero(lim.maxLocksPerSession)
	store, err := tokenstore.New(client, storeCfg)
	if err != nil {
		return nil, err
	}
	objects, err := s3.New(ctx, s3cfg)
	if err != nil {
		return nil, err
	}
	hooks, err := unsafeTestHooks(os.LookupEnv, logger) // nil unless built with -tags fencegate_unsafe_hooks and FENCEGATE_UNSAFE_TEST_HOOKS is set
	if err != nil {
		return nil, err
	}
	opts := []gateway.Option{gateway.WithLocks(store)}
	for _, warning := range f.warnings() {
		logger.Warn("config: " + warning)
	}
	if len(f.partners) > 0 {
		partners, err := tokenstore.NewPartners(store)
		if err != nil {
			return nil, err
		}
		opts = append(opts, gateway.WithPartners(f.partners, partners, nil))
	}
	if f.auth != nil {
		opts = append(opts, gateway.WithAuth(*f.auth))
	}
	gw, err := gateway.New(gateway.Config{
		Logger:               logger,
		BufferBytes:          lim.bufferBytes,
		BufferBudgetBytes:    lim.bufferBudgetBytes,
		MaxBodyBytes:         lim.maxBodyBytes,
		MaxHeaderBytes:       lim.maxHeaderBytes,
		TransferChunkTimeout: lim.transferChunkTimeout,
		MaxRequestsPerClient: lim.maxRequestsPerClient,
		MaxLockWaiters:       noLimitIfZero(lim.maxLockWaiters),
		TombstonesForAbsent:  lim.tombstonesForAbsent,
		TestHooks:            hooks,
		Tracer:               tracer,
		Readiness: []gateway.Check{
			{Name: "etcd", Probe: store.Ping},
			{Name: "s3", Probe: objects.Ping},
		},
		StoreSpace: func(ctx context.Context) (gateway.StoreSpace, error) {
			space, err := store.Space(ctx)
			return gateway.StoreSpace{Size: space.Size, InUse: space.InUse, Quota: space.Quota}, err
		},
	}, store, objects, opts...)
	if err != nil {
		return nil, err
	}
	if err := registerLogMetrics(gw.Registry(), logger); err != nil {
		return nil, err
	}
	return &wiredGateway{Gateway: gw, logger: logger, fences: store, objects: objects, limits: lim}, nil
}

// probe checks etcd and S3 once at start, together, and logs what is not
// ready. A failure is not fatal: /readyz reports it until the dependency
// answers.
func (g *wiredGateway) probe(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range []gateway.Check{{Name: "etcd", Probe: g.fences.Ping}, {Name: "s3", Probe: g.objects.Ping}} {
		wg.Go(func() {
			if err := c.Probe(ctx); err != nil {
				g.logger.Warn("dependency not ready yet; /readyz fails until it is", "dependency", c.Name, "err", err)
			}
		})
	}
	wg.Wait()
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

// checkEtcdEndpoints checks that there is at least one endpoint and that
// each is an http(s):// URL with a host, or a host:port.
func checkEtcdEndpoints(endpoints []string) error {
	if len(endpoints) == 0 {
		return fmt.Errorf("--etcd-endpoints is required (or %s, or etcd.endpoints in the --config file), "+
			"such as http://127.0.0.1:2379; for a local etcd and S3 server, run `fencegate dev`", envName("etcd-endpoints"))
	}
	schemes := make(map[string]bool)
	for _, e := range endpoints {
		if err := checkEtcdEndpoint(e); err != nil {
			return fmt.Errorf("--etcd-endpoints %w", err)
		}
		scheme, _, ok := strings.Cut(e, "://")
		if !ok {
			scheme = "http"
		}
		schemes[scheme] = true
	}
	if len(schemes) > 1 {
		return errors.New("--etcd-endpoints mixes http:// and https:// endpoints")
	}
	return nil
}

// etcdTLS loads the TLS configuration for etcd, or returns nil when no TLS
// flag is set.
func etcdTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--etcd-cert and --etcd-key go together: set both or neither")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--etcd-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--etcd-ca %s: no PEM certificates in it", caFile)
		}
		cfg.RootCAs = pool
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert/--etcd-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// checkS3Endpoint checks that endpoint is empty or an http(s):// URL with
// a host.
func checkS3Endpoint(endpoint string) error {
	if endpoint == "" {
		return nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--s3-endpoint %q: want a URL such as http://127.0.0.1:7070", endpoint)
	}
	return nil
}

// s3EndpointForLog names the S3 endpoint in logs, without any password.
func s3EndpointForLog(endpoint string) string {
	if endpoint == "" {
		return "AWS"
	}
	if u, err := url.Parse(endpoint); err == nil {
		return u.Redacted()
	}
	return endpoint
}

// checkLimits checks the gateway's size limits and the lock API's.
func checkLimits(l limits) error {
	var errs []error
	if l.bufferBytes < 1 {
		errs = append(errs, fmt.Errorf("--buffer-bytes %d: must be at least 1", l.bufferBytes))
	}
	if l.bufferBudgetBytes < 1 {
		errs = append(errs, fmt.Errorf("--buffer-budget-bytes %d: must be at least 1", l.bufferBudgetBytes))
	}
	if l.maxBodyBytes < 1 {
		errs = append(errs, fmt.Errorf("--max-body-bytes %d: must be at least 1", l.maxBodyBytes))
	}
	if l.maxHeaderBytes < 1<<10 || l.maxHeaderBytes > 16<<20 {
		errs = append(errs, fmt.Errorf("--max-header-bytes %d: must be from 1KiB to 16MiB", l.maxHeaderBytes))
	}
	for _, c := range []struct {
		flag string
		n    int
	}{{"max-requests-per-client", l.maxRequestsPerClient}, {"max-sessions-per-identity", l.maxSessionsPerIdentity}, {"max-locks-per-session", l.maxLocksPerSession}, {"max-lock-waiters", l.maxLockWaiters}} {
		if c.n < 0 {
			errs = append(errs, fmt.Errorf("--%s %d: must not be negative (0: no limit)", c.flag, c.n))
		}
	}
	if l.transferChunkTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--transfer-chunk-timeout %v: must be above zero", l.transferChunkTimeout))
	}
	if len(errs) == 0 && l.bufferBytes > l.maxBodyBytes {
		errs = append(errs, fmt.Errorf("--buffer-bytes %v must not exceed --max-body-bytes %v", byteSize(l.bufferBytes), byteSize(l.maxBodyBytes)))
	}
	if len(errs) == 0 && l.bufferBudgetBytes < l.bufferBytes {
		errs = append(errs, fmt.Errorf("--buffer-budget-bytes %v must be at least --buffer-bytes %v", byteSize(l.bufferBudgetBytes), byteSize(l.bufferBytes)))
	}
	return errors.Join(errs...)
}

// positive checks that the duration flag name is above zero.
func positive(name string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("--%s %v: must be above zero", name, d)
	}
	return nil
}
