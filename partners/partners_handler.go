package partners

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/events"
	"fencegate/fence"
	"fencegate/internal/problemhttp"
)

// Prefix starts every partner route.
const Prefix = "/v1/partners/"

// partnerRequest is a partner request that passed every check that needs
// no round trip.
type partnerRequest struct {
	route    *partnerRoute
	target   *url.URL // upstream URL: the route's base + path + query
	resource api.Resource
	token    api.Token
	key      api.IdempotencyKey // "" without one
	body     []byte
	// buf holds body's memory, reserved from the gateway's budget of
	// buffered bodies; serve releases it when the request ends.
	buf *bufferedBody
}

// serve handles one partner request, in this order:
//
//	route, method, path (SSRF checks) -> token (428/400) -> resource ->
//	Idempotency-Key -> cached stale reject (409) -> authorize -> body ->
//	admission (fence check, in-flight marker, idempotency record; or a
//	replay) -> upstream call -> record completed -> answer
//
// Nothing reaches the upstream unless the admission succeeded: it fails
// closed.
func (h *API) serve(w http.ResponseWriter, r *http.Request) {
	pr, err := h.parse(w, r)
	if err != nil {
		var notAllowed *methodNotAllowed
		if errors.As(err, &notAllowed) {
			w.Header().Set("Allow", notAllowed.allow)
		}
		h.writeError(w, r, err)
		return
	}
	defer pr.buf.release()
	ctx := r.Context()
	adm := api.PartnerAdmission{
		Resource: pr.resource,
		Token:    pr.token,
		Hold:     h.partnerHold(pr.route),
		MaxWait:  pr.route.MaxWait,
	}
	scope := idempotencyScope(pr.route.Name, edge.CallerName(ctx))
	if pr.key != "" {
		adm.Idempotency = &api.IdempotencyClaim{
			Scope:             scope,
			Key:               pr.key,
			Fingerprint:       api.NewFingerprint(r.Method, string(pr.resource)+" "+pr.target.RequestURI(), pr.body, pr.token),
			HeaderFingerprint: api.NewHeaderFingerprint(fingerprintedHeader(r.Header, pr.route)),
			Retention:         pr.route.IdempotencyTTL,
			Budgets: []api.IdempotencyBudget{
				pr.route.Budget.account(routeAccount(pr.route.Name)),
				h.identityBudget.account(identityAccount(edge.CallerName(ctx))),
			},
		}
	}
	admission, err := h.store.AdmitPartner(ctx, adm)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			// The client went away while waiting for the resource:
			// nothing was forwarded, and nobody reads an answer.
			h.edge.Logger(ctx).Info("partner request abandoned while waiting", "route", pr.route.Name, "resource", pr.resource)
			return
		}
		if errors.Is(err, api.ErrIdempotencyBudgetExhausted) {
			h.budgets.refusals.WithLabelValues(pr.route.Name).Inc()
		}
		h.publishBusy(r, pr, err)
		h.writeError(w, r, fmt.Errorf("partner %s: %w", pr.route.Name, err))
		return
	}
	h.publishAdmission(r, pr, admission)
	if admission.Replay != nil {
		h.edge.Logger(ctx).Debug("idempotent replay", "route", pr.route.Name, "resource", pr.resource, "status", admission.Replay.Status)
		stored, err := h.replayBody(ctx, pr, scope, admission.Replay)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		writeStoredResponse(w, r, stored, true)
		return
	}
	h.forwardAdmitted(w, r, pr, scope, admission)
}

// parse runs every check of a partner request that needs no round trip.
func (h *API) parse(w http.ResponseWriter, r *http.Request) (partnerRequest, error) {
	name := chi.URLParam(r, "route")
	route, ok := h.routes[name]
	if !ok {
		return partnerRequest{}, fmt.Errorf("%w: no partner route %q", api.ErrNotFound, name)
	}
	// Only origin-form request targets ("/v1/..."): an absolute-form
	// target names a host, and no host is ever taken from the request.
	if r.URL.Scheme != "" || r.URL.Host != "" || (r.RequestURI != "" && !strings.HasPrefix(r.RequestURI, "/")) {
		return partnerRequest{}, fmt.Errorf("%w: the request target must be a path, not an absolute URL", api.ErrInvalidRequest)
	}
	if !route.methods[r.Method] {
		return partnerRequest{}, &methodNotAllowed{allow: route.allow, err: fmt.Errorf("%w: partner route %s takes %s, not %s", api.ErrMethodNotAllowed, name, route.allow, r.Method)}
	}
	escaped := r.URL.EscapedPath()
	rest, ok := strings.CutPrefix(escaped, Prefix+name)
	if !ok || (rest != "" && rest[0] != '/') {
		return partnerRequest{}, fmt.Errorf("%w: partner route name must not be escaped", api.ErrInvalidRequest)
	}
	path, err := api.ParsePartnerPath(strings.TrimPrefix(rest, "/"))
	if err != nil {
		return partnerRequest{}, err
	}
	target, err := upstreamURL(route.Upstream, path, r.URL.RawQuery)
	if err != nil {
		return partnerRequest{}, err
	}
	token, err := api.ParseTokenHeader(r.Header.Values(api.HeaderFenceToken))
	if err != nil {
		return partnerRequest{}, err
	}
	id, err := route.template.resourceID(r.Header, path)
	if err != nil {
		return partnerRequest{}, err
	}
	resource := api.PartnerResource(name, id)
	key, err := api.ParseIdempotencyKey(r.Header.Values(api.HeaderIdempotencyKey))
	if err != nil {
		return partnerRequest{}, err
	}
	if key == "" && route.RequireIdempotencyKey {
		return partnerRequest{}, fmt.Errorf("%w: partner route %s requires an %s header", api.ErrMissingIdempotencyKey, name, api.HeaderIdempotencyKey)
	}
	// Authorize before anything reveals the resource's mark.
	if err := h.edge.Authorize(r.Context(), edge.OpWrite, resource); err != nil {
		return partnerRequest{}, err
	}
	edge.NoteChecked(r.Context(), resource, token)
	h.edge.NoteMarkBefore(r.Context(), h.store.CachedHighWaterMark, resource)
	// Fast reject, as for objects: high-water marks only grow.
	if hwm, ok := h.store.CachedHighWaterMark(resource); ok && hwm > token {
		edge.NoteStaleSource(r.Context(), fence.StaleFromCache)
		return partnerRequest{}, &api.StaleTokenError{Resource: resource, Token: token, HighWaterMark: hwm}
	}
	buf, err := h.readBody(w, r, route.MaxBodyBytes)
	if err != nil {
		return partnerRequest{}, err
	}
	return partnerRequest{route: route, target: target, resource: resource, token: token, key: key, body: buf.bytes(), buf: buf}, nil
}

// methodNotAllowed is a 405 that also sets the Allow header.
type methodNotAllowed struct {
	allow string
	err   error
}

func (e *methodNotAllowed) Error() string { return e.err.Error() }
func (e *methodNotAllowed) Unwrap() error { return e.err }

// upstreamURL joins the route's base URL, the validated path and the
// query. The host and scheme are always the base's: the path is made of
// escaped segments, none of them "." or "..", and the query cannot hold a
// '#'. The result is checked again all the same.
func upstreamURL(base *url.URL, path api.PartnerPath, rawQuery string) (*url.URL, error) {
	escaped := strings.TrimSuffix(base.EscapedPath(), "/") + "/" + path.Escaped()
	s := base.Scheme + "://" + base.Host + escaped
	if rawQuery != "" {
		s += "?" + rawQuery
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w: partner request target: %w", api.ErrInvalidRequest, err)
	}
	if u.Scheme != base.Scheme || u.Host != base.Host || u.User != nil || u.Fragment != "" {
		return nil, fmt.Errorf("%w: partner request target leaves the route's upstream", api.ErrInvalidRequest)
	}
	return u, nil
}

// readPartnerBody reads the whole request body, up to limit (413
// beyond), as readBody buffers an object body: into memory reserved from
// the gateway's budget of buffered bodies (Config.BufferBudgetBytes) as
// its bytes arrive, under the transfer deadlines (Config.
// TransferChunkTimeout). A partner body is held whole until its request
// ends; without the budget, N authorized clients that each send most of a
// body of the route's limit would hold N times it, and without the
// deadlines they could stall there until the server's whole-request read
// timeout. A body that finds no room is refused 503 gateway-busy; one
// that stops arriving, 400. The caller releases the body (nil: none).
func (h *API) readBody(w http.ResponseWriter, r *http.Request, limit int64) (*bufferedBody, error) {
	if r.ContentLength > limit {
		return nil, fmt.Errorf("%w: %d bytes, the route's limit is %d", api.ErrBodyTooLarge, r.ContentLength, limit)
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	var from io.Reader = r.Body
	client := h.edge.ClientBody(w, r)
	if client != nil {
		from = client
	}
	buf, err := h.bufferWhole(from, r.ContentLength, limit, client)
	if err == nil && buf.size > limit { // of unknown length
		buf.release()
		err = fmt.Errorf("%w: over the route's limit of %d bytes", api.ErrBodyTooLarge, limit)
	}
	if err == nil {
		return buf, nil
	}
	// The rest of the body is not read: close the connection after the
	// answer, rather than let net/http read up to 256 KiB more of it,
	// with no deadline, before answering (a stalled client would then
	// never get its answer, and hold the connection).
	w.Header().Set("Connection", "close")
	return nil, err
}

// routeAccount and identityAccount name the token store's accounts of
// idempotency records (api.IdempotencyBudget) of a route and of an
// identity.
func routeAccount(route string) string       { return "route/" + route }
func identityAccount(identity string) string { return "identity/" + identity }

// idempotencyScope is where an idempotency key is unique: the route and
// the caller. The caller's name is escaped, so that it holds no '/', and
// a key (which may) cannot make two scopes' records collide.
func idempotencyScope(route, caller string) string {
	return route + "/@" + url.PathEscape(caller)
}

// writeStoredResponse answers a stored response: a replay, or the first
// answer of a request whose response was just stored.
func writeStoredResponse(w http.ResponseWriter, r *http.Request, s *api.StoredResponse, replayed bool) {
	for name, values := range s.Header {
		w.Header()[http.CanonicalHeaderKey(name)] = append([]string(nil), values...)
	}
	if replayed {
		w.Header().Set(api.HeaderIdempotentReplayed, "true")
		if s.BodyOmitted {
			w.Header().Set(api.HeaderIdempotentBodyOmitted, "true")
		}
	}
	if r.Method != http.MethodHead {
		w.Header().Set("Content-Length", strconv.Itoa(len(s.Body)))
	}
	w.WriteHeader(s.Status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(s.Body)
	}
}

// problemResponse renders err as the problem+json answer that writeError
// would send, so that it can be stored for replays: the outcome of a
// request that failed after it was forwarded.
func problemResponse(r *http.Request, err error) *api.StoredResponse {
	p := problemhttp.For(r, err)
	header := make(http.Header, 2)
	problemhttp.SetHeaders(header)
	return &api.StoredResponse{Status: p.Status, Header: header, Body: problemhttp.Body(p)}
}

// finishContext is the context of a request's Finish: not cancelled with
// the client's request, which may be gone by then.
func finishContext(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// publishAdmission publishes a partner request's admission: replayed
// from its idempotency record, or admitted to be forwarded, which it
// notes for the edge (edge.NoteAdmitted).
func (h *API) publishAdmission(r *http.Request, pr partnerRequest, adm api.Admission) {
	if adm.Replay == nil {
		edge.NoteAdmitted(r.Context())
	}
	if !h.edge.Events().Active() {
		return
	}
	e := events.Event{Time: time.Now(), Kind: events.KindPartnerAdmitted, Resource: string(pr.resource), Token: pr.token, Identity: edge.CallerName(r.Context())}
	if adm.Replay != nil {
		e.Kind, e.Status = events.KindPartnerReplayed, adm.Replay.Status
	}
	h.edge.Events().Publish(&e)
}

// publishBusy publishes a partner request refused for err, when
// err says that its resource was busy.
func (h *API) publishBusy(r *http.Request, pr partnerRequest, err error) {
	if !h.edge.Events().Active() || !errors.Is(err, api.ErrResourceBusy) {
		return
	}
	h.edge.Events().Publish(&events.Event{
		Time:     time.Now(),
		Kind:     events.KindPartnerBusy,
		Resource: string(pr.resource),
		Token:    pr.token,
		Status:   api.ProblemFor(err).Status,
		Identity: edge.CallerName(r.Context()),
	})
}

// writeError answers err as problem+json, as the REST API does: the edge
// notes it (metrics; every partner request is a write, so a refusal for
// an audited reason gets the audit line) and logs a failure.
func (h *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	p := problemhttp.For(r, err)
	audited := h.edge.NoteProblem(r, p, err, true, fenceTokenOf)
	h.edge.LogProblem(r.Context(), p, err, audited)
	problemhttp.Write(w, r, p)
}

// bufferedBody is a body held whole in the engine's budget of buffered
// bodies (fence.Buffered).
type bufferedBody struct {
	held *fence.Buffered
	size int64
}

// bytes returns the body's bytes (nil body: none).
func (b *bufferedBody) bytes() []byte {
	if b == nil {
		return nil
	}
	return b.held.Bytes()
}

// release gives the body's memory back (nil body: nothing to give).
func (b *bufferedBody) release() {
	if b != nil {
		b.held.Release()
	}
}

// bufferWhole reads a body of n bytes (-1: unknown) from into the
// engine's budget of buffered bodies, under client's transfer deadlines
// (nil: none): see fence.Engine.BufferWhole.
func (h *API) bufferWhole(from io.Reader, n, max int64, client *edge.ClientBody) (*bufferedBody, error) {
	held, err := h.engine.BufferWhole(from, n, max, client)
	if err != nil {
		return nil, err
	}
	return &bufferedBody{held: held, size: held.Size()}, nil
}

// fenceTokenOf returns the token r names in X-Fence-Token, for the audit
// line of a request refused before its resource was known (zero: none
// valid).
func fenceTokenOf(r *http.Request) (api.Resource, api.Token) {
	token, _ := api.ParseTokenHeader(r.Header.Values(api.HeaderFenceToken))
	return "", token
}
