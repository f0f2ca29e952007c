package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"fencegate/api"
)

// The track middleware, first in the chain, gives every request an id and
// an exchange, and when the request ends it counts and times it
// (metrics.go), ends its span when it is traced (tracing.go) and writes
// its one log line. That line is the access log line ("request", at
// INFO), or, for a write refused for an audited reason, the audit line
// ("write refused", at WARN, audit.go), which carries the access line's
// fields too. One line a request keeps the cost of logging a stale
// refusal, the cheapest request the gateway serves, at one formatted
// record. Another front door's requests are tracked alike by
// TrackRequests (s3door.go), but for the audit line, which NoteRefusal
// writes beside the access line.

// exchange is what the gateway learns of one request while serving it.
// The track middleware makes one per request and puts it in the
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
	// ("s3": TrackRequests), "" for REST; operation is that door's name
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

// requestID returns the request's id, "" outside the middleware.
func requestID(ctx context.Context) string {
	if x := exchangeOf(ctx); x != nil {
		return x.id
	}
	return ""
}

// logger returns a logger that adds the request's id to each line. It is
// made when asked for, as few requests log more than their one line.
func (g *Gateway) logger(ctx context.Context) *slog.Logger {
	if id := requestID(ctx); id != "" {
		return g.log.With("request_id", id)
	}
	return g.log
}

// track is the first middleware: see the comment at the top of the file.
// With a tracer, it also starts and ends the request's server span
// (tracing.go).
func (g *Gateway) track(next http.Handler) http.Handler {
	m := g.metrics
	tracer := g.newTracing()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inFlight.Inc()
		defer m.inFlight.Dec()
		x := &exchange{id: r.Header.Get(headerRequestID), start: start}
		if !validRequestID(x.id) {
			x.id = newRequestID()
		}
		w.Header().Set(headerRequestID, x.id)
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		ctx, span := tracer.begin(r, x)
		next.ServeHTTP(ww, r.WithContext(ctx))
		elapsed := time.Since(start)
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK // nothing written: net/http answers 200
		}
		route, method := routeNone, methodLabel(r.Method)
		if status != http.StatusRequestURITooLong { // not routed: its path is too long to look at
			route = g.routeOf(r)
		}
		m.requests.WithLabelValues(route, method, statusClass(status), x.problem).Inc()
		m.requestDuration.WithLabelValues(route, method).Observe(elapsed.Seconds())
		if span != nil {
			g.endRequestSpan(span, r, x, route, status)
		}
		g.logExchange(ctx, r, x, status, ww.BytesWritten(), start, elapsed)
		g.publishForwarded(r, x, status, start.Add(elapsed), elapsed)
	})
}

// logExchange writes the request's one line. The line of a 401 or 403
// answer may be left out by the limit on their rate (audit.go), and the
// path is cut to api.MaxEchoBytes.
func (g *Gateway) logExchange(ctx context.Context, r *http.Request, x *exchange, status, bytes int, start time.Time, elapsed time.Duration) {
	level, msg := slog.LevelInfo, "request"
	if x.audit != nil {
		level, msg = slog.LevelWarn, auditMessage
	}
	ctx = context.WithoutCancel(ctx)
	if !g.log.Enabled(ctx, level) {
		return
	}
	suppressed, ok := g.authLines.allowOpen(r.URL.Path, status)
	if !ok {
		reason := x.problem
		if openPaths[r.URL.Path] {
			reason = strings.TrimPrefix(r.URL.Path, "/")
		}
		g.metrics.suppressedLines.WithLabelValues(reason).Inc()
		return
	}
	attrs := append(x.audit,
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
	_ = g.log.Handler().Handle(ctx, record)
}
