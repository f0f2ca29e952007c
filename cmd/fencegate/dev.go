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
	"fencegate/internal/config"
	"fencegate/internal/devstack"
	"fencegate/internal/logging"
	"fencegate/internal/tracing"
	"fencegate/internal/zapslog"
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

// runDev is `fencegate dev`.
func runDev(ctx context.Context, args []string, lookupEnv lookupEnvFunc, stdout, stderr io.Writer) error {
	cfg, err := parseDev(args, lookupEnv, stdout)
	if err != nil {
		return err
	}
	logger, logs := logging.New(stderr, cfg.Log)
	defer logs.Close()
	if err := dev(ctx, cfg, logger, stdout); err != nil && !interrupted(ctx, err) {
		return fmt.Errorf("dev: %w", err)
	}
	return nil
}

// dev starts etcd and versitygw on cfg.Data, the gateway in front of
// them, prints how to use it, and serves until ctx is done. Everything it
// started is stopped before it returns.
func dev(ctx context.Context, cfg config.Dev, logger *slog.Logger, stdout io.Writer) error {
	data, err := filepath.Abs(cfg.Data)
	if err != nil {
		return err
	}
	if len(cfg.Ignored) > 0 {
		logger.Info("dev runs its own etcd and S3 server: these settings of the config file are not used", "fields", cfg.Ignored)
	}
	bin, err := devstack.FindVersityGW()
	if err != nil {
		return err
	}
	// Listen first, to fail before starting anything if the address is
	// taken. Connections wait in the backlog until the gateway serves.
	ln, err := listen(cfg.Listen)
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
		Port:      cfg.S3Port,
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
		Logger:      zapslog.Logger(logger.With("component", "etcd-client"), zapcore.WarnLevel),
	})
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	defer client.Close()
	traces, err := tracing.Start(ctx, cfg.Tracing, buildVersion())
	if err != nil {
		return err
	}
	defer traces.Shutdown(logger)
	storeCfg := cfg.Store
	storeCfg.Prefix = devPrefix
	gw, err := newGatewayWith(ctx, logger, client, storeCfg, s3.Config{
		Endpoint:        objectServer.Endpoint(),
		Region:          objectServer.Region,
		AccessKeyID:     devAccessKey,
		SecretAccessKey: devSecretKey,
		UsePathStyle:    true,
	}, cfg.Gateway, cfg.Marks, cfg.Features, traces.Tracer())
	if err != nil {
		return err
	}
	stopEvictor := gw.startEvictor(ctx)
	defer stopEvictor()
	session, err := newDevSession(ctx, gw)
	if err != nil {
		return err
	}
	session.Gateway = "http://" + reachableAddr(ln.Addr())
	if cfg.HTTP.TLS != nil {
		session.Gateway = "https://" + reachableAddr(ln.Addr())
	}
	session.Auth = cfg.Auth != nil
	session.Etcd = etcd.Endpoints()[0]
	session.EtcdDir = filepath.Join(cfg.Data, "etcd")
	session.S3 = objectServer.Endpoint()
	session.S3Dir = filepath.Join(cfg.Data, "s3")
	session.Data = cfg.Data
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
	err = serveHTTP(serveCtx, logger, ln, cfg.HTTP, gw)
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
