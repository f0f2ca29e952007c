// Package rest is fencegate's REST API, one of its front doors: the chi
// router and the handlers of objects (/v1/objects), tickets and the
// multipart uploads they start (/v1/tickets, /v1/uploads), fences
// (/v1/fences), locks and sessions (/v1/locks, /v1/sessions), inspection
// (/v1/marks, /v1/inspect), the event stream (/v1/events), the console's
// files, and the probes and metrics (/healthz, /readyz, /metrics). Other route
// groups (the partner routes, package partners) are mounted on its router
// and share its middleware (WithRoutes).
//
// Every request passes through the edge first (package edge: Track,
// request size bounds, authentication). Every fenced write runs through
// the engine (package fence), which holds the protocol and its ordering
// argument:
//
//	parse token -> fast reject (cache) -> observe object -> fence check -> conditional write
//
// The door parses its dialect, asks the edge who may do what, calls the
// engine, and maps every error to HTTP in one place (api.ProblemFor,
// answered as problem+json by writeError).
package rest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/fence"
)

// Config holds the REST API's limits. Every limit must be positive but
// those documented otherwise: the caller (package gateway) applies its
// defaults, and New refuses a zero limit rather than serve without one.
type Config struct {
	// Logger receives the door's lines beside the edge's. Nil means
	// slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes is the largest PUT body accepted in one PUT (413
	// beyond).
	MaxBodyBytes int64
	// MultipartThreshold is the largest PUT body (by its Content-Length)
	// sent to S3 in one PUT: a larger one is uploaded in parts of
	// MultipartPartSize, fenced at its completion, when the engine serves
	// multipart uploads, and bounded by MaxMultipartBodyBytes. Negative
	// sends every body in one PUT.
	MultipartThreshold    int64
	MultipartPartSize     int64
	MaxMultipartBodyBytes int64
	// MaxLockWaiters bounds the lock requests with a wait above zero that
	// the door serves at once (503 too-many-waiters beyond). Negative
	// means no limit.
	MaxLockWaiters int
	// ReadinessTimeout bounds each readiness probe; ReadinessCache is how
	// long /readyz reuses a probe's result (and /metrics a StoreSpace
	// reading).
	ReadinessTimeout time.Duration
	ReadinessCache   time.Duration
	// Readiness probes are run by /readyz; all must pass. None: ready.
	Readiness []Probe
	// StoreSpace, when not nil, reads how full the fence store's
	// database (etcd's) is: /metrics exports it, and /readyz warns, still
	// ready, when it is 80% of its quota or more.
	StoreSpace func(ctx context.Context) (StoreSpace, error)
	// Now is the clock of the no-space hints. Nil means time.Now.
	Now func() time.Time
}

// API serves the REST API. Create it with New.
type API struct {
	cfg      Config
	log      *slog.Logger
	edge     *edge.Edge
	engine   *fence.Engine
	draining atomic.Bool
	router   chi.Router
	// readiness caches the probes of /readyz and the StoreSpace reading.
	readiness *readiness
	// mounts add optional route groups (see Option).
	mounts []func(chi.Router)
	// writePrefixes are the path prefixes of route groups whose every
	// request is a write (WithRoutes).
	writePrefixes []string
	// console is true when WithConsole mounted the console's files,
	// which authentication lets through (see ConsolePath).
	console bool
	// lockExpiries publishes lock.expired and lock.revoked on the feed
	// while anyone subscribes; nil without a source (lockexpiry.go).
	lockExpiries *lockExpiryFeed
	// lookups holds a token per lock state read in flight, which counts a
	// lock event's waiters (maxWaiterLookups).
	lookups chan struct{}
}

// Option adds an optional feature to the API, such as a route group.
type Option func(*API)

// New returns the REST API on e and engine, with the optional features
// opts add. It fails when a limit of cfg is zero.
func New(cfg Config, e *edge.Edge, engine *fence.Engine, opts ...Option) (*API, error) {
	if e == nil || engine == nil {
		return nil, errors.New("rest: nil edge or engine")
	}
	for _, f := range []struct {
		name string
		n    int64
	}{
		{"MaxBodyBytes", cfg.MaxBodyBytes}, {"MultipartThreshold", cfg.MultipartThreshold}, {"MultipartPartSize", cfg.MultipartPartSize},
		{"MaxMultipartBodyBytes", cfg.MaxMultipartBodyBytes}, {"MaxLockWaiters", int64(cfg.MaxLockWaiters)},
		{"ReadinessTimeout", int64(cfg.ReadinessTimeout)}, {"ReadinessCache", int64(cfg.ReadinessCache)},
	} {
		if f.n == 0 {
			return nil, fmt.Errorf("rest: Config.%s is zero", f.name)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	g := &API{cfg: cfg, log: cfg.Logger, edge: e, engine: engine, readiness: newReadiness(cfg), lookups: make(chan struct{}, maxWaiterLookups)}
	if g.readiness.space != nil {
		e.Registry().MustRegister(newSpaceCollector(g.readiness))
	}
	for _, opt := range opts {
		opt(g)
	}
	g.router = g.routes()
	return g, nil
}

// WithRoutes mounts another route group on the API's router, under its
// middleware (the edge's Track, size bounds and authentication): the
// partner routes (package partners), whose every request, under prefix,
// is a write, audited when refused.
func WithRoutes(prefix string, mount func(chi.Router)) Option {
	return func(g *API) {
		g.mounts = append(g.mounts, mount)
		g.writePrefixes = append(g.writePrefixes, prefix)
	}
}

// Routes returns the API's routes, for what lists or matches them (the
// checks of the OpenAPI document against the router).
func (g *API) Routes() chi.Routes { return g.router }

// ServeHTTP serves the REST API.
func (g *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.router.ServeHTTP(w, r) }

// SetDraining makes /readyz fail, so that load balancers stop sending new
// requests while in-flight ones finish. It cannot be undone.
// It also ends the event feed's streams, which would otherwise hold the
// server's Shutdown until its timeout.
func (g *API) SetDraining() {
	g.draining.Store(true)
	g.edge.Close()
}

// door is the REST API as the edge tracks it: its routes label its
// requests, a client's X-Request-Id is its id, and its path and
// X-Fence-Token name what it is about.
func (g *API) door() edge.Door {
	return edge.Door{Route: g.routeOf, RequestIDHeader: true, Subject: g.requestSubject}
}

func (g *API) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(g.edge.Track(g.door()), g.edge.LimitRequestSize(g.writeError), g.edge.Authenticate(g.ConsolePath, g.writeError))
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
	r.With(g.edge.LimitPerClient(g.writeError)).Post("/v1/tickets/{bucket}/*", g.postTicket)
	r.Route("/v1/uploads/{bucket}", func(r chi.Router) {
		r.Use(g.edge.LimitPerClient(g.writeError))
		r.Post("/*", g.completeUpload)
		r.Delete("/*", g.abortUpload)
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
func (g *API) routeOf(r *http.Request) string {
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
func (g *API) requestSubject(r *http.Request) (api.Resource, api.Token) {
	var resource api.Resource
	if path, err := g.objectPath(r); err == nil {
		resource = path.Resource()
	}
	token, _ := api.ParseTokenHeader(r.Header.Values(api.HeaderFenceToken))
	return resource, token
}

// isWrite reports whether r asks to change something fenced: a PUT or
// DELETE of an object, a ticket's POST, an upload's completion or abort,
// or any request of a route group mounted as writes
// (WithRoutes: the partner routes, which may change the partner's state).
// Its refusals are audited (edge.Edge.NoteProblem).
func (g *API) isWrite(r *http.Request) bool {
	if strings.HasPrefix(r.URL.Path, objectsPrefix) {
		return r.Method == http.MethodPut || r.Method == http.MethodDelete
	}
	if strings.HasPrefix(r.URL.Path, ticketsPrefix) {
		return r.Method == http.MethodPost
	}
	if strings.HasPrefix(r.URL.Path, uploadsPrefix) {
		return r.Method == http.MethodPost || r.Method == http.MethodDelete
	}
	for _, prefix := range g.writePrefixes {
		if strings.HasPrefix(r.URL.Path, prefix) {
			return true
		}
	}
	return false
}
