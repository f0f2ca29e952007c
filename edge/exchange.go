package edge

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"fencegate/api"
)

// Track, first in a door's chain, gives every request an id and an
// exchange, and when the request ends it counts and times it (metrics.go),
// ends its span when it is traced (tracing.go) and writes its one log
// line. That line is the access log line ("request", at INFO), or, for a
// write refused for an audited reason, the audit line ("write refused",
// at WARN, audit.go), which carries the access line's fields too. One
// line a request keeps the cost of logging a stale refusal, the cheapest
// request the gateway serves, at one formatted record. A door that
// answers several decisions in one request (the S3 API's DeleteObjects)
// notes each refusal with NoteRefusal, which writes its own audit line
// beside the access line.

// exchange is what the gateway learns of one request while serving it.
// Track makes one per request and puts it in the
// request's context; the authentication middleware, the handlers and the
// store decorators fill it (one goroutine per request: no locking); the
// metrics and the log line read it when the request ends.
type exchange struct {
	// id is the request id, the client's X-Request-Id when valid.
	id string
	// identity is the authenticated caller, nil until authenticated (and
	// without auth).
	identity *Identity
	// problem is the slug of the problem answered, "" when none.
	problem string
	// staleSource is where a stale refusal came from (staleFrom...),
	// "" for the fence check in etcd.
	staleSource string
	// resource and token are the last ones checked, for the audit line.
	resource api.Resource
	token    api.Token
	// audit holds the audit line's own attributes once a write was
	// refused for an audited reason (noteProblem); nil otherwise.
	audit []slog.Attr
	// tracing starts the request's client spans (tracing.go); nil when
	// tracing is off. A pointer, not the interface, keeps the exchange in
	// its allocation size class.
	tracing *tracing
	// decision is what the event feed notes (events.go).
	decision decisionNote
	// start is when the request arrived (its accepted writes' latency).
	start time.Time
	// api names the front door of a request that is not the REST API's
	// ("s3": Door.Name), "" for REST; operation is that door's name
	// of what the request does ("PutObject"), its route label.
	api, operation string
	// identified is set once WithIdentity named the request's caller: a
	// second call makes a new exchange (one goroutine per exchange).
	identified bool
}

type exchangeKey struct{}

// withExchange returns ctx carrying x.
func withExchange(ctx context.Context, x *exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, x)
}

// exchangeOf returns the request's exchange, or nil outside the track
// middleware (in unit tests of single handlers).
func exchangeOf(ctx context.Context) *exchange {
	x, _ := ctx.Value(exchangeKey{}).(*exchange)
	return x
}

// Door describes a front door to Track.
type Door struct {
	// Name names the door in its access lines ("api") and prefixes its
	// route labels: a request of door "s3" is labelled "s3:" and the
	// operation its handler noted (NoteOperation), "s3:PutObject". ""
	// is the REST API, whose routes label themselves (Route).
	Name string
	// Route returns the route label of a request from its routing (the
	// REST API's chi pattern), called when the request ends; nil labels
	// it by its operation, as above. A request refused 414 is never
	// looked at: its label is "none".
	Route func(*http.Request) string
	// RequestIDHeader takes a client's valid X-Request-Id as the
	// request's id, and answers the id in X-Request-Id.
	RequestIDHeader bool
	// Subject returns the resource and token that a request names (its
	// path, its X-Fence-Token), for its span and its audit line where no
	// fence check noted what it checked; nil: the exchange's alone.
	Subject func(*http.Request) (api.Resource, api.Token)
}

// Track returns the middleware that tracks the requests of door: see the
// comment at the top of the file. With a tracer, it also starts and ends
// the request's server span (tracing.go).
func (e *Edge) Track(door Door) func(http.Handler) http.Handler {
	m := e.metrics
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			m.inFlight.Inc()
			defer m.inFlight.Dec()
			x := &exchange{start: start, api: door.Name}
			if door.RequestIDHeader {
				if x.id = r.Header.Get(headerRequestID); !validRequestID(x.id) {
					x.id = newRequestID()
				}
				w.Header().Set(headerRequestID, x.id)
			} else {
				x.id = newRequestID()
			}
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			ctx, span := e.tracing.begin(r, x)
			next.ServeHTTP(ww, r.WithContext(ctx))
			elapsed := time.Since(start)
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK // nothing written: net/http answers 200
			}
			route, method := routeNone, methodLabel(r.Method)
			switch {
			case door.Route == nil:
				route = door.Name + ":" + cmp.Or(x.operation, routeNone)
			case status != http.StatusRequestURITooLong: // not routed: its path is too long to look at
				route = door.Route(r)
			}
			m.requests.WithLabelValues(route, method, statusClass(status), x.problem).Inc()
			m.requestDuration.WithLabelValues(route, method).Observe(elapsed.Seconds())
			if span != nil {
				e.endRequestSpan(span, r, x, door, route, status)
			}
			e.logExchange(ctx, r, x, status, ww.BytesWritten(), start, elapsed)
			e.publishForwarded(x, status, start.Add(elapsed), elapsed)
		})
	}
}

// NoteOperation records what a request of a door that labels its
// requests by operation (Door.Route nil) is: its route label and its
// access line's operation. op must come from a fixed set of names (the
// S3 operations'), never from the request, so that the metrics' series
// stay bounded.
func NoteOperation(ctx context.Context, op string) {
	if x := exchangeOf(ctx); x != nil {
		x.operation = op
	}
}

// NoteErrorCode records the error a door answered its request with, as
// a code of a fixed set (S3's "StaleFenceToken", "SlowDown", ...): the
// problem label of fencegate_requests_total. A door that answers
// problems (NoteProblem) needs not call it.
func NoteErrorCode(ctx context.Context, code string) {
	if x := exchangeOf(ctx); x != nil {
		x.problem = code
	}
}

// logExchange writes the request's one line. The line of a 401 or 403
// answer may be left out by the limit on their rate (audit.go), and the
// path is cut to api.MaxEchoBytes.
func (e *Edge) logExchange(ctx context.Context, r *http.Request, x *exchange, status, bytes int, start time.Time, elapsed time.Duration) {
	level, msg := slog.LevelInfo, "request"
	if x.audit != nil {
		level, msg = slog.LevelWarn, auditMessage
	}
	ctx = context.WithoutCancel(ctx)
	if !e.log.Enabled(ctx, level) {
		return
	}
	suppressed, ok := e.authLines.allowOpen(r.URL.Path, status)
	if !ok {
		reason := x.problem
		if openPaths[r.URL.Path] {
			reason = strings.TrimPrefix(r.URL.Path, "/")
		}
		e.metrics.suppressedLines.WithLabelValues(reason).Inc()
		return
	}
	attrs := x.audit
	if attrs == nil {
		// Room for the seven below, a door's two and suppressed: one
		// allocation, not two.
		attrs = make([]slog.Attr, 0, 10)
	}
	attrs = append(attrs,
		slog.String("request_id", x.id),
		slog.String("method", r.Method),
		slog.String("path", api.Truncate(r.URL.Path, api.MaxEchoBytes)),
		slog.Int("status", status),
		slog.Int("bytes", bytes),
		slog.Duration("duration", elapsed),
		slog.String("identity", x.identity.name()),
	)
	if x.api != "" {
		attrs = append(attrs, slog.String("api", x.api), slog.String("operation", x.operation))
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Uint64("suppressed", suppressed))
	}
	// The record is handed to the handler as slog.Logger.LogAttrs would,
	// but without the caller's pc, which the line does not show and which
	// costs a stack walk per request; its time is the request's end.
	record := slog.NewRecord(start.Add(elapsed), level, msg, 0)
	record.AddAttrs(attrs...)
	_ = e.log.Handler().Handle(ctx, record)
}
