package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap/zapcore"

	"fencegate/api"
	"fencegate/backends/s3"
	"fencegate/console"
	"fencegate/gateway"
	"fencegate/internal/config"
	"fencegate/internal/logging"
	"fencegate/internal/tracing"
	"fencegate/internal/zapslog"
	"fencegate/rest"
	"fencegate/retention"
	"fencegate/tokenstore"
)

// runServe is `fencegate serve`.
func runServe(ctx context.Context, args []string, lookupEnv lookupEnvFunc, stdout, stderr io.Writer) error {
	cfg, err := parseServe(args, lookupEnv, stdout)
	if err != nil {
		return err
	}
	logger, logs := logging.New(stderr, cfg.Log)
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
func serve(ctx context.Context, cfg config.Serve, logger *slog.Logger) error {
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
	traces, err := tracing.Start(ctx, cfg.Tracing, buildVersion())
	if err != nil {
		return err
	}
	// Runs last: the spans of requests that ended during the shutdown
	// are exported too.
	defer traces.Shutdown(logger)
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Etcd.Endpoints,
		DialTimeout: cfg.Etcd.DialTimeout,
		Username:    cfg.Etcd.Username,
		Password:    cfg.Etcd.Password,
		TLS:         cfg.Etcd.TLS,
		Logger:      zapslog.Logger(logger.With("component", "etcd-client"), zapcore.WarnLevel),
	})
	if err != nil {
		return fmt.Errorf("etcd client for %v: %w", cfg.Etcd.Endpoints, err)
	}
	defer client.Close()
	gw, err := newGatewayWith(ctx, logger, client, cfg.Store, cfg.S3, cfg.Gateway, cfg.Marks, cfg.Features, traces.Tracer())
	if err != nil {
		return err
	}
	defer gw.closeStores()
	stopEvictor := gw.startEvictor(ctx)
	defer stopEvictor()
	gw.probe(ctx)
	endpoints, err := withS3API([]endpoint{{name: "http", ln: ln, handler: gw}}, s3ln, cfg.S3API, gw, logger)
	if err != nil {
		return err
	}
	logger.Info("listening", "addr", ln.Addr().String(), "s3_api_addr", addrOf(s3ln), "tls", cfg.HTTP.TLS != nil, "etcd", cfg.Etcd.Endpoints, "s3", config.S3EndpointForLog(cfg.S3.Endpoint),
		"gcs_buckets", len(cfg.GCSBuckets()), "partner_routes", len(cfg.Partners), "auth", cfg.Auth != nil, "otlp_endpoint", cfg.Tracing.Endpoint)
	return serveHTTP(ctx, logger, cfg.HTTP, gw, endpoints...)
}

// wiredGateway is a gateway with the stores it was built on.
type wiredGateway struct {
	*gateway.Gateway
	logger *slog.Logger
	fences *tokenstore.Store
	// stores are the object stores, S3's and any in GCS.
	stores *objectStores
	// s3 is the S3 client of stores, which the S3 API's bucket reads
	// (listings) go through.
	s3 *s3.Client
	// probes are the readiness probes of etcd and every store.
	probes []rest.Probe
	// evictor removes the marks that their objects record (package
	// retention); startEvictor runs it.
	evictor *retention.Evictor
	// maxHeaderBytes is the gateway's header limit, which the
	// http.Server's must exceed.
	maxHeaderBytes int
}

// newGateway builds the token store, the S3 backend and the gateway on
// them, with readiness probes of both.
func newGateway(ctx context.Context, logger *slog.Logger, client *clientv3.Client, storeCfg tokenstore.Config, s3cfg s3.Config, gwCfg gateway.Config) (*wiredGateway, error) {
	return newGatewayWith(ctx, logger, client, storeCfg, s3cfg, gwCfg, retention.Config{}, config.Features{}, nil)
}

// newGatewayWith is newGateway with the mark evictor's config, the config
// file's features (partner routes, auth, buckets in GCS) and a tracer
// (nil: no tracing). With buckets in GCS, the gateway writes through a
// stores.Router over S3 and GCS, /readyz probes GCS too ("gcs"), and the
// caller closes the GCS clients (closeStores). gwCfg holds the gateway's
// limits; the logger, the probes, the tracer and the test hooks are added
// here, and the token store's group-commit batch sizes are exported on
// the gateway's registry.
func newGatewayWith(ctx context.Context, logger *slog.Logger, client *clientv3.Client, storeCfg tokenstore.Config, s3cfg s3.Config, gwCfg gateway.Config, marks retention.Config, f config.Features, tracer trace.Tracer) (*wiredGateway, error) {
	batches := gateway.NewFenceBatchSizes()
	storeCfg.ObserveFenceBatch = batches.Observe
	store, err := tokenstore.New(client, storeCfg)
	if err != nil {
		return nil, err
	}
	objects, err := s3.New(ctx, s3cfg)
	if err != nil {
		return nil, err
	}
	stores, err := newObjectStores(ctx, objects, f.Buckets)
	if err != nil {
		return nil, err
	}
	gw, err := newGatewayOn(ctx, logger, store, batches, objects, stores, gwCfg, marks, f, tracer)
	if err != nil {
		stores.close()
		return nil, err
	}
	return gw, nil
}

// newGatewayOn is newGatewayWith on the stores built; batches (nil:
// none) are the sizes store's group commit observes.
func newGatewayOn(ctx context.Context, logger *slog.Logger, store *tokenstore.Store, batches *gateway.FenceBatchSizes, objects *s3.Client, stores *objectStores, gwCfg gateway.Config, marks retention.Config, f config.Features, tracer trace.Tracer) (*wiredGateway, error) {
	hooks, err := unsafeTestHooks(os.LookupEnv, logger) // nil unless built with -tags fencegate_unsafe_hooks and FENCEGATE_UNSAFE_TEST_HOOKS is set
	if err != nil {
		return nil, err
	}
	opts := []gateway.Option{gateway.WithLocks(store), gateway.WithInspection(store), gateway.WithConsole(console.Handler()), gateway.WithFenceBatchSizes(batches)}
	for _, warning := range f.Warnings() {
		logger.Warn("config: " + warning)
	}
	if len(f.Partners) > 0 {
		partners, err := tokenstore.NewPartners(store)
		if err != nil {
			return nil, err
		}
		opts = append(opts, gateway.WithPartners(f.Partners, partners, nil))
	}
	if f.Answers.Bucket != "" {
		answers, err := objects.Answers(f.Answers.Bucket, f.Answers.Prefix)
		if err != nil {
			return nil, err
		}
		opts = append(opts, gateway.WithPartnerAnswers(answers))
	}
	if f.Auth != nil {
		opts = append(opts, gateway.WithAuth(*f.Auth))
	}
	uploads, err := tokenstore.NewUploads(store) // multipart uploads in S3 buckets, bound in etcd
	if err != nil {
		return nil, err
	}
	opts = append(opts, gateway.WithMultipart(objects, uploads))
	// Tickets are signed by the S3 backend; the engine refuses them for
	// buckets in GCS (501), whose emulator enforces no signed URL.
	opts = append(opts, gateway.WithTickets(objects))
	gwCfg.Logger = logger
	gwCfg.TestHooks = hooks
	gwCfg.Tracer = tracer
	probes := append([]rest.Probe{
		{Name: "etcd", Ping: store.Ping},
		{Name: api.StoreS3, Ping: objects.Ping},
	}, stores.probes...)
	gwCfg.Readiness = probes
	gwCfg.StoreSpace = func(ctx context.Context) (rest.StoreSpace, error) {
		space, err := store.Space(ctx)
		return rest.StoreSpace{Size: space.Size, InUse: space.InUse, Quota: space.Quota}, err
	}
	gw, err := gateway.New(gwCfg, store, stores.objects, opts...)
	if err != nil {
		return nil, err
	}
	if err := logging.RegisterMetrics(gw.Registry(), logger); err != nil {
		return nil, err
	}
	marks.Logger = logger.With("component", "mark-evictor")
	// The evictor observes through every store; it evicts only marks of
	// S3 objects (s3/...), so those of GCS objects are kept.
	evictor, err := retention.New(marks, store, stores.objects)
	if err != nil {
		return nil, err
	}
	if err := gw.Registry().Register(evictor); err != nil {
		return nil, fmt.Errorf("mark evictor metrics: %w", err)
	}
	return &wiredGateway{Gateway: gw, logger: logger, fences: store, stores: stores, s3: objects, probes: probes, evictor: evictor, maxHeaderBytes: gwCfg.MaxHeaderBytes}, nil
}

// closeStores closes the GCS clients, once the gateway no longer serves.
func (g *wiredGateway) closeStores() { g.stores.close() }

// startEvictor runs the mark evictor until ctx ends or the returned stop
// is called, which waits for it: the evictor's last etcd request ends
// before the etcd client closes.
func (g *wiredGateway) startEvictor(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := g.evictor.Run(ctx); err != nil {
			g.logger.Error("mark evictor stopped", "err", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// probe checks etcd and every store once at start, together, and logs what is not
// ready. A failure is not fatal: /readyz reports it until the dependency
// answers.
func (g *wiredGateway) probe(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range g.probes {
		wg.Go(func() {
			if err := p.Ping(ctx); err != nil {
				g.logger.Warn("dependency not ready yet; /readyz fails until it is", "dependency", p.Name, "err", err)
			}
		})
	}
	wg.Wait()
}
