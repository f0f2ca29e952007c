package gateway

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"fencegate/api"
)

// Audit: every write that the gateway refuses for a reason an operator
// must be able to account for (a stale token, a token check, 401 or 403,
// an idempotency conflict) gets one structured log line at WARN,
// auditMessage, in the same slog stream as the access log, and one count
// in fencegate_refused_writes_total. Both happen in noteProblem, which
// writeError calls for every problem answered: the one place that knows
// the problem.

// auditMessage is the msg of audit lines.
const auditMessage = "write refused"

// noteProblem records the problem p answered for err: in the request's
// outcome (the problem label of fencegate_requests_total), in the stale
// refusals counter, and, when it refused a write for an audited reason,
// in the audit log and fencegate_refused_writes_total. It reports whether
// it wrote the audit line.
func (g *Gateway) noteProblem(r *http.Request, p api.Problem, err error) bool {
	ctx := r.Context()
	slug := strings.TrimPrefix(p.Type, api.ProblemTypePrefix)
	o := outcomeOf(ctx)
	if o != nil {
		o.problem = slug
	}
	if errors.Is(err, api.ErrStaleToken) {
		source := staleFromEtcd
		if o != nil && o.staleSource != "" {
			source = o.staleSource
		}
		g.metrics.staleRefusals.WithLabelValues(source).Inc()
	}
	if !isWrite(r) || !audited(p, err) {
		return false
	}
	g.metrics.refusedWrites.WithLabelValues(slug).Inc()
	resource, token := auditSubject(r, p, err, o)
	attrs := make([]slog.Attr, 0, 11)
	attrs = append(attrs, slog.String("resource", string(resource)))
	if token != 0 {
		attrs = append(attrs, slog.Uint64("token", uint64(token)))
	}
	if p.HighWaterMark != 0 {
		attrs = append(attrs, slog.Uint64("high_water_mark", uint64(p.HighWaterMark)))
	}
	attrs = append(attrs,
		slog.String("identity", callerName(ctx)),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", p.Status),
		slog.String("problem_type", p.Type),
		slog.String("detail", p.Detail),
		slog.String("request_id", requestID(ctx)),
	)
	// The gateway's logger, not the request's: the line names every
	// attribute once, whatever the request's logger carries.
	g.log.LogAttrs(context.WithoutCancel(ctx), slog.LevelWarn, auditMessage, attrs...)
	return true
}

// isWrite reports whether r asks to change something fenced: a PUT or
// DELETE of an object, or any partner request (it may change the
// partner's state).
func isWrite(r *http.Request) bool {
	switch {
	case strings.HasPrefix(r.URL.Path, objectsPrefix):
		return r.Method == http.MethodPut || r.Method == http.MethodDelete
	case strings.HasPrefix(r.URL.Path, partnersPrefix):
		return true
	}
	return false
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
// from the problem, else the refusal's detail, else what the fence store
// was asked, else the request itself (an object path, a valid
// X-Fence-Token). Either may stay empty (zero), as on a 401 for a path
// that is no object's.
func auditSubject(r *http.Request, p api.Problem, err error, o *outcome) (api.Resource, api.Token) {
	resource, token := p.Resource, p.Token
	var notHeld *api.LockNotHeldError
	if errors.As(err, &notHeld) {
		resource, token = cmp.Or(resource, notHeld.Resource), cmp.Or(token, notHeld.Token)
	}
	if o != nil {
		resource, token = cmp.Or(resource, o.resource), cmp.Or(token, o.token)
	}
	if resource == "" {
		if path, err := objectPath(r); err == nil {
			resource = path.Resource()
		}
	}
	if token == 0 {
		if t, err := api.ParseTokenHeader(r.Header.Values(api.HeaderFenceToken)); err == nil {
			token = t
		}
	}
	return resource, token
}
