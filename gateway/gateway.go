package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/events"
	"fencegate/fence"
)

// Config holds the gateway's limits and knobs. Zero fields take the
// defaults documented on each.
type Config struct {
	// Logger receives access logs and errors. Nil means slog.Default().
	Logger *slog.Logger
	// BufferBytes is the largest body that is held in memory so that a
	// write that loses a race (412) can be retried. Larger bodies stream
	// to S3 unbuffered, and a lost race on them is a retryable 409. Zero
	// means 8 MiB.
	BufferBytes int64
	// BufferBudgetBytes bounds the memory that the bodies being buffered
	// (see BufferBytes) take, all requests' together. A body is reserved
	// from it as its bytes arrive, a chunk at a time, and given back when
	// its request ends; a body that finds no room is refused with 503
	// gateway-busy and Retry-After, and nothing is written. It must be at
	// least BufferBytes. Zero means 256 MiB, or BufferBytes if larger.
	BufferBudgetBytes int64
	// MaxBodyBytes is the largest body accepted at all (413 beyond), but
	// for REST PUTs uploaded in parts (see MultipartThreshold), which
	// MaxMultipartBodyBytes bounds. Zero means 5 GiB, S3's limit for a
	// single PUT.
	MaxBodyBytes int64
	// MaxHeaderBytes is the largest request header block (431 beyond).
	// Zero means 64 KiB. The http.Server's own MaxHeaderBytes should be
	// larger, so that this limit answers first with a problem body.
	MaxHeaderBytes int
	// MaxTargetBytes is the longest request target, the path and query
	// as sent (414 beyond, before routing or authentication). Zero means
	// 8 KiB.
	MaxTargetBytes int
	// AuthRefusalLogRate bounds the log lines of requests refused 401,
	// 403, 414 or 431, and of requests to /healthz, /readyz and /metrics,
	// which clients without credentials can send at no cost (see
	// limitedLineStatuses and limitedLinePaths): lines a second, per
	// status and per open route, with AuthRefusalLogBurst more at once; the
	// lines left out are counted in fencegate_log_lines_suppressed_total
	// and in the next line's suppressed field. The event feed's
	// write.refused events of 401 refusals are limited at the same rate
	// and burst, by a limiter of their own (eventFeed.unauthenticated),
	// those left out counted in fencegate_events_suppressed_total. Zero
	// means 10; negative means no limit.
	AuthRefusalLogRate float64
	// AuthRefusalLogBurst is the limiters' burst. Zero means 20.
	AuthRefusalLogBurst int
	// MaxLockWaiters bounds the lock requests (POST /v1/locks/{name}
	// with a wait above zero) that this gateway serves at once: past it
	// a request with a wait is answered 503 too-many-waiters at once,
	// before any etcd request. Requests with wait 0 do not count. Zero
	// means 1000; negative means no limit.
	MaxLockWaiters int
	// TransferChunkTimeout is the minimum transfer rate of object bodies
	// to and from clients: each chunk of TransferChunkBytes must be taken
	// by a client reading a GET, or arrive from a client sending a PUT,
	// within it. A client that is slower is cut off, and its S3 request
	// ended, so that it gives back its S3 connection. Zero means 10
	// seconds (6.4 KiB a second).
	TransferChunkTimeout time.Duration
	// MaxRequestsPerClient bounds the object requests (/v1/objects/) that
	// one client may have in flight at once: 429 too-many-requests, with
	// Retry-After, beyond. A client is its identity when auth is on, else
	// its remote address's host. Zero means no limit.
	MaxRequestsPerClient int
	// PartnerIdentityBudget bounds what the completed idempotency
	// records of each identity ("" without auth is one), over every
	// partner route, may hold in etcd (see PartnerBudget). Zero fields
	// take PartnerBudget's defaults.
	PartnerIdentityBudget PartnerBudget
	// WriteAttempts bounds observe-fence-write rounds per request when the
	// write loses a race to another writer. Zero means 3.
	WriteAttempts int
	// ETagCacheEntries bounds the cache of the versions this gateway's own
	// writes left (see package fence), which lets a write skip the HEAD of
	// protocol step 3. Zero means 65536; negative turns the cache off, so
	// that every write observes with a HEAD.
	ETagCacheEntries int
	// ETagCacheMaxAge bounds the age of the versions the ETag cache
	// serves: an entry learned this long ago or longer is not used, and
	// the write observes with a HEAD. Where high-water marks are evicted
	// (package retention), set it below the marks' retention: half of it
	// (retention.Config.ETagCacheMaxAge). Zero means 10 minutes;
	// negative means no bound, which is safe only where no mark is ever
	// evicted.
	ETagCacheMaxAge time.Duration
	// TombstonesForAbsent makes a DELETE of an object that is not there
	// raise the resource's high-water mark to its token, as every other
	// accepted write does, leaving a tombstone for ever: no writer with a
	// smaller token can create the object afterwards. False (the default)
	// checks the token without raising the mark (see deleteObject), so
	// that deletes of keys that never existed take no etcd space.
	TombstonesForAbsent bool
	// ReadinessTimeout bounds each readiness probe, so that /readyz
	// answers in time even when a dependency does not. Zero means 1
	// second.
	ReadinessTimeout time.Duration
	// ReadinessCache is how long /readyz reuses a probe's result (and
	// /metrics a StoreSpace reading): each dependency is probed at most
	// once per period, however often /readyz is called, and concurrent
	// callers share one probe. Zero means 1 second.
	ReadinessCache time.Duration
	// Readiness probes are run by /readyz; all must pass.
	Readiness []Probe
	// StoreSpace, when not nil, reads how full the fence store's database
	// (etcd's) is: /metrics exports it, and /readyz warns, still ready,
	// when it is 80% of its quota or more. Nil means neither.
	StoreSpace func(ctx context.Context) (StoreSpace, error)
	// Tracer, when not nil, traces every request: a server span per
	// request, continuing the client's W3C traceparent, with client spans
	// of its etcd and S3 requests and partner calls as children, and the
	// traceparent sent on to partners. Nil means no tracing, at no cost.
	Tracer trace.Tracer
	// Now is the clock of the limiter of refusal log lines (see
	// AuthRefusalLogRate) and of the ETag cache's ages (see
	// ETagCacheMaxAge). Nil means time.Now; tests set a clock of their
	// own.
	Now func() time.Time
	// EventSubscribers bounds the subscribers of the event feed (GET
	// /v1/events) at once; more are answered 503 gateway-busy. Zero means
	// 64.
	EventSubscribers int
	// EventBuffer is how many events each subscriber's buffer holds; a
	// subscriber that falls further behind loses events, counted, and is
	// told how many (docs/events.md). Zero means 1024.
	EventBuffer int
	// EventHistory is how many of its newest decisions the gateway keeps
	// for the feed's new subscribers, and for those that resume after a
	// dropped connection (Last-Event-ID). Zero means 10,000; negative
	// keeps none: the feed is live only.
	EventHistory int
	// EventHistoryBytes bounds the memory of those decisions. Zero means
	// 8 MiB.
	EventHistoryBytes int64
	// TestHooks lets tests stop a write between protocol steps. Nil in
	// production.
	TestHooks *TestHooks

	// Multipart uploads (WithMultipart; see multipart.go).

	// MultipartThreshold is the largest REST PUT body (by its
	// Content-Length) sent to S3 in one PUT: a larger one is uploaded as
	// a multipart upload fenced at its completion, and is bounded by
	// MaxMultipartBodyBytes instead of MaxBodyBytes. It applies with
	// WithMultipart, to S3 buckets. Zero means 64 MiB; negative sends
	// every body in one PUT.
	MultipartThreshold int64
	// MultipartPartSize is the size of the parts of those uploads (the
	// last may be smaller): 5 MiB to 5 GiB. Zero means 16 MiB.
	MultipartPartSize int64
	// MaxMultipartBodyBytes is the largest REST PUT body uploaded in
	// parts (413 beyond). It may not exceed 10,000 parts. Zero means
	// 10,000 parts of MultipartPartSize (156.25 GiB at 16 MiB).
	MaxMultipartBodyBytes int64
	// UploadTTL is how long the binding of a multipart upload to its
	// resource and token lives in etcd when the upload is neither
	// completed nor aborted: an upload abandoned longer cannot be
	// continued or completed through the gateway (404), and takes no
	// etcd space. Zero means 24 hours.
	UploadTTL time.Duration
}

// TestHooks are points in the write path where tests can pause a request
// or change the protocol on purpose, to show that the order matters.
type TestHooks struct {
	// AfterObserve runs after the object's version is observed, before
	// the fence check.
	AfterObserve func(ctx context.Context, resource api.Resource, token api.Token)
	// AfterFenceCheck runs after the fence check accepted the token,
	// before the conditional write.
	AfterFenceCheck func(ctx context.Context, resource api.Resource, token api.Token)
	// BeforePartnerCall runs after a partner request was admitted, before
	// the check that its in-flight marker outlives the call and the call
	// itself.
	BeforePartnerCall func(ctx context.Context, resource api.Resource, token api.Token)
	// UnsafeFenceBeforeObserve swaps the protocol's steps 3 and 4 (fence
	// check first, then observe). It is wrong, and exists so that tests
	// can show that it is: never set it outside a test.
	UnsafeFenceBeforeObserve bool
	// UnsafeUnconditionalWrite drops the conditional write of step 5: the
	// PUT carries no condition (api.PutObjectInput.UnsafeUnconditional),
	// so it overwrites whatever version is current. It is wrong, and
	// exists so that tests can show that it is: never set it outside a
	// test.
	UnsafeUnconditionalWrite bool
}

const (
	defaultBufferBytes = 8 << 20
	// 32 bodies of the default buffer at once, or many more smaller ones.
	defaultBufferBudgetBytes = 256 << 20
	defaultMaxBodyBytes      = 5 << 30
	defaultWriteAttempts     = 3
	defaultReadinessTimeout  = time.Second
	defaultReadinessCache    = time.Second
)

// defaultMaxLockWaiters is Config.MaxLockWaiters' default: a thousand
// lock requests that may wait, each of which costs about three
// goroutines, 30 KiB of heap and an etcd watch while it waits.
const defaultMaxLockWaiters = 1000

// defaultMaxRequestsPerClient is DefaultConfig's MaxRequestsPerClient:
// half the S3 pool's default 256 connections, so that no one client can
// hold them all.
const defaultMaxRequestsPerClient = 128

// DefaultConfig returns the limits that New gives the zero fields of a
// Config, written out, as a command's flags show them as defaults; and
// MaxRequestsPerClient 128 (half the S3 pool's default 256 connections,
// so that no one client can hold them all), where New's zero is no
// limit. Logger, Readiness, StoreSpace, Tracer, Now and TestHooks are
// nil; MaxMultipartBodyBytes is zero (10,000 parts).
func DefaultConfig() Config {
	return Config{
		BufferBytes:          defaultBufferBytes,
		BufferBudgetBytes:    defaultBufferBudgetBytes,
		MaxBodyBytes:         defaultMaxBodyBytes,
		MaxHeaderBytes:       edge.DefaultMaxHeaderBytes,
		MaxTargetBytes:       edge.DefaultMaxTargetBytes,
		AuthRefusalLogRate:   edge.DefaultAuthRefusalLogRate,
		AuthRefusalLogBurst:  edge.DefaultAuthRefusalLogBurst,
		MaxLockWaiters:       defaultMaxLockWaiters,
		TransferChunkTimeout: edge.DefaultTransferChunkTimeout,
		MaxRequestsPerClient: defaultMaxRequestsPerClient,
		WriteAttempts:        defaultWriteAttempts,
		ETagCacheEntries:     fence.DefaultETagCacheEntries,
		ETagCacheMaxAge:      fence.DefaultETagCacheMaxAge,
		ReadinessTimeout:     defaultReadinessTimeout,
		ReadinessCache:       defaultReadinessCache,
		MultipartThreshold:   defaultMultipartThreshold,
		MultipartPartSize:    defaultMultipartPartSize,
		UploadTTL:            defaultUploadTTL,
		EventSubscribers:     events.DefaultMaxSubscribers,
		EventBuffer:          events.DefaultBuffer,
		EventHistory:         events.DefaultHistory,
		EventHistoryBytes:    events.DefaultHistoryBytes,
	}
}

// Gateway serves fencegate's HTTP API. Create it with New.
type Gateway struct {
	cfg Config
	log *slog.Logger
	// edge tracks, authenticates, limits, logs, counts, traces and
	// publishes every request (package edge).
	edge *edge.Edge
	// engine runs the fencing protocol over the fence store and the
	// object store, behind the edge's decorators that time, count and
	// trace their round trips.
	engine   *fence.Engine
	hooks    TestHooks
	draining atomic.Bool
	router   chi.Router
	// readiness caches the probes of /readyz and the StoreSpace reading.
	readiness *readiness
	// noSpaceHints limits how often the gateway logs what to do when
	// etcd is out of space.
	noSpaceHints everyInterval
	// answers keeps partner answers' bodies (WithPartnerAnswers); nil:
	// none.
	answers AnswerStore
	// mounts add optional route groups (see Option).
	mounts []func(chi.Router)
	// withEdge holds what the options do once the edge exists (register
	// their metrics, subscribe to its feed), in their order.
	withEdge []func()
	// auth is what WithAuth was given; identities and partnerRoutes are
	// kept for the check that needs both (ValidatePartnerGrants).
	auth          edge.Auth
	partnerRoutes []PartnerRoute
	// console is true when WithConsole mounted the console's files,
	// which authentication lets through (see consoleAsset).
	console bool
	// multipart holds the stores WithMultipart was given; nil without.
	multipart *multipart
	// lockExpiries publishes lock.expired and lock.revoked on the feed
	// while anyone subscribes; nil without a source (lockexpiry.go).
	lockExpiries *lockExpiryFeed
	// lookups holds a token per lock state read in flight, which counts a
	// lock event's waiters (maxWaiterLookups).
	lookups chan struct{}
	// optionErr collects the errors of options with invalid arguments;
	// New returns it.
	optionErr error
}

// Option adds an optional feature to a Gateway, such as a route group.
type Option func(*Gateway)

// New returns a Gateway that checks fences with fences and stores objects
// in objects, with the optional features opts add.
func New(cfg Config, fences FenceStore, objects ObjectStore, opts ...Option) (*Gateway, error) {
	if fences == nil || objects == nil {
		return nil, errors.New("gateway: nil fence store or object store")
	}
	if err := cfg.Validate(nil); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	cfg = cfg.withDefaults()
	g := &Gateway{cfg: cfg, log: cfg.Logger, readiness: newReadiness(cfg), lookups: make(chan struct{}, maxWaiterLookups)}
	if cfg.TestHooks != nil {
		g.hooks = *cfg.TestHooks
	}
	for _, opt := range opts {
		opt(g)
	}
	if g.optionErr != nil {
		return nil, g.optionErr
	}
	e, err := edge.New(g.edgeConfig())
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.edge = e
	if g.readiness.space != nil {
		e.Registry().MustRegister(newSpaceCollector(g.readiness))
	}
	for _, f := range g.withEdge {
		f()
	}
	if g.optionErr != nil {
		return nil, g.optionErr
	}
	// The stores are wrapped with the edge's decorators: the fence checks
	// and S3 requests are timed, counted and traced without touching the
	// write path.
	buckets, _ := objects.(BucketStores)
	tags, _ := objects.(TagReader)
	stores := fence.Stores{Fences: fences, Objects: objects, Buckets: buckets, Tags: tags}
	if g.multipart != nil {
		stores.Multipart, stores.Uploads = g.multipart.store, g.multipart.uploads
	}
	engine, err := fence.New(g.engineConfig(), e.Instrument(stores), e, e)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.engine = engine
	e.WatchBodyBudget(engine.BufferedBytes, cfg.BufferBudgetBytes)
	if err := ValidatePartnerGrants(g.partnerRoutes, g.auth); err != nil {
		return nil, fmt.Errorf("gateway: partner routes: %w", err)
	}
	g.router = g.routes()
	return g, nil
}

// Edge returns the gateway's edge, which another door (package s3api)
// serves its requests through, so that the identities, limits, logs,
// metrics and event feed of every door are one.
func (g *Gateway) Edge() *edge.Edge { return g.edge }

// Engine returns the gateway's engine, which another door runs its
// fenced operations with, so that the ETag cache and the body budget of
// every door are one.
func (g *Gateway) Engine() *fence.Engine { return g.engine }

// Registry returns the gateway's metrics registry, which GET /metrics
// serves. Callers may register more collectors on it.
func (g *Gateway) Registry() *prometheus.Registry { return g.edge.Registry() }

// ServeHTTP serves the gateway's API.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.router.ServeHTTP(w, r) }

// SetDraining makes /readyz fail, so that load balancers stop sending new
// requests while in-flight ones finish. It cannot be undone.
// It also ends the event feed's streams, which would otherwise hold the
// server's Shutdown until its timeout.
func (g *Gateway) SetDraining() {
	g.draining.Store(true)
	g.edge.Close()
}

// door is the REST API as the edge tracks it: its routes label its
// requests, a client's X-Request-Id is its id, and its path and
// X-Fence-Token name what it is about.
func (g *Gateway) door() edge.Door {
	return edge.Door{Route: g.routeOf, RequestIDHeader: true, Subject: g.requestSubject}
}

func (g *Gateway) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(g.edge.Track(g.door()), g.edge.LimitRequestSize(g.writeError), g.edge.Authenticate(g.consoleAsset, g.writeError))
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		g.writeError(w, r, fmt.Errorf("%w: no route for %s", api.ErrNotFound, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		g.writeError(w, r, fmt.Errorf("%w: %s %s", api.ErrMethodNotAllowed, r.Method, r.URL.Path))
	})
	r.Get("/healthz", g.healthz)
	r.Get("/readyz", g.readyz)
	r.Method(http.MethodGet, "/metrics", g.edge.MetricsHandler()) // open: authentication exempts it
	r.Route("/v1/objects/{bucket}", func(r chi.Router) {
		r.Use(g.edge.LimitPerClient(g.writeError))
		r.Put("/*", g.putObject)
		r.Delete("/*", g.deleteObject)
		r.Get("/*", g.getObject)
		r.Head("/*", g.getObject)
	})
	r.Get("/v1/fences/*", g.getFence)
	r.Get(eventsPath, g.serveEvents)
	for _, mount := range g.mounts {
		mount(r)
	}
	return r
}

// routeOf returns the pattern of the route that r matched, or that it
// would have matched had it been routed, or "none".
func (g *Gateway) routeOf(r *http.Request) string {
	if route := chi.RouteContext(r.Context()).RoutePattern(); route != "" {
		return route
	}
	path := r.URL.RawPath // what chi routes on
	if path == "" {
		path = r.URL.Path
	}
	rctx := chi.NewRouteContext()
	if g.router != nil && g.router.Match(rctx, r.Method, path) {
		if route := rctx.RoutePattern(); route != "" {
			return route
		}
	}
	return "none"
}

// requestSubject returns the resource and token that r names: those of
// its object path and valid X-Fence-Token. Either may be zero.
func (g *Gateway) requestSubject(r *http.Request) (api.Resource, api.Token) {
	var resource api.Resource
	if path, err := g.objectPath(r); err == nil {
		resource = path.Resource()
	}
	token, _ := api.ParseTokenHeader(r.Header.Values(api.HeaderFenceToken))
	return resource, token
}

// edgeConfig is the edge's part of the gateway's Config, with its
// defaults, and what WithAuth gave it.
func (g *Gateway) edgeConfig() edge.Config {
	c := g.cfg
	return edge.Config{Logger: c.Logger, Auth: g.auth, MaxHeaderBytes: c.MaxHeaderBytes, MaxTargetBytes: c.MaxTargetBytes,
		AuthRefusalLogRate: c.AuthRefusalLogRate, AuthRefusalLogBurst: c.AuthRefusalLogBurst,
		MaxRequestsPerClient: c.MaxRequestsPerClient, TransferChunkTimeout: c.TransferChunkTimeout, Tracer: c.Tracer, Now: c.Now,
		EventSubscribers: c.EventSubscribers, EventBuffer: c.EventBuffer, EventHistory: c.EventHistory, EventHistoryBytes: c.EventHistoryBytes}
}

// engineConfig is the engine's part of the gateway's Config, with its
// defaults.
func (g *Gateway) engineConfig() fence.Config {
	c := g.cfg
	return fence.Config{BufferBytes: c.BufferBytes, BufferBudgetBytes: c.BufferBudgetBytes, MaxBodyBytes: c.MaxBodyBytes,
		WriteAttempts: c.WriteAttempts, ETagCacheEntries: c.ETagCacheEntries, ETagCacheMaxAge: c.ETagCacheMaxAge,
		TombstonesForAbsent: c.TombstonesForAbsent, UploadTTL: c.UploadTTL, Now: c.Now,
		Hooks: fence.Hooks{AfterObserve: g.hooks.AfterObserve, AfterFenceCheck: g.hooks.AfterFenceCheck,
			UnsafeFenceBeforeObserve: g.hooks.UnsafeFenceBeforeObserve, UnsafeUnconditionalWrite: g.hooks.UnsafeUnconditionalWrite}}
}

// withDefaults returns cfg with its zero fields set to their defaults
// (DefaultConfig's, but MaxRequestsPerClient, whose zero is no limit).
func (cfg Config) withDefaults() Config {
	d := DefaultConfig()
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.BufferBytes = cmp.Or(cfg.BufferBytes, d.BufferBytes)
	cfg.BufferBudgetBytes = cmp.Or(cfg.BufferBudgetBytes, max(d.BufferBudgetBytes, cfg.BufferBytes))
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, d.MaxBodyBytes)
	cfg.MaxHeaderBytes = cmp.Or(cfg.MaxHeaderBytes, d.MaxHeaderBytes)
	cfg.MaxTargetBytes = cmp.Or(cfg.MaxTargetBytes, d.MaxTargetBytes)
	cfg.AuthRefusalLogRate = cmp.Or(cfg.AuthRefusalLogRate, d.AuthRefusalLogRate)
	cfg.AuthRefusalLogBurst = cmp.Or(cfg.AuthRefusalLogBurst, d.AuthRefusalLogBurst)
	cfg.WriteAttempts = cmp.Or(cfg.WriteAttempts, d.WriteAttempts)
	cfg.MaxLockWaiters = cmp.Or(cfg.MaxLockWaiters, d.MaxLockWaiters)
	cfg.ETagCacheEntries = cmp.Or(cfg.ETagCacheEntries, d.ETagCacheEntries)
	cfg.ETagCacheMaxAge = cmp.Or(cfg.ETagCacheMaxAge, d.ETagCacheMaxAge)
	cfg.TransferChunkTimeout = cmp.Or(cfg.TransferChunkTimeout, d.TransferChunkTimeout)
	cfg.ReadinessTimeout = cmp.Or(cfg.ReadinessTimeout, d.ReadinessTimeout)
	cfg.ReadinessCache = cmp.Or(cfg.ReadinessCache, d.ReadinessCache)
	cfg.EventSubscribers = cmp.Or(cfg.EventSubscribers, d.EventSubscribers)
	cfg.EventBuffer = cmp.Or(cfg.EventBuffer, d.EventBuffer)
	cfg.EventHistory = cmp.Or(cfg.EventHistory, d.EventHistory)
	cfg.EventHistoryBytes = cmp.Or(cfg.EventHistoryBytes, d.EventHistoryBytes)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg.withMultipartDefaults()
}
