package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"text/template"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zapcore"

	"fencegate/api"
	"fencegate/backends/gcs"
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
	devBucket = "dev"
	// devAnswers keeps partner answers' bodies, unless the config file
	// names another bucket.
	devAnswers = "fencegate-answers"
	devKey     = "greeting"
	// devS3Key is the object of the S3 API's aws-cli example.
	devS3Key     = "hello.txt"
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

// dev starts etcd and versitygw (and with --stores s3,gcs
// fake-gcs-server) on cfg.Data, the gateway in front of them, prints how to use it, and serves until ctx is done. Everything it
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
	withGCS := slices.Contains(cfg.Stores, api.StoreGCS)
	var gcsBin string
	if withGCS {
		if gcsBin, err = devstack.FindFakeGCS(); err != nil {
			return err
		}
	}
	// Listen first, to fail before starting anything if the address is
	// taken. Connections wait in the backlog until the gateway serves.
	ln, err := listen(cfg.Listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	s3ln, err := listenS3API(cfg.S3API)
	if err != nil {
		return err
	}
	if s3ln != nil {
		defer s3ln.Close()
	}
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
	if cfg.Answers.Bucket == "" {
		cfg.Answers = config.PartnerAnswers{Bucket: devAnswers, Prefix: config.DefaultPartnerAnswersPrefix}
	}
	if err := objectServer.CreateBucket(ctx, cfg.Answers.Bucket); err != nil {
		return err
	}
	var gcsServer *devstack.GCSServer
	if withGCS {
		gcsServer, err = devstack.StartFakeGCS(ctx, devstack.GCSConfig{Binary: gcsBin, Dir: filepath.Join(data, "gcs")})
		if err != nil {
			return err
		}
		defer gcsServer.Close()
		if err := gcsServer.CreateBucket(ctx, config.DevGCSBucket); err != nil {
			return err
		}
		// dev's buckets in GCS are in its emulator.
		buckets := slices.Clone(cfg.Buckets)
		for i := range buckets {
			buckets[i].GCS = gcs.Config{Endpoint: gcsServer.Endpoint(), WithoutAuthentication: true}
		}
		cfg.Buckets = buckets
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
	defer gw.closeStores()
	stopEvictor := gw.startEvictor(ctx)
	defer stopEvictor()
	endpoints, err := withS3API([]endpoint{{name: "http", ln: ln, handler: gw}}, s3ln, cfg.S3API, gw, logger)
	if err != nil {
		return err
	}
	session, err := newDevSession(ctx, gw, withGCS, s3ln != nil)
	if err != nil {
		return err
	}
	scheme := "http://"
	if cfg.HTTP.TLS != nil {
		scheme = "https://"
	}
	session.Gateway = scheme + reachableAddr(ln.Addr())
	if session.S3API != nil {
		session.S3API.Endpoint = scheme + reachableAddr(s3ln.Addr())
		session.S3API.Region = cfg.S3API.Region
		session.S3API.AccessKey, session.S3API.SecretKey = "ID", "SECRET"
		session.S3API.FileKeys = cfg.Auth != nil
		if !session.S3API.FileKeys {
			session.S3API.AccessKey, session.S3API.SecretKey = config.DevS3Key.AccessKeyID, string(config.DevS3Key.SecretAccessKey)
		}
	}
	session.S3APINote = cfg.S3APINote
	session.Auth = cfg.Auth != nil
	session.Etcd = etcd.Endpoints()[0]
	session.EtcdDir = filepath.Join(cfg.Data, "etcd")
	session.S3 = objectServer.Endpoint()
	session.S3Dir = filepath.Join(cfg.Data, "s3")
	if gcsServer != nil {
		session.GCSEndpoint = gcsServer.Endpoint()
		session.GCSDir = filepath.Join(cfg.Data, "gcs")
	}
	session.Data = cfg.Data
	if err := printSession(stdout, session); err != nil {
		return fmt.Errorf("print session: %w", err)
	}
	logger.Info("listening", "addr", ln.Addr().String())

	// If versitygw or fake-gcs-server dies, stop serving rather than
	// answer 502s.
	serveCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errS3Exited := errors.New("versitygw exited")
	errGCSExited := errors.New("fake-gcs-server exited")
	var gcsExited <-chan struct{} // nil without GCS: never ready
	if gcsServer != nil {
		gcsExited = gcsServer.Exited()
	}
	go func() {
		select {
		case <-objectServer.Exited():
			logger.Error("versitygw exited; shutting down", "output", objectServer.Output())
			cancel(errS3Exited)
		case <-gcsExited:
			logger.Error("fake-gcs-server exited; shutting down", "output", gcsServer.Output())
			cancel(errGCSExited)
		case <-serveCtx.Done():
		}
	}()
	err = serveHTTP(serveCtx, logger, cfg.HTTP, gw, endpoints...)
	if cause := context.Cause(serveCtx); errors.Is(cause, errS3Exited) || errors.Is(cause, errGCSExited) {
		return errors.Join(cause, err)
	}
	return err
}

// devSession is what the printed curl session says. Its tokens are
// relative to the resource's current high-water mark, so that the session
// is right on a fresh --data and on one with history.
type devSession struct {
	Gateway, Etcd, EtcdDir, S3, S3Dir, Data string
	AccessKey, SecretKey, Region            string
	// devObject is the greeting in the S3 bucket dev.
	devObject
	// GCS is the greeting in the GCS bucket dev-gcs; nil without GCS.
	GCS *devObject
	// GCSEndpoint and GCSDir are fake-gcs-server's JSON API and objects.
	GCSEndpoint, GCSDir string
	// Auth says that the config file turned auth on: the curl commands
	// then need a key.
	Auth bool
	// S3API is the S3 API's aws-cli example; nil when it is off, and
	// S3APINote then may say why.
	S3API     *devS3API
	S3APINote string
}

// devS3API is what the aws-cli example of the S3 API needs.
type devS3API struct {
	Endpoint, Region string
	// AccessKey and SecretKey are dev's own key, or with FileKeys the
	// placeholders ID and SECRET: the config file's keys are never
	// printed.
	AccessKey, SecretKey string
	FileKeys             bool
	// devObject is the object the example writes, and its tokens.
	devObject
}

// devObject is an object of the session and the tokens it uses.
type devObject struct {
	Bucket, Key string
	Resource    api.Resource
	// HighWaterMark is the resource's mark before the session.
	HighWaterMark api.Token
	// Token is accepted; Stale, one below, is refused after it.
	Token, Stale api.Token
	// Exists says whether the object exists already: the first write then
	// answers 200 rather than 201.
	Exists bool
}

// newDevSession picks the session's tokens of the greeting in S3, with
// withS3API of the S3 API's example object, and with withGCS of the
// greeting in GCS too.
func newDevSession(ctx context.Context, gw *wiredGateway, withGCS, withS3API bool) (devSession, error) {
	s := devSession{
		AccessKey: devAccessKey,
		SecretKey: devSecretKey,
		Region:    devstack.S3Region,
	}
	var err error
	s.devObject, err = newDevObject(ctx, gw, api.ObjectPath{Store: api.StoreS3, Bucket: devBucket, Key: devKey})
	if err != nil {
		return s, err
	}
	if withS3API {
		s.S3API = &devS3API{}
		s.S3API.devObject, err = newDevObject(ctx, gw, api.ObjectPath{Store: api.StoreS3, Bucket: devBucket, Key: devS3Key})
		if err != nil {
			return s, err
		}
	}
	if !withGCS {
		return s, nil
	}
	o, err := newDevObject(ctx, gw, api.ObjectPath{Store: api.StoreGCS, Bucket: config.DevGCSBucket, Key: devKey})
	s.GCS = &o
	return s, err
}

// newDevObject reads the high-water mark of path and the token recorded
// on its object, and picks the session's tokens above both.
func newDevObject(ctx context.Context, gw *wiredGateway, path api.ObjectPath) (devObject, error) {
	o := devObject{Bucket: path.Bucket, Key: path.Key, Resource: path.Resource()}
	hwm, err := gw.fences.HighWaterMark(ctx, o.Resource)
	if err != nil {
		return devObject{}, err
	}
	seen, err := gw.stores.objects.Observe(ctx, path)
	if err != nil {
		return devObject{}, err
	}
	o.HighWaterMark, o.Exists = max(hwm, seen.Token), seen.Exists
	switch {
	case o.HighWaterMark == 0:
		o.Token = 5
	case o.HighWaterMark < api.MaxToken:
		o.Token = o.HighWaterMark + 1
	default:
		o.Token = api.MaxToken // equal tokens are accepted
	}
	o.Stale = o.Token - 1
	return o, nil
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
{{- with .S3API}}
  S3 API   {{.Endpoint}}  (region {{.Region}}; {{if .FileKeys}}the s3_keys of the config file's identities{{else}}access key {{.AccessKey}}, secret key {{.SecretKey}}{{end}})
{{- end}}
  console  {{.Gateway}}/ui/  (in a browser: decisions, marks, locks, metrics, the seed scenario)
  etcd     {{.Etcd}}  (data in {{.EtcdDir}})
  S3       {{.S3}}  (versitygw; objects in {{.S3Dir}})
           access key {{.AccessKey}}, secret key {{.SecretKey}}, region {{.Region}}, bucket {{.Bucket}}
{{- if .GCS}}
  GCS      {{.GCSEndpoint}}  (fake-gcs-server; objects in {{.GCSDir}})
           no credentials, bucket {{.GCS.Bucket}}
{{- end}}

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

{{- with .S3API}}

The S3 API speaks S3 to unmodified clients, fenced the same way: the token is the object's
metadata fence-token. The high-water mark of {{.Resource}} is {{.HighWaterMark}}{{if .Exists}}, and the object exists{{end}}.
{{- if .FileKeys}}
Put one of the config file's s3_keys (an access key id and its secret) in place of ID and SECRET.{{end}}

  echo 'hello from {{.Token}}' > {{.Key}}

  # Write with token {{.Token}}: accepted, and the high-water mark becomes {{.Token}}.
  AWS_ACCESS_KEY_ID={{.AccessKey}} AWS_SECRET_ACCESS_KEY={{.SecretKey}} aws --endpoint-url {{.Endpoint}} --region {{.Region}} s3 cp {{.Key}} s3://{{.Bucket}}/{{.Key}} --metadata fence-token={{.Token}}

  # Write with the older token {{.Stale}}: refused, aws prints StaleFenceToken (409) and exits non-zero.
  AWS_ACCESS_KEY_ID={{.AccessKey}} AWS_SECRET_ACCESS_KEY={{.SecretKey}} aws --endpoint-url {{.Endpoint}} --region {{.Region}} s3 cp {{.Key}} s3://{{.Bucket}}/{{.Key}} --metadata fence-token={{.Stale}}

  # Read it back: "hello from {{.Token}}".
  AWS_ACCESS_KEY_ID={{.AccessKey}} AWS_SECRET_ACCESS_KEY={{.SecretKey}} aws --endpoint-url {{.Endpoint}} --region {{.Region}} s3 cp s3://{{.Bucket}}/{{.Key}} -
{{- end}}
{{- with .S3APINote}}

The S3 API: {{.}}.
{{- end}}

{{- with .GCS}}

The bucket {{.Bucket}} is in GCS: its objects are resources gcs/{{.Bucket}}/KEY, with marks of
their own. The high-water mark of {{.Resource}} is {{.HighWaterMark}}{{if .Exists}}, and the object exists{{end}}.

  # Write with token {{.Token}}: accepted, {{if .Exists}}200 OK{{else}}201 Created{{end}}; the write carries the generation it observed.
  curl -i -X PUT --data-binary 'hello from {{.Token}}' -H 'X-Fence-Token: {{.Token}}' {{$.Gateway}}/v1/objects/{{.Bucket}}/{{.Key}}

  # Write with the older token {{.Stale}}: 409 Conflict, and the object is untouched.
  curl -i -X PUT --data-binary 'hello from {{.Stale}}' -H 'X-Fence-Token: {{.Stale}}' {{$.Gateway}}/v1/objects/{{.Bucket}}/{{.Key}}

  # Read it back, and the high-water mark.
  curl -i {{$.Gateway}}/v1/objects/{{.Bucket}}/{{.Key}}
  curl -s {{$.Gateway}}/v1/fences/{{.Resource}}
{{- end}}

Ctrl-C stops everything. The data stays in {{.Data}}: run fencegate dev again to go on.

`
