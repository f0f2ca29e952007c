// Package edge owns what every front door of fencegate does to an HTTP
// request, whatever its dialect: who is asking (identities, their
// credentials and grants), how much one request and one client may take
// (the target and header bounds, the per-client limit, the transfer
// deadlines of bodies), the request's id and exchange, its one access or
// audit log line, its metrics, its trace, and the decisions and refusals
// it publishes on the event feed.
//
// No door lives here. A door (the REST API, the S3 API, the partner
// routes) parses its dialect, calls the engine (package fence), and
// answers in its own dialect; it asks the edge to track the request
// (Track), to check who may do what (Authorize), and to note what it
// refused (NoteProblem, NoteRefusal). The edge is also the engine's
// Authorizer and Monitor, and wraps the engine's stores with the
// decorators that time, count and trace their round trips (Instrument).
package edge

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"fencegate/api"
	"fencegate/events"
	"fencegate/fence"
)

// Config holds the edge's limits. Zero fields take the defaults
// documented on each.
type Config struct {
	// Logger receives access logs, audit lines and errors. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Auth holds the identities, their grants and credentials. The zero
	// Auth leaves every door open: every request may do everything.
	Auth Auth
	// MaxHeaderBytes is the largest request header block (431 beyond).
	// Zero means DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// MaxTargetBytes is the longest request target, the path and query
	// as sent (414 beyond, before routing or authentication). Zero means
	// DefaultMaxTargetBytes.
	MaxTargetBytes int
	// AuthRefusalLogRate bounds the log lines of requests refused 401,
	// 403, 414 or 431, and of requests to the open routes (OpenPath),
	// which clients without credentials can send at no cost: lines a
	// second, per status and per open route, with AuthRefusalLogBurst
	// more at once; the lines left out are counted in
	// fencegate_log_lines_suppressed_total and in the next line's
	// suppressed field. The event feed's write.refused events of 401
	// refusals are limited at the same rate and burst, by a limiter of
	// their own, those left out counted in
	// fencegate_events_suppressed_total. Zero means
	// DefaultAuthRefusalLogRate; negative means no limit.
	AuthRefusalLogRate float64
	// AuthRefusalLogBurst is the limiters' burst. Zero means
	// DefaultAuthRefusalLogBurst.
	AuthRefusalLogBurst int
	// MaxRequestsPerClient bounds the requests that one client may have
	// in flight at once on the routes a door puts under LimitPerClient,
	// and through LimitClient: 429 too-many-requests beyond. Zero means
	// no limit.
	MaxRequestsPerClient int
	// TransferChunkTimeout is the minimum transfer rate of object bodies
	// to and from clients: each chunk of 64 KiB must be taken by a client
	// reading, or arrive from a client sending, within it (CopyToClient,
	// WatchBody). Zero means DefaultTransferChunkTimeout.
	TransferChunkTimeout time.Duration
	// Tracer, when not nil, traces every request: a server span per
	// request, continuing the client's W3C traceparent, with client spans
	// of its etcd and S3 requests and partner calls as children. Nil
	// means no tracing, at no cost.
	Tracer trace.Tracer
	// Now is the clock of the limiters of log lines and events. Nil means
	// time.Now.
	Now func() time.Time
	// EventSubscribers, EventBuffer, EventHistory and EventHistoryBytes
	// configure the event feed (see events.Config; zero fields take its
	// defaults).
	EventSubscribers  int
	EventBuffer       int
	EventHistory      int
	EventHistoryBytes int64
}

// The defaults of Config's zero fields.
const (
	DefaultMaxHeaderBytes = 64 << 10
	DefaultMaxTargetBytes = 8 << 10
	// 10 lines a second of 401 (and of 403), 20 at once: enough to see
	// who is knocking, bounded whatever the rate of the knocks.
	DefaultAuthRefusalLogRate  = 10
	DefaultAuthRefusalLogBurst = 20
	// 64 KiB in 10 seconds, 6.4 KiB a second.
	DefaultTransferChunkTimeout = 10 * time.Second
)

// Edge serves every door's requests. Create it with New.
type Edge struct {
	cfg Config
	log *slog.Logger
	// auth authenticates and authorizes requests; nil without
	// credentials or identities (everything is allowed).
	auth    *authenticator
	metrics *metrics
	// perClient counts each client's requests in flight; nil when
	// Config.MaxRequestsPerClient is zero.
	perClient *clientCounts
	// authLines limits the log lines of 401, 403, 414 and 431 answers and
	// of the open routes (audit.go); nil when Config.AuthRefusalLogRate is
	// negative.
	authLines *lineLimiter
	events    *eventFeed
	tracing   *tracing
	// multipart counts multipart uploads; nil until Instrument is given
	// their stores.
	multipart *multipartMetrics
	// noSpaceHints limits how often the edge logs what to do when etcd is
	// out of space (LogProblem).
	noSpaceHints everyInterval
}

var (
	_ fence.Authorizer = (*Edge)(nil)
	_ fence.Monitor    = (*Edge)(nil)
)

// New returns the edge that cfg describes. It fails when cfg.Auth is not
// valid (see Auth.Validate).
func New(cfg Config) (*Edge, error) {
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.MaxHeaderBytes = cmp.Or(cfg.MaxHeaderBytes, DefaultMaxHeaderBytes)
	cfg.MaxTargetBytes = cmp.Or(cfg.MaxTargetBytes, DefaultMaxTargetBytes)
	cfg.AuthRefusalLogRate = cmp.Or(cfg.AuthRefusalLogRate, DefaultAuthRefusalLogRate)
	cfg.AuthRefusalLogBurst = cmp.Or(cfg.AuthRefusalLogBurst, DefaultAuthRefusalLogBurst)
	cfg.TransferChunkTimeout = cmp.Or(cfg.TransferChunkTimeout, DefaultTransferChunkTimeout)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	e := &Edge{cfg: cfg, log: cfg.Logger, metrics: newMetrics(),
		authLines: newLineLimiter(cfg.Now, cfg.AuthRefusalLogRate, cfg.AuthRefusalLogBurst)}
	if cfg.Auth.Enabled() || len(cfg.Auth.Identities) > 0 {
		auth, err := newAuthenticator(cfg.Auth)
		if err != nil {
			return nil, fmt.Errorf("edge: %w", err)
		}
		e.auth = auth
	}
	if cfg.MaxRequestsPerClient > 0 {
		e.perClient = &clientCounts{max: cfg.MaxRequestsPerClient, n: make(map[string]int)}
	}
	if cfg.Tracer != nil {
		e.tracing = &tracing{tracer: cfg.Tracer}
	}
	e.events = newEventFeed(cfg, e.metrics)
	return e, nil
}

// Registry returns the edge's metrics registry, which a door serves on
// GET /metrics (MetricsHandler). Every Edge has its own: tests build many
// in one process. Callers may register more collectors on it.
func (e *Edge) Registry() *prometheus.Registry { return e.metrics.registry }

// MetricsHandler serves the registry in Prometheus' exposition formats.
func (e *Edge) MetricsHandler() http.Handler { return e.metrics.handler() }

// Events returns the event feed's hub, which a door streams from and
// publishes its own decisions to (locks, partner admissions).
func (e *Edge) Events() *events.Hub { return e.events.hub }

// Close ends the event feed's streams, which would otherwise hold a
// server's Shutdown until its timeout.
func (e *Edge) Close() { e.events.hub.Close() }

// Logger returns a logger that adds the request's id to each line. It is
// made when asked for, as few requests log more than their one line.
func (e *Edge) Logger(ctx context.Context) *slog.Logger {
	if id := RequestID(ctx); id != "" {
		return e.log.With("request_id", id)
	}
	return e.log
}

// RequestID returns the id of the request of ctx (Track, WithIdentity),
// "" when none.
func RequestID(ctx context.Context) string {
	if x := exchangeOf(ctx); x != nil {
		return x.id
	}
	return ""
}

// Authorize reports whether the identity of ctx may do op to resource:
// nil, or an error of class api.ErrForbidden (api.ErrUnauthorized when
// the request was never authenticated: fail closed). Without auth it
// always allows. It is the engine's Authorizer too.
func (e *Edge) Authorize(ctx context.Context, op Operation, resource api.Resource) error {
	return e.AuthorizeIdentity(Caller(ctx), op, resource)
}

// AuthEnabled reports whether the edge authorizes requests by identity.
// Without it every identity may do everything.
func (e *Edge) AuthEnabled() bool { return e.auth != nil }

// StaleFound notes where the request's stale token was found (the
// engine's Monitor).
func (e *Edge) StaleFound(ctx context.Context, source string) { NoteStaleSource(ctx, source) }

// WriteAccepted publishes an object write the engine accepted.
func (e *Edge) WriteAccepted(ctx context.Context, res fence.WriteResult) {
	e.publishObject(ctx, events.KindWriteAccepted, res.Resource, res.Token, res.ETag, res.Created)
}

// TicketIssued publishes a ticket the engine issued (ticket.issued): the
// fence check that raised the mark, not a write, which the gateway never
// sees.
func (e *Edge) TicketIssued(ctx context.Context, t fence.IssuedTicket) {
	e.publishObject(ctx, events.KindTicketIssued, t.Resource, t.Token, "", true)
}

// DeleteAccepted publishes an object delete the engine accepted.
func (e *Edge) DeleteAccepted(ctx context.Context, resource api.Resource, token api.Token) {
	e.publishObject(ctx, events.KindDeleteAccepted, resource, token, "", false)
}

// BodyRefused counts a body refused because the budget of buffered
// bodies had no room.
func (e *Edge) BodyRefused() { e.metrics.bodyBudgetRefusals.Inc() }

// UploadCreated, UploadCompleted, UploadAborted and PartRefusedStale
// count multipart uploads (after InstrumentMultipart; before it there are
// none).
func (e *Edge) UploadCreated() { e.multipart.created.Inc() }

func (e *Edge) UploadCompleted() { e.multipart.completed.Inc() }

func (e *Edge) UploadAborted(reason string) { e.multipart.aborted.WithLabelValues(reason).Inc() }

func (e *Edge) PartRefusedStale() { e.multipart.partsStale.Inc() }
