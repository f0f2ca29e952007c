package edge

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"fencegate/api"
)

// Audit: every write that the gateway refuses for a reason an operator
// must be able to account for (a stale token, a token check, 401 or 403,
// an idempotency conflict) gets one structured log line at WARN,
// auditMessage, and one count in fencegate_refused_writes_total.
// NoteProblem, which a door calls for every problem it answers (the one
// place that knows the problem), counts it and puts the line's own fields
// in the request's exchange; Track writes the line when the request ends,
// in place of its access line (exchange.go). NoteRefusal is the same for
// a door that answers several decisions in one request: it writes the
// audit line at once.

// auditMessage is the msg of audit lines.
const auditMessage = "write refused"

// NoteProblem records the problem p that a door answered r with, for
// err: in the request's exchange (the problem label of
// fencegate_requests_total), in the stale refusals counter, and, when r
// was a write (write) refused for an audited reason, in
// fencegate_refused_writes_total, on the event feed (write.refused), and
// in the exchange's audit fields. subject, when not nil, names the
// resource and token r names, where neither the problem nor a fence check
// named them. It reports whether the request is audited.
func (e *Edge) NoteProblem(r *http.Request, p api.Problem, err error, write bool, subject func(*http.Request) (api.Resource, api.Token)) bool {
	ctx := r.Context()
	slug := strings.TrimPrefix(p.Type, api.ProblemTypePrefix)
	o := exchangeOf(ctx)
	if o != nil {
		o.problem = slug
	}
	if errors.Is(err, api.ErrStaleToken) {
		e.metrics.staleRefusals.WithLabelValues(staleCaught(o)).Inc()
	}
	if !write || !audited(p, err) {
		return false
	}
	e.metrics.refusedWrites.WithLabelValues(slug).Inc()
	if o == nil { // outside Track: no line to write
		return true
	}
	resource, token := auditSubject(r, p, err, o, subject)
	e.publishRefused(p, err, o, resource, token)
	attrs := refusalAttrs(make([]slog.Attr, 0, 16), p, resource, token) // and Track's 7, a door's 2 and suppressed
	o.audit = append(attrs,
		slog.String("problem_type", p.Type),
		slog.String("detail", p.Detail),
	)
	return true
}

// NoteRefusal records a refusal that a door answered for one decision
// of its request, as NoteProblem does, but that it logs at once: a stale
// token counts in fencegate_stale_refusals_total (by where it was found),
// and a write refused for an audited reason (a stale token, a token
// check, 401, 403) counts in fencegate_refused_writes_total, is published
// on the event feed (write.refused), and gets the audit line ("write
// refused", at WARN) with the resource, the token, the mark, the problem
// type, the request id, the identity and the door. write says whether the
// request was a write; resource and token are what it named (either may
// be zero). ctx is the request's, from WithIdentity.
func (e *Edge) NoteRefusal(ctx context.Context, write bool, resource api.Resource, token api.Token, err error) {
	p := api.ProblemFor(err)
	x := exchangeOf(ctx)
	if x != nil && x.resource == "" {
		// What the request named, for its span, when no fence check
		// noted what it checked (a refusal before one).
		x.resource, x.token = resource, token
	}
	if errors.Is(err, api.ErrStaleToken) {
		e.metrics.staleRefusals.WithLabelValues(staleCaught(x)).Inc()
	}
	if !write || !audited(p, err) {
		return
	}
	slug := strings.TrimPrefix(p.Type, api.ProblemTypePrefix)
	e.metrics.refusedWrites.WithLabelValues(slug).Inc()
	if p.Resource != "" {
		resource, token = p.Resource, p.Token
	}
	if x != nil {
		e.publishRefused(p, err, x, resource, token)
	}
	suppressed, ok := e.authLines.allow(p.Status) // 401 and 403 cost the sender nothing
	if !ok {
		e.metrics.suppressedLines.WithLabelValues(slug).Inc()
		return
	}
	attrs := refusalAttrs(make([]slog.Attr, 0, 9), p, resource, token)
	door := ""
	if x != nil {
		door = x.api
	}
	attrs = append(attrs, slog.String("problem_type", p.Type), slog.String("detail", api.Truncate(p.Detail, api.MaxEchoBytes)),
		slog.String("request_id", RequestID(ctx)), slog.String("identity", CallerName(ctx)), slog.String("api", door))
	if suppressed > 0 {
		attrs = append(attrs, slog.Uint64("suppressed", suppressed))
	}
	e.log.LogAttrs(context.WithoutCancel(ctx), slog.LevelWarn, auditMessage, attrs...)
}

// staleCaught names where the stale token of the request whose exchange
// is x (nil: none) was caught, as the engine noted it (StaleFound): the
// label of fencegate_stale_refusals_total and a write.refused event's
// caught; the fence check's transaction when nothing else was noted.
func staleCaught(x *exchange) string {
	if x != nil && x.staleSource != "" {
		return x.staleSource
	}
	return staleFromEtcd
}

// refusalAttrs appends to attrs what an audit line says of the refused
// write: its resource, and its token and the resource's mark when known.
func refusalAttrs(attrs []slog.Attr, p api.Problem, resource api.Resource, token api.Token) []slog.Attr {
	attrs = append(attrs, slog.String("resource", string(resource)))
	if token != 0 {
		attrs = append(attrs, slog.Uint64("token", uint64(token)))
	}
	if p.HighWaterMark != 0 {
		attrs = append(attrs, slog.Uint64("high_water_mark", uint64(p.HighWaterMark)))
	}
	return attrs
}

// audited reports whether a write refused with p (for err) is audited:
// token refusals, authentication and authorization failures, and
// idempotency conflicts. Malformed requests and failures are not: they are
// in the access log and fencegate_requests_total.
func audited(p api.Problem, err error) bool {
	switch {
	case p.Status == http.StatusUnauthorized, p.Status == http.StatusForbidden:
		return true
	case refusal(err):
		return true
	case errors.Is(err, api.ErrIdempotencyInFlight), errors.Is(err, api.ErrIdempotencyMismatch):
		return true
	}
	return false
}

// auditSubject finds the resource and token a refused write was about:
// from the problem, else the refusal's detail, else the request's subject
// (requestSubject). Either may stay empty (zero), as on a 401 for a path
// that is no object's.
func auditSubject(r *http.Request, p api.Problem, err error, o *exchange, subject func(*http.Request) (api.Resource, api.Token)) (api.Resource, api.Token) {
	resource, token := p.Resource, p.Token
	var notHeld *api.LockNotHeldError
	if errors.As(err, &notHeld) {
		resource, token = cmp.Or(resource, notHeld.Resource), cmp.Or(token, notHeld.Token)
	}
	if resource != "" && token != 0 {
		return resource, token
	}
	rr, rt := requestSubject(r, o, subject)
	return cmp.Or(resource, rr), cmp.Or(token, rt)
}

// requestSubject returns the resource and token the request was checked
// for (NoteChecked), else those that subject finds in the request, as
// for a stale token refused from the cached mark, which is never checked.
// Either may be zero.
func requestSubject(r *http.Request, x *exchange, subject func(*http.Request) (api.Resource, api.Token)) (api.Resource, api.Token) {
	var resource api.Resource
	var token api.Token
	if x != nil {
		resource, token = x.resource, x.token
	}
	if (resource == "" || token == 0) && subject != nil {
		sr, st := subject(r)
		resource, token = cmp.Or(resource, sr), cmp.Or(token, st)
	}
	return resource, token
}

// Log lines of the answers a client gets without credentials are
// limited: 401 and 403, and 414 and 431, which refuse a request target or
// header block too large before authentication has looked at it. A client
// can send such requests as fast as the network carries them (16,000 a
// second from one client were measured), and a line each would make the
// log, not the gateway, the limit. Each status has a token bucket
// (Config.AuthRefusalLogRate, AuthRefusalLogBurst); a line that finds its
// bucket empty is left out and counted, in
// fencegate_log_lines_suppressed_total and in the suppressed field of the
// next line of that status. A bucket per status, not one for all, keeps
// a flood of 401s from hiding the 403s of known identities; one for all
// clients, not one per address, keeps the limiter's memory and the log's
// rate bounded however many addresses send. The metrics count every
// request, logged or not (fencegate_refused_writes_total,
// fencegate_requests_total).

//
// The routes open to anyone (openPaths: /healthz, /readyz, /metrics) are
// limited the same way, a bucket each, whatever their status: they need
// no credential either, so a flood of probes would otherwise write a line
// each (35 MiB of log in 15 s, measured by make abuse's readyz-flood). A
// load balancer's or Prometheus's few requests a second stay well within
// the rate.

// limitedLineStatuses are the statuses whose lines lineLimiter limits.
var limitedLineStatuses = [...]int{
	http.StatusUnauthorized,
	http.StatusForbidden,
	http.StatusRequestURITooLong,
	http.StatusRequestHeaderFieldsTooLarge,
}

// limitedLinePaths are openPaths in a fixed order, whose buckets follow
// those of limitedLineStatuses.
var limitedLinePaths = slices.Sorted(maps.Keys(openPaths))

// lineLimiter is a token bucket for each of limitedLineStatuses, then
// each of limitedLinePaths.
type lineLimiter struct {
	now   func() time.Time
	rate  float64 // tokens a second
	burst float64

	mu      sync.Mutex
	buckets []lineBucket
}

type lineBucket struct {
	tokens     float64
	last       time.Time // when tokens was last brought up to date
	suppressed uint64    // lines left out since the last one written
}

// newLineLimiter returns a limiter of rate lines a second and burst at
// once, on the clock now, or nil (no limit) when rate is negative.
func newLineLimiter(now func() time.Time, rate float64, burst int) *lineLimiter {
	if rate < 0 {
		return nil
	}
	l := &lineLimiter{now: now, rate: rate, burst: float64(burst), buckets: make([]lineBucket, len(limitedLineStatuses)+len(limitedLinePaths))}
	for i := range l.buckets {
		l.buckets[i].tokens = l.burst
	}
	return l
}

// allow reports whether the line of an answer with status may be
// written, and how many lines of that status were left out since the
// last one written, which the line reports. Statuses other than
// limitedLineStatuses are always allowed. A nil limiter allows every
// line.
func (l *lineLimiter) allow(status int) (suppressed uint64, ok bool) {
	return l.take(slices.Index(limitedLineStatuses[:], status))
}

// allowOpen is allow for a request to path: the bucket of one of
// limitedLinePaths, whatever the answer's status, or allow(status) for
// any other path.
func (l *lineLimiter) allowOpen(path string, status int) (suppressed uint64, ok bool) {
	if i := slices.Index(limitedLinePaths, path); i >= 0 {
		return l.take(len(limitedLineStatuses) + i)
	}
	return l.allow(status)
}

// take takes a token from bucket i; i < 0 (no bucket) always allows.
func (l *lineLimiter) take(i int) (suppressed uint64, ok bool) {
	if l == nil || i < 0 {
		return 0, true
	}
	b := &l.buckets[i]
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if b.last.IsZero() {
		b.last = now
	}
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(l.burst, b.tokens+elapsed.Seconds()*l.rate)
		b.last = now
	}
	if b.tokens < 1 {
		b.suppressed++
		return 0, false
	}
	b.tokens--
	suppressed, b.suppressed = b.suppressed, 0
	return suppressed, true
}
