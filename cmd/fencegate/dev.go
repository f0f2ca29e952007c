package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"text/template"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zapcore"

	"fencegate/api"
	"fencegate/backends/s3"
	"fencegate/internal/devstack"
	"fencegate/tokenstore"
)

// The dev stack's fixed names and credentials, printed at start. They are
// for a server on 127.0.0.1 only.
const (
	devBucket    = "dev"
	devKey       = "greeting"
	devAccessKey = "fencegate-dev"
	devSecretKey = "fencegate-dev-secret"
	devPrefix    = "fencegate/"
)

// devConfig is everything `fencegate dev` needs.
type devConfig struct {
	listen string
	data   string
	s3Port int
	http   httpConfig
	log    logConfig
	// tracing is where spans go (--otlp-endpoint); off by default.
	tracing tracingConfig
	// tokenChecks are the token checks per bucket or partner route (--token-checks).
	tokenChecks tokenChecks
	limits      limits
	// features are the config file's partner routes and auth.
	features features
	// ignored are the config file's settings that dev does not use (its
	// etcd and S3 sections): dev runs its own.
	ignored []string
}

const devDescription = `
Run fencegate locally with nothing else installed: an embedded etcd, the
versitygw S3 server (a child process; build it with make tools) and a
gateway in front of them. It creates the bucket "dev" and prints a curl
session to try. Data stays in --data: run it again to pick up where you
left off. Ctrl-C stops everything.

The versitygw binary is taken from $FENCEGATE_VERSITYGW, else from next to
the fencegate binary, else from bin/ of the repository it is run in.

--config FILE reads the YAML config file that fencegate serve reads (to try
partner routes and auth locally); its etcd and s3 sections are not used.`

// parseDev reads dev's flags and environment and validates them.
func parseDev(args []string, lookupEnv lookupEnvFunc, stdout io.Writer) (devConfig, error) {
	cmd := newCommand("dev", "fencegate dev [flags]", devDescription)
	fs := cmd.fs
	var cfg devConfig
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:8080", "`host:port` to serve the gateway on")
	fs.StringVar(&cfg.data, "data", ".fencegate", "`directory` of etcd's data (etcd/) and the S3 objects (s3/)")
	fs.IntVar(&cfg.s3Port, "s3-port", 0, "`port` of the S3 server on 127.0.0.1 (0: a free one)")
	fs.Var(&cfg.tokenChecks, "token-checks", tokenChecksUsage)
	lim := addLimitFlags(fs)
	addHTTPFlags(fs, &cfg.http)
	addLogFlags(fs, &cfg.log)
	addTracingFlags(fs, &cfg.tracing)
	cmd.addConfigFlag()
	if err := cmd.parse(args, lookupEnv, stdout); err != nil {
		return devConfig{}, err
	}
	cfg.limits = lim.limits()
	cfg.ignored = cmd.ignored

	var errs []error
	errs = append(errs, checkListen("listen", cfg.listen))
	if cfg.data == "" {
		errs = append(errs, errors.New("--data must not be empty"))
	}
	if cfg.s3Port < 0 || cfg.s3Port > 65535 {
		errs = append(errs, fmt.Errorf("--s3-port %d: must be from 0 to 65535", cfg.s3Port))
	}
	errs = append(errs, checkLimits(cfg.limits), cfg.http.check(), cfg.http.loadTLS(), cfg.log.check(), cfg.tracing.check(), checkUnsafeTestHooksEnv(lookupEnv))
	var err error
	cfg.features, err = cmd.features(cfg.http)
	errs = append(errs, err)
	if err == nil {
		errs = append(errs, cfg.tokenChecks.checkRoutes(cfg.features.partners))
	}
	if err := errors.Join(errs...); err != nil {
		return devConfig{}, &usageError{fmt.Errorf("dev: %w", err)}
	}
	return cfg, nil
}

// runDev is `fencegate dev`.
func runDev(ctx context.Context, args []string, lookupEnv lookupEnvFunc, stdout, stderr io.Writer) error {
	cfg, err := parseDev(args, lookupEnv, stdout)
	if err != nil {
		return err
	}
	logger, logs := newLogger(stderr, cfg.log)
	defer logs.Close()
	if err := dev(ctx, cfg, logger, stdout); err != nil && !interrupted(ctx, err) {
		return fmt.Errorf("dev: %w", err)
	}
	return nil
}

// dev starts etcd and versitygw on cfg.data, the gateway in front of
// them, prints how to use it, and serves until ctx is done. Everything it
// started is stopped before it returns.
func dev(ctx context.Context, cfg devConfig, logger *slog.Logger, stdout io.Writer) error {
	data, err := filepath.Abs(cfg.data)
	if err != nil {
		return err
	}
	if len(cfg.ignored) > 0 {
		logger.Info("dev runs its own etcd and S3 server: these settings of the config file are not used", "fields", cfg.ignored)
	}
	bin, err := devstack.FindVersityGW()
	if err != nil {
		return err
	}
	// Listen first, to fail before starting anything if the address is
	// taken. Connections wait in the backlog until the gateway serves.
	ln, err := listen(cfg.listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	etcd, err := devstack.StartEtcd(ctx, devstack.EtcdConfig{
		Dir:    filepath.Join(data, "etcd"),
		Logger: logger.With("component", "etcd"),
	})
	if err != nil {
		return err
	}
	defer etcd.Close()
	objectServer, err := devstack.StartVersityGW(ctx, devstack.S3Config{
		Binary:    bin,
		Dir:       filepath.Join(data, "s3"),
		Port:      cfg.s3Port,
		AccessKey: devAccessKey,
		SecretKey: devSecretKey,
	})
	if err != nil {
		return err
	}
	defer objectServer.Close()
	if err := objectServer.CreateBucket(ctx, devBucket); err != nil {
		return err
	}

	client, err := clientv3.New(clientv3.Config{
		Endpoints:   etcd.Endpoints(),
		DialTimeout: 5 * time.Second,
		Logger:      devstack.ZapLogger(logger.With("component", "etcd-client"), zapcore.WarnLevel),
	})
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	defer client.Close()
	tracing, err := startTracing(ctx, cfg.tracing)
	if err != nil {
		return err
	}
	defer tracing.shutdown(logger)
	gw, err := newGatewayWith(ctx, logger, client, tokenstore.Config{Prefix: devPrefix, Policies: cfg.tokenChecks}, s3.Config{
		Endpoint:        objectServer.Endpoint(),
		Region:          objectServer.Region,
		AccessKeyID:     devAccessKey,
		SecretAccessKey: devSecretKey,
		UsePathStyle:    true,
	}, cfg.limits, cfg.features, tracing.tracer())
	if err != nil {
		return err
	}
	session, err := newDevSession(ctx, gw)
	if err != nil {
		return err
	}
	session.Gateway = "http://" + reachableAddr(ln.Addr())
	if cfg.http.tls != nil {
		session.Gateway = "https://" + reachableAddr(ln.Addr())
	}
	session.Auth = cfg.features.auth != nil
	session.Etcd = etcd.Endpoints()[0]
	session.EtcdDir = filepath.Join(cfg.data, "etcd")
	session.S3 = objectServer.Endpoint()
	session.S3Dir = filepath.Join(cfg.data, "s3")
	session.Data = cfg.data
	if err := printSession(stdout, session); err != nil {
		return fmt.Errorf("print session: %w", err)
	}
	logger.Info("listening", "addr", ln.Addr().String())

	// If versitygw dies, stop serving rather than answer 502s.
	serveCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errS3Exited := errors.New("versitygw exited")
	go func() {
		select {
		case <-objectServer.Exited():
			logger.Error("versitygw exited; shutting down", "output", objectServer.Output())
			cancel(errS3Exited)
		case <-serveCtx.Done():
		}
	}()
	err = serveHTTP(serveCtx, logger, ln, cfg.http, gw)
	if cause := context.Cause(serveCtx); errors.Is(cause, errS3Exited) {
		return errors.Join(cause, err)
	}
	return err
}

// devSession is what the printed curl session says. Its tokens are
// relative to the resource's current high-water mark, so that the session
// is right on a fresh --data and on one with history.
type devSession struct {
	Gateway, Etcd, EtcdDir, S3, S3Dir, Data string
	AccessKey, SecretKey, Region, Bucket    string
	Key                                     string
	Resource                                api.Resource
	// HighWaterMark is the resource's mark before the session.
	HighWaterMark api.Token
	// Token is accepted; Stale, one below, is refused after it.
	Token, Stale api.Token
	// Exists says whether the object exists already: the first write then
	// answers 200 rather than 201.
	Exists bool
	// Auth says that the config file turned auth on: the curl commands
	// then need a key.
	Auth bool
}

// newDevSession reads the greeting's high-water mark and the token recorded
// on the object, and picks the session's tokens above both.
func newDevSession(ctx context.Context, gw *wiredGateway) (devSession, error) {
	path := api.ObjectPath{Bucket: devBucket, Key: devKey}
	s := devSession{
		AccessKey: devAccessKey,
		SecretKey: devSecretKey,
		Region:    devstack.S3Region,
		Bucket:    devBucket,
		Key:       devKey,
		Resource:  path.Resource(),
	}
	hwm, err := gw.fences.HighWaterMark(ctx, s.Resource)
	if err != nil {
		return devSession{}, err
	}
	seen, err := gw.objects.Observe(ctx, path)
	if err != nil {
		return devSession{}, err
	}
	s.HighWaterMark, s.Exists = max(hwm, seen.Token), seen.Exists
	switch {
	case s.HighWaterMark == 0:
		s.Token = 5
	case s.HighWaterMark < api.MaxToken:
		s.Token = s.HighWaterMark + 1
	default:
		s.Token = api.MaxToken // equal tokens are accepted
	}
	s.Stale = s.Token - 1
	return s, nil
}

// printSession prints the session to w.
func printSession(w io.Writer, s devSession) error {
	tmpl, err := template.New("session").Parse(devSessionText)
	if err != nil {
		return err
	}
	return tmpl.Execute(w, s)
}

// reachableAddr returns addr as a client should dial it: an unspecified
// host (0.0.0.0, ::) becomes the loopback address.
func reachableAddr(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return addr.String()
	}
	ip := tcp.IP
	switch {
	case ip == nil || ip.IsUnspecified() && ip.To4() != nil:
		ip = net.IPv4(127, 0, 0, 1)
	case ip.IsUnspecified():
		ip = net.IPv6loopback
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(tcp.Port))
}

// devSessionText is the template of what dev prints once it serves: the
// addresses and credentials, and a curl session to paste.
const devSessionText = `
fencegate dev is running.

  gateway  {{.Gateway}}
  etcd     {{.Etcd}}  (data in {{.EtcdDir}})
  S3       {{.S3}}  (versitygw; objects in {{.S3Dir}})
           access key {{.AccessKey}}, secret key {{.SecretKey}}, region {{.Region}}, bucket {{.Bucket}}

Try it. The high-water mark of {{.Resource}} is {{.HighWaterMark}}{{if .Exists}}, and the object exists{{end}}.
{{- if .Auth}}
Auth is on (the config file's auth section): add -H 'Authorization: Bearer KEY' with a key
whose hash the file lists, or each command gets 401.{{end}}

  # Write with token {{.Token}}: accepted, {{if .Exists}}200 OK{{else}}201 Created{{end}}, and the high-water mark becomes {{.Token}}.
  curl -i -X PUT --data-binary 'hello from {{.Token}}' -H 'X-Fence-Token: {{.Token}}' {{.Gateway}}/v1/objects/{{.Bucket}}/{{.Key}}

  # Write with the older token {{.Stale}}, as a writer whose lock expired would: 409 Conflict,
  # a stale-token problem+json, and the object is untouched.
  curl -i -X PUT --data-binary 'hello from {{.Stale}}' -H 'X-Fence-Token: {{.Stale}}' {{.Gateway}}/v1/objects/{{.Bucket}}/{{.Key}}

  # Read it back: "hello from {{.Token}}", with X-Fence-Token: {{.Token}}, the token that wrote it.
  curl -i {{.Gateway}}/v1/objects/{{.Bucket}}/{{.Key}}

  # The high-water mark: {{.Token}}.
  curl -s {{.Gateway}}/v1/fences/{{.Resource}}

Ctrl-C stops everything. The data stays in {{.Data}}: run fencegate dev again to go on.

`
