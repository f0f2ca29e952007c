package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/events"
	"fencegate/fence"
	"fencegate/partners"
	"fencegate/rest"
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
	// gateway-busy and Retry-After, and nothing is written. The bodies
	// read whole before they are parsed (completions, DeleteObjects) and
	// the answers built whole (a multipart ticket's parts) take from it
	// too. It must be at least BufferBytes. Zero means 256 MiB, or
	// BufferBytes if larger.
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
	// edge.Config.AuthRefusalLogRate): lines a second, per
	// status and per open route, with AuthRefusalLogBurst more at once; the
	// lines left out are counted in fencegate_log_lines_suppressed_total
	// and in the next line's suppressed field. The event feed's
	// write.refused events of 401 refusals are limited at the same rate
	// and burst, by a limiter of their own, those left out counted in fencegate_events_suppressed_total. Zero
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
	PartnerIdentityBudget partners.PartnerBudget
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
	// checks the token without raising the mark (see fence.Engine.DeleteFenced), so
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
	Readiness []rest.Probe
	// StoreSpace, when not nil, reads how full the fence store's database
	// (etcd's) is: /metrics exports it, and /readyz warns, still ready,
	// when it is 80% of its quota or more. Nil means neither.
	StoreSpace func(ctx context.Context) (rest.StoreSpace, error)
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
	// TicketExpiry is how long a ticket (POST /v1/tickets, WithTickets)
	// may be used: whole seconds, at most 7 days (SigV4's limit). It is
	// also how long S3's ABA window lasts for a ticket's write
	// (docs/guarantees.md): keep it short. Zero means 15 seconds
	// (api.DefaultTicketExpiry).
	TicketExpiry time.Duration
	// TestHooks lets tests stop a write between protocol steps. Nil in
	// production.
	TestHooks *TestHooks

	// Multipart uploads (WithMultipart; see validate.go).

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
	// UnsafeUnconditionalTicket drops the condition a ticket signs
	// (api.TicketRequest.UnsafeUnconditional): a write on it overwrites
	// whatever version is current when it arrives. It is wrong, and
	// exists so that tests can show that it is: never set it outside a
	// test.
	UnsafeUnconditionalTicket bool
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
		TicketExpiry:         api.DefaultTicketExpiry,
		EventSubscribers:     events.DefaultMaxSubscribers,
		EventBuffer:          events.DefaultBuffer,
		EventHistory:         events.DefaultHistory,
		EventHistoryBytes:    events.DefaultHistoryBytes,
	}
}

// Gateway is fencegate put together: the edge (package edge), the engine
// over the stores (package fence), and the REST API (package rest) with
// the partner routes (package partners) mounted on its router. It serves
// the REST API; the S3 API (package s3api) is built on its Edge and
// Engine. Create it with New.
type Gateway struct {
	cfg    Config
	edge   *edge.Edge
	engine *fence.Engine
	rest   *rest.API
	// What the options were given, for New.
	auth          edge.Auth
	multipart     *multipart
	tickets       TicketSigner
	restOpts      []rest.Option
	partnerRoutes []partners.PartnerRoute
	partnerStore  partners.PartnerStore
	partnerClient *http.Client
	answers       partners.AnswerStore
	batches       *FenceBatchSizes
	// optionErr collects the errors of options with invalid arguments;
	// New returns it.
	optionErr error
}

// Option adds an optional feature to a Gateway, such as a route group.
type Option func(*Gateway)

// New returns a Gateway that checks fences with fences and stores objects
// in objects, with the optional features opts add. It is fencegate's one
// composition root: cmd/fencegate and the tests build the gateway here,
// so that every door runs on the same edge and engine.
func New(cfg Config, fences FenceStore, objects ObjectStore, opts ...Option) (*Gateway, error) {
	if fences == nil || objects == nil {
		return nil, errors.New("gateway: nil fence store or object store")
	}
	if err := cfg.Validate(nil); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	cfg = cfg.withDefaults()
	g := &Gateway{cfg: cfg}
	for _, opt := range opts {
		opt(g)
	}
	if g.optionErr != nil {
		return nil, g.optionErr
	}
	if err := partners.ValidatePartnerGrants(g.partnerRoutes, g.auth); err != nil {
		return nil, fmt.Errorf("gateway: partner routes: %w", err)
	}
	e, err := edge.New(g.edgeConfig())
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if g.batches != nil {
		e.Registry().MustRegister(g.batches.histogram)
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
	stores.Tickets = g.tickets
	engine, err := fence.New(g.engineConfig(), e.Instrument(stores), e, e)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	e.WatchBodyBudget(engine.BufferedBytes, cfg.BufferBudgetBytes)
	restOpts := g.restOpts
	if g.partnerStore != nil { // WithPartners, which refuses a nil store
		p, err := partners.New(partners.Config{Routes: g.partnerRoutes, IdentityBudget: cfg.PartnerIdentityBudget,
			BufferBudgetBytes: cfg.BufferBudgetBytes, BeforeCall: g.hooks().BeforePartnerCall}, e, engine, g.partnerStore, g.answers, g.partnerClient)
		if err != nil {
			return nil, fmt.Errorf("gateway: partner routes: %w", err)
		}
		restOpts = append(restOpts, rest.WithRoutes(partners.Prefix, p.Mount))
	}
	api, err := rest.New(g.restConfig(), e, engine, restOpts...)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.edge, g.engine, g.rest = e, engine, api
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

// ServeHTTP serves the REST API and the partner routes.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.rest.ServeHTTP(w, r) }

// SetDraining makes /readyz fail, so that load balancers stop sending new
// requests while in-flight ones finish. It cannot be undone. It also ends
// the event feed's streams, which would otherwise hold the server's
// Shutdown until its timeout.
func (g *Gateway) SetDraining() { g.rest.SetDraining() }

// hooks returns Config.TestHooks, or none.
func (g *Gateway) hooks() TestHooks {
	if g.cfg.TestHooks == nil {
		return TestHooks{}
	}
	return *g.cfg.TestHooks
}

// restConfig is the REST API's part of the gateway's Config, with its
// defaults.
func (g *Gateway) restConfig() rest.Config {
	c := g.cfg
	return rest.Config{Logger: c.Logger, MaxBodyBytes: c.MaxBodyBytes, MultipartThreshold: c.MultipartThreshold,
		MultipartPartSize: c.MultipartPartSize, MaxMultipartBodyBytes: c.MaxMultipartBodyBytes, MaxLockWaiters: c.MaxLockWaiters,
		ReadinessTimeout: c.ReadinessTimeout, ReadinessCache: c.ReadinessCache, Readiness: c.Readiness, StoreSpace: c.StoreSpace, Now: c.Now}
}

// WithTickets issues tickets (POST /v1/tickets) for S3 buckets, signed by
// signer, the S3 backend: presigned writes that carry the condition and
// the token of the gateway's own conditional write (see
// fence.Engine.Ticket), valid for Config.TicketExpiry. Multipart tickets
// need WithMultipart too. Without it, tickets are 501.
func WithTickets(signer TicketSigner) Option {
	if signer == nil {
		panic("gateway: WithTickets(nil)")
	}
	return func(g *Gateway) { g.tickets = signer }
}

// WithAuth authenticates every request but /healthz, /readyz and /metrics
// (and the console's files) with a's keys and client certificates, and
// authorizes each operation against the identity's grants (401 and 403 as
// problem+json): the edge does both (edge.Edge.Authenticate, Authorize).
// New fails when a is not valid (see edge.Auth.Validate). The zero Auth
// leaves the gateway open, as without WithAuth.
func WithAuth(a edge.Auth) Option {
	return func(g *Gateway) {
		if !a.Enabled() && len(a.Identities) == 0 {
			return
		}
		if err := a.Validate(); err != nil {
			g.optionErr = errors.Join(g.optionErr, fmt.Errorf("gateway: auth: %w", err))
			return
		}
		g.auth = a
	}
}

// WithLocks mounts the lock API on locks (see rest.WithLocks).
func WithLocks(locks rest.LockService) Option {
	return func(g *Gateway) { g.restOpts = append(g.restOpts, rest.WithLocks(locks)) }
}

// WithInspection mounts the listings on store (see rest.WithInspection).
func WithInspection(store rest.Inspector) Option {
	return func(g *Gateway) { g.restOpts = append(g.restOpts, rest.WithInspection(store)) }
}

// WithConsole serves the console's files (see rest.WithConsole).
func WithConsole(ui http.Handler) Option {
	return func(g *Gateway) { g.restOpts = append(g.restOpts, rest.WithConsole(ui)) }
}

// WithPartners mounts ANY /v1/partners/{route}/* for routes, admitted by
// store (see partners.New). New fails if a route is invalid, names
// repeat, or, with WithAuth, a route is left unbound where a grant makes
// it matter (see partners.ValidatePartnerGrants).
func WithPartners(routes []partners.PartnerRoute, store partners.PartnerStore, client *http.Client) Option {
	return func(g *Gateway) {
		if store == nil {
			g.optionErr = errors.Join(g.optionErr, errors.New("gateway: partner routes: nil partner store"))
			return
		}
		g.partnerRoutes, g.partnerStore, g.partnerClient = routes, store, client
	}
}

// WithPartnerAnswers makes the partner routes keep answer bodies larger
// than they keep in etcd in store (see partners.New).
func WithPartnerAnswers(store partners.AnswerStore) Option {
	return func(g *Gateway) { g.answers = store }
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
	hooks := g.hooks()
	return fence.Config{BufferBytes: c.BufferBytes, BufferBudgetBytes: c.BufferBudgetBytes, MaxBodyBytes: c.MaxBodyBytes,
		WriteAttempts: c.WriteAttempts, ETagCacheEntries: c.ETagCacheEntries, ETagCacheMaxAge: c.ETagCacheMaxAge,
		TombstonesForAbsent: c.TombstonesForAbsent, UploadTTL: c.UploadTTL, TicketExpiry: c.TicketExpiry, Now: c.Now,
		Hooks: fence.Hooks{AfterObserve: hooks.AfterObserve, AfterFenceCheck: hooks.AfterFenceCheck,
			UnsafeFenceBeforeObserve: hooks.UnsafeFenceBeforeObserve, UnsafeUnconditionalWrite: hooks.UnsafeUnconditionalWrite,
			UnsafeUnconditionalTicket: hooks.UnsafeUnconditionalTicket}}
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
	cfg.TicketExpiry = cmp.Or(cfg.TicketExpiry, d.TicketExpiry)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg.withMultipartDefaults()
}
