package gateway

// What the gateway gives a second front door, the S3 API (package s3api):
// the same fencing protocol (fast reject, observe, fence check,
// conditional write, bounded retry, the ETag cache), the same
// authorization of identities by their grants, and the same reads, as
// functions of a request that the door has parsed from its own dialect.
// The fenced operations delegate to the engine (package fence), which the
// REST handlers (objects.go) call too; nothing of the protocol is written
// twice.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"fencegate/api"
	"fencegate/fence"
)

// CheckRequestSize applies the REST API's bounds on a request's target
// (Config.MaxTargetBytes: api.ErrTargetTooLong) and header block
// (Config.MaxHeaderBytes: api.ErrHeadersTooLarge), which a front door
// checks first, before it reads anything else of the request.
func (g *Gateway) CheckRequestSize(r *http.Request) error {
	if err := g.checkTarget(r); err != nil {
		return err
	}
	return g.checkHeaders(r)
}

// ObjectPath validates bucket and key (api.ParseObjectPath) and names the
// bucket's store (StoreOf), for the REST routes'
// /v1/objects/{bucket}/{key} as for the S3 API. Failures are
// api.ErrInvalidObjectPath.
func (g *Gateway) ObjectPath(bucket, key string) (api.ObjectPath, error) {
	p, err := api.ParseObjectPath(bucket, key)
	if err != nil {
		return p, err
	}
	p.Store = g.StoreOf(bucket)
	return p, nil
}

// ObjectResource names the resource of key in bucket as every front door
// names it: "<store>/<bucket>/<key>", in the store that holds the bucket
// (StoreOf), so that an object of a GCS bucket is "gcs/..." whichever
// API asked. Fence checks, authorization, audit lines and the event feed
// all take an object's resource from here (or from ObjectPath, for a
// path already validated): a refusal named "s3/..." for a GCS bucket
// would go to the subscribers who may read S3 objects, and not to those
// who may read the bucket. bucket and key are not validated: a refusal
// names what the request named; key "" names the bucket's prefix (a
// DeleteObjects refused whole).
func (g *Gateway) ObjectResource(bucket, key string) api.Resource {
	return api.ObjectPath{Store: g.StoreOf(bucket), Bucket: bucket, Key: key}.Resource()
}

// StoreOf names the store that holds bucket: api.StoreS3, or what the
// gateway's BucketStores says (api.StoreGCS).
func (g *Gateway) StoreOf(bucket string) string { return g.engine.StoreOf(bucket) }

// AuthEnabled reports whether the gateway authorizes requests by
// identity (WithAuth with credentials). Without it every identity may do
// everything, as on the REST API.
func (g *Gateway) AuthEnabled() bool { return g.auth != nil }

// TrackRequests wraps the handler of another front door, whose name door
// is ("s3"), as the track middleware wraps the REST routes
// (exchange.go): each request gets an id (RequestID) and an exchange, is
// counted in fencegate_requests_in_flight while it is served, and when it
// ends in fencegate_requests_total and fencegate_request_duration_seconds
// with the route label door + ":" + its operation (NoteOperation; "none"
// until one is noted) and the problem label its error code
// (NoteErrorCode), and gets one access log line ("request", at INFO)
// with its id, method, path, status, bytes, duration, identity, api and
// operation. The path is the URL's, never its query (a presigned URL's
// signature); no header is logged. Lines of 401 and 403 answers are
// limited as the REST API's are (Config.AuthRefusalLogRate). With a
// tracer (Config.Tracer), each request gets a server span as a REST one
// does (tracing.go), named by its route label ("s3:PutObject").
//
// The door's handlers call WithIdentity with the context it gives them,
// so that the identity, the problem and the fenced writes' decisions are
// noted in the request's own exchange.
func (g *Gateway) TrackRequests(door string, next http.Handler) http.Handler {
	m := g.metrics
	tracer := g.newTracing()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inFlight.Inc()
		defer m.inFlight.Dec()
		x := &exchange{id: newRequestID(), start: start, api: door}
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		ctx, span := tracer.begin(r, x)
		next.ServeHTTP(ww, r.WithContext(ctx))
		elapsed := time.Since(start)
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK // nothing written: net/http answers 200
		}
		route, method := door+":"+cmp.Or(x.operation, routeNone), methodLabel(r.Method)
		m.requests.WithLabelValues(route, method, statusClass(status), x.problem).Inc()
		m.requestDuration.WithLabelValues(route, method).Observe(elapsed.Seconds())
		if span != nil {
			g.endRequestSpan(span, r, x, route, status)
		}
		g.logExchange(ctx, r, x, status, ww.BytesWritten(), start, elapsed)
	})
}

// RequestID returns the id of the request of ctx (TrackRequests,
// WithIdentity), "" when none.
func RequestID(ctx context.Context) string { return requestID(ctx) }

// NoteOperation records what a front door's request (TrackRequests) is:
// its route label and its access line's operation. op must come from a
// fixed set of names (the S3 operations'), never from the request, so
// that the metrics' series stay bounded.
func NoteOperation(ctx context.Context, op string) {
	if x := exchangeOf(ctx); x != nil {
		x.operation = op
	}
}

// NoteErrorCode records the error a front door answered its request
// with, as a code of a fixed set (S3's "StaleFenceToken", "SlowDown",
// ...): the problem label of fencegate_requests_total.
func NoteErrorCode(ctx context.Context, code string) {
	if x := exchangeOf(ctx); x != nil {
		x.problem = code
	}
}

// WithIdentity returns ctx for a request that a front door authenticated
// as the identity named name: Authorize, PutFenced and the others then
// check that identity's grants, exactly as for a REST request by one of
// its API keys. The context carries the request's id (requestID) for the
// gateway's log lines. Without auth the name is only recorded; with
// auth, a name the auth config does not define is api.ErrUnauthorized,
// so that a key store and the auth config that disagree fail closed.
//
// Under TrackRequests the identity is noted in the request's exchange.
// A context already identified gets an exchange of its own, of the same
// request: one per goroutine that serves a part of it (the keys of a
// DeleteObjects), since the gateway notes what a request checked in its
// exchange without locking.
func (g *Gateway) WithIdentity(ctx context.Context, name, requestID string) (context.Context, error) {
	var id *Identity
	if g.auth != nil {
		if id = g.auth.identityNamed(name); id == nil {
			return ctx, fmt.Errorf("%w: identity %q is not in the auth config", api.ErrUnauthorized, name)
		}
	}
	x := exchangeOf(ctx)
	if x == nil || x.identified {
		own := &exchange{id: requestID}
		if x != nil {
			// The tracer too: the round trips of each part are children
			// of the request's span, which ctx carries.
			own.start, own.api, own.operation, own.tracing = x.start, x.api, x.operation, x.tracing
		}
		x, ctx = own, withExchange(ctx, own)
	}
	if requestID != "" {
		x.id = requestID
	}
	x.identity, x.identified = id, true
	return ctx, nil
}

// LimitClient counts a request of another front door, authenticated as
// the identity named name, against Config.MaxRequestsPerClient, as the
// REST API's object requests are (limitPerClient): it returns the
// function that counts it out, or api.ErrTooManyRequests when the
// identity already has that many requests in flight. An identity's
// requests through every front door count against one budget. A front
// door calls it once the request's signature is verified: a request that
// only names an identity's access key must not take from its budget.
// Without a limit it always admits.
func (g *Gateway) LimitClient(name string) (release func(), err error) {
	if g.perClient == nil {
		return func() {}, nil
	}
	client := "identity:" + name
	if !g.perClient.acquire(client) {
		return nil, fmt.Errorf("%w: %d requests of this client in flight", api.ErrTooManyRequests, g.perClient.max)
	}
	return func() { g.perClient.release(client) }, nil
}

// Authorize reports whether the identity of ctx (WithIdentity) may do op
// to resource: nil, or an error of class api.ErrForbidden. Without auth
// it always allows.
func (g *Gateway) Authorize(ctx context.Context, op Operation, resource api.Resource) error {
	return g.authorize(ctx, op, resource)
}

// AuthorizeAny reports whether the identity of ctx may do op to at least
// one resource whose name starts with prefix: a grant covers all of
// prefix, or a part of it (its own prefix starts with prefix). A front
// door asks it where a request names a container of resources without
// reading any one of them (HeadBucket, GetBucketLocation). Without auth it
// always allows.
func (g *Gateway) AuthorizeAny(ctx context.Context, op Operation, prefix string) error {
	if g.auth == nil {
		return nil
	}
	id := callerIdentity(ctx)
	if id == nil {
		return fmt.Errorf("authorize %s under %q: %w: request not authenticated", op, prefix, api.ErrUnauthorized)
	}
	for _, gr := range id.Grants {
		if gr.allows(op) && (strings.HasPrefix(prefix, gr.Prefix) || strings.HasPrefix(gr.Prefix, prefix)) {
			return nil
		}
	}
	return fmt.Errorf("%w: identity %q may not %s anything under %q", api.ErrForbidden, id.Name, op, prefix)
}

// PutRequest is one fenced write of an object, as a front door parsed it
// (see fence.PutRequest).
type PutRequest = fence.PutRequest

// PutFenced is the fenced write that PUT /v1/objects/... runs, for a
// request of another front door (see fence.Engine.PutFenced).
func (g *Gateway) PutFenced(ctx context.Context, in PutRequest) (WriteResult, error) {
	return g.engine.PutFenced(ctx, in)
}

// DeleteFenced is the fenced delete that DELETE /v1/objects/... runs, for
// a request of another front door (see fence.Engine.DeleteFenced).
func (g *Gateway) DeleteFenced(ctx context.Context, path api.ObjectPath, token api.Token) error {
	return g.engine.DeleteFenced(ctx, path, token)
}

// FastReject runs the checks that precede a fenced write's body, with
// no etcd or S3 request: that the identity of ctx may do op to path, that
// there is a token, and that the cache does not already know it to be
// stale (an *api.StaleTokenError). A front door that must read something
// before the write (CopyObject's source) calls it first; PutFenced and
// DeleteFenced run it again themselves.
func (g *Gateway) FastReject(ctx context.Context, op Operation, path api.ObjectPath, token api.Token) error {
	_, err := g.engine.Admit(ctx, fence.Access(op), path, token)
	return err
}

// ReadInput builds a read's api.GetObjectInput for path from r's Range
// and conditional headers, with the REST API's rules (see readInput):
// what S3 would read differently is refused or ignored, never forwarded
// raw. PartNumber is left zero: a front door whose dialect has parts sets
// it (see ReadObject).
func ReadInput(r *http.Request, path api.ObjectPath) (api.GetObjectInput, error) {
	return readInput(r, path)
}

// ByteRange returns the canonical form of a Range field holding one byte
// range ("bytes=2-5", "bytes=7-", "bytes=-3"), or "" when the field is
// not one, by the REST API's rules (see readInput): a front door whose
// dialect reads ranges otherwise (a HEAD's range, S3's stricter syntax)
// decides which field to pass, and sends the store only what this
// rebuilt.
func ByteRange(field string) string {
	return byteRange(field)
}

// ReadObject reads in.Path (Get, or Head when head is true) after
// checking that the identity of ctx may read it, as GET and HEAD of
// /v1/objects/... do (see fence.Engine.ReadObject).
func (g *Gateway) ReadObject(ctx context.Context, in api.GetObjectInput, head bool) (*api.Object, error) {
	return g.engine.ReadObject(ctx, in, head)
}

// WatchBody puts r's body under the gateway's transfer deadlines, as a
// PUT of /v1/objects/... is: each chunk must arrive within
// Config.TransferChunkTimeout, counted from its first read, so that a
// sender that stalls is cut off (its read fails, and PutFenced answers
// api.ErrInvalidRequest) rather than hold an S3 connection. It replaces
// the server's whole-request read timeout for the body. A front door calls
// it before anything reads the body; where the connection takes no
// deadlines it changes nothing.
func (g *Gateway) WatchBody(w http.ResponseWriter, r *http.Request) {
	if client := g.newClientBody(w, r); client != nil {
		r.Body = client
	}
}

// CopyToClient copies an object's body to w under the gateway's
// transfer deadlines (Config.TransferChunkTimeout), as GET of
// /v1/objects/... does: a client that stops reading is cut off.
func (g *Gateway) CopyToClient(w http.ResponseWriter, body io.Reader) (int64, error) {
	return g.copyToClient(w, body)
}

// identityNamed returns the configured identity called name, or nil.
// Every identity is found, those whose only credentials are S3 access keys
// included: the S3 API names the identity a key's signature authenticated.
func (a *authenticator) identityNamed(name string) *Identity { return a.byName[name] }

// NoteRefusal records a refusal that another front door answered, as
// writeError does for the REST API: a stale token counts in
// fencegate_stale_refusals_total (by where it was found), and a write
// refused for an audited reason (a stale token, a token check, 401, 403)
// counts in fencegate_refused_writes_total, is published on the event
// feed (write.refused), and gets the audit line ("write refused", at
// WARN) with the resource, the token, the mark, the problem type, the
// request id and the identity. write says whether the
// request was a write; resource and token are what it named (either may
// be zero), an object's resource as ObjectResource names it. ctx is the request's, from WithIdentity.
func (g *Gateway) NoteRefusal(ctx context.Context, write bool, resource api.Resource, token api.Token, err error) {
	p := api.ProblemFor(err)
	x := exchangeOf(ctx)
	if x != nil && x.resource == "" {
		// What the request named, for its span, when no fence check
		// noted what it checked (a refusal before one).
		x.resource, x.token = resource, token
	}
	if errors.Is(err, api.ErrStaleToken) {
		source := staleFromEtcd
		if x != nil && x.staleSource != "" {
			source = x.staleSource
		}
		g.metrics.staleRefusals.WithLabelValues(source).Inc()
	}
	if !write || !audited(p, err) {
		return
	}
	slug := strings.TrimPrefix(p.Type, api.ProblemTypePrefix)
	g.metrics.refusedWrites.WithLabelValues(slug).Inc()
	if p.Resource != "" {
		resource, token = p.Resource, p.Token
	}
	if x != nil {
		g.publishRefused(p, err, x, resource, token)
	}
	suppressed, ok := g.authLines.allow(p.Status) // 401 and 403 cost the sender nothing
	if !ok {
		g.metrics.suppressedLines.WithLabelValues(slug).Inc()
		return
	}
	attrs := []slog.Attr{slog.String("resource", string(resource))}
	if token != 0 {
		attrs = append(attrs, slog.Uint64("token", uint64(token)))
	}
	if p.HighWaterMark != 0 {
		attrs = append(attrs, slog.Uint64("high_water_mark", uint64(p.HighWaterMark)))
	}
	attrs = append(attrs, slog.String("problem_type", p.Type), slog.String("detail", api.Truncate(p.Detail, api.MaxEchoBytes)),
		slog.String("request_id", requestID(ctx)), slog.String("identity", callerName(ctx)), slog.String("api", "s3"))
	if suppressed > 0 {
		attrs = append(attrs, slog.Uint64("suppressed", suppressed))
	}
	g.log.LogAttrs(context.WithoutCancel(ctx), slog.LevelWarn, auditMessage, attrs...)
}
