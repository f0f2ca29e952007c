package partners

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"fencegate/api"
	"fencegate/edge"
)

// The attributes of a partner call's span: OpenTelemetry's HTTP client
// conventions, and the route's name.
const (
	attrPartnerRoute  = attribute.Key("fencegate.partner_route")
	attrPartnerMethod = attribute.Key("http.request.method")
	attrPartnerServer = attribute.Key("server.address")
	attrPartnerStatus = attribute.Key("http.response.status_code")
)

// hopByHopHeaders are never forwarded, in either direction (RFC 9110
// section 7.6.1), nor are the headers a Connection header names.
var hopByHopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func isHopByHop(canonical string) bool {
	for _, h := range hopByHopHeaders {
		if h == canonical {
			return true
		}
	}
	return false
}

// alwaysStripped are request headers never forwarded to a partner, besides
// the hop-by-hop ones and X-Fence-*: the client's credentials for the
// gateway, headers that name a host, the client's idempotency key
// (replaced by upstreamIdempotencyKey), and Expect (the body is already
// read).
var alwaysStripped = []string{"Authorization", "Cookie", "Forwarded", "X-Forwarded-Host", api.HeaderIdempotencyKey, "Expect"}

// routingHeaders, and every X-Forwarded-* header, are request headers that
// some upstreams, or the proxies in front of them, read as the request's
// method, path or origin: X-HTTP-Method-Override and its kin turn a POST
// into a DELETE, X-Original-URL and X-Rewrite-URL replace the path,
// X-Forwarded-* and X-Real-IP claim the client's address, scheme or
// prefix. They are the client's claims, not the gateway's, so they are
// stripped unless the route's ForwardHeaders names them.
var routingHeaders = []string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override", "X-Original-Url", "X-Rewrite-Url", "X-Real-Ip"}

// forwardedPrefix starts the X-Forwarded-* headers.
const forwardedPrefix = "X-Forwarded-"

// Header names are compared by sameHeaderName and hasHeaderPrefix: case
// aside, and with '_' and '-' alike. Go's server keeps a name with an
// underscore apart (X_Fence_Token is not X-Fence-Token to it), but nginx,
// CGI-style servers and others map '_' to '-' or the reverse, so the
// partner may read X_Fence_Token as X-Fence-Token.

// neverForwarded reports whether a request header is never forwarded, in
// any spelling: hop-by-hop, X-Fence-*, or alwaysStripped.
func neverForwarded(name string) bool {
	if hasHeaderPrefix(name, "X-Fence-") {
		return true
	}
	for _, list := range [][]string{hopByHopHeaders, alwaysStripped} {
		for _, h := range list {
			if sameHeaderName(name, h) {
				return true
			}
		}
	}
	return false
}

// isRoutingHeader reports whether a request header is, in any spelling,
// one of routingHeaders or X-Forwarded-*.
func isRoutingHeader(name string) bool {
	if hasHeaderPrefix(name, forwardedPrefix) {
		return true
	}
	for _, h := range routingHeaders {
		if sameHeaderName(name, h) {
			return true
		}
	}
	return false
}

// sameHeaderName reports whether a and b are the same header name to a
// server that ignores case and maps '_' to '-'.
func sameHeaderName(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if foldHeaderByte(a[i]) != foldHeaderByte(b[i]) {
			return false
		}
	}
	return true
}

// hasHeaderPrefix is strings.HasPrefix with sameHeaderName's equality.
func hasHeaderPrefix(name, prefix string) bool {
	return len(name) >= len(prefix) && sameHeaderName(name[:len(prefix)], prefix)
}

func foldHeaderByte(c byte) byte {
	switch {
	case c == '_':
		return '-'
	case 'A' <= c && c <= 'Z':
		return c + 'a' - 'A'
	}
	return c
}

// storedHeaders are the response headers kept with a stored response,
// besides the status and the body.
var storedHeaders = []string{
	"Content-Type", "Content-Encoding", "Content-Language", "Content-Location",
	"Location", "Etag", "Last-Modified",
}

// maxStoredHeaderBytes bounds the storedHeaders kept with a stored
// response (names and values), which etcd holds: a partner's headers can
// be as large as the HTTP client takes (1 MiB).
const maxStoredHeaderBytes = 4 << 10

// storedHeader returns the storedHeaders of h, in their order, as long as
// they fit in maxStoredHeaderBytes together; a header that does not fit
// is left out of the stored response (the first client still gets it).
func storedHeader(h http.Header) http.Header {
	out := http.Header{}
	size := 0
	for _, name := range storedHeaders {
		values := h.Values(name)
		n := len(name)
		for _, v := range values {
			n += len(v)
		}
		if len(values) == 0 || size+n > maxStoredHeaderBytes {
			continue
		}
		size += n
		out[name] = append([]string(nil), values...)
	}
	return out
}

// forwardAdmitted calls the upstream for an admitted request, completes
// its admission (storing the response under its idempotency key, and
// releasing the resource's in-flight marker), and answers the client.
//
// The upstream call does not end when the client goes away: once the
// request may have reached the partner, its outcome must be recorded. It
// runs under context.WithoutCancel, bounded by the route's timeout.
//
// What is stored: every answer the partner gave, whatever its status (a
// 5xx too: the partner may have acted before failing, so a retry with the
// same key gets the same 5xx, as in Stripe's API), and the gateway's own
// 502 or 504 when the call failed after the request may have reached the
// partner (the outcome is unknown, so the key is never forwarded again).
// Only a call that never reached the partner (no connection could be
// made, or it was not sent because the marker could expire during it)
// drops the record, so that a retry with the same key is forwarded.
func (h *API) forwardAdmitted(w http.ResponseWriter, r *http.Request, pr partnerRequest, scope string, adm api.Admission) {
	ctx := r.Context()
	if hook := h.beforeCall; hook != nil {
		hook(ctx, pr.resource, pr.token)
	}
	upCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pr.route.Timeout)
	defer cancel()

	// The call must end early enough to leave the answer store's write
	// its time before the marker may expire (see partnerHold).
	resp, err := h.call(upCtx, r, pr, scope, adm.Expires.Add(-h.answerWriteTime()))
	var head []byte
	if err == nil {
		defer resp.Body.Close()
		// Read what is stored before answering, so that the record is
		// complete (and the marker gone) by the time the client sees
		// the answer: a client that retries at once gets the replay.
		head, err = io.ReadAll(io.LimitReader(resp.Body, pr.route.MaxStoredResponseBytes+1))
		if err != nil {
			err = upstreamError(upCtx, fmt.Errorf("partner %s: reading the answer: %w", pr.route.Name, err))
		}
	}
	whole := int64(len(head)) <= pr.route.MaxStoredResponseBytes
	h.finish(ctx, pr, scope, adm, h.outcome(r, resp, head, whole, err))
	if err != nil {
		h.writeError(w, r, err)
		return
	}

	header := w.Header()
	for name, values := range resp.Header {
		if !isHopByHop(name) && name != "Content-Length" {
			header[name] = values
		}
	}
	removeConnectionHeaders(header, resp.Header)
	switch {
	case r.Method == http.MethodHead:
		if n := resp.Header.Get("Content-Length"); n != "" {
			header.Set("Content-Length", n) // the length a GET would have
		}
	case whole:
		header.Set("Content-Length", fmt.Sprint(len(head)))
	}
	w.WriteHeader(resp.StatusCode)
	if _, err := w.Write(head); err != nil || whole {
		return
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		h.edge.Logger(ctx).Info("partner answer cut short", "route", pr.route.Name, "err", err)
	}
}

// outcome is what is stored of a call: nothing when it never reached the
// partner (err wraps api.ErrNotForwarded), the gateway's problem answer
// when it failed after it may have, and otherwise the partner's status,
// storedHeaders, and its body head when whole (else the body is omitted).
func (h *API) outcome(r *http.Request, resp *http.Response, head []byte, whole bool, err error) *api.StoredResponse {
	switch {
	case errors.Is(err, api.ErrNotForwarded):
		return nil
	case err != nil:
		return problemResponse(r, err)
	}
	stored := &api.StoredResponse{Status: resp.StatusCode, Header: storedHeader(resp.Header)}
	if whole {
		stored.Body = head
	} else {
		stored.BodyOmitted = true
	}
	return stored
}

// finish completes the admission with stored (see api.Admission.Finish),
// first moving a body larger than maxInlineAnswerBytes to the answer
// store (storeBody). A failure is logged: the client still gets its
// answer, and the marker and record expire with their lease. When the
// record turned out to be gone, the body written for it is deleted.
func (h *API) finish(ctx context.Context, pr partnerRequest, scope string, adm api.Admission, stored *api.StoredResponse) {
	ctx = finishContext(ctx)
	log := h.edge.Logger(ctx)
	var name string // of the body in the answer store, if it went there
	if stored != nil && pr.key != "" {
		stored, name = h.storeBody(ctx, pr, scope, adm, stored)
	}
	err := adm.Finish(ctx, stored)
	if err == nil {
		return
	}
	log.Warn("partner request not recorded", "route", pr.route.Name, "resource", pr.resource, "err", err)
	if name != "" && errors.Is(err, api.ErrIdempotencyRecordLost) {
		dctx, cancel := context.WithTimeout(ctx, answerStoreTimeout)
		defer cancel()
		if err := h.answers.DeleteAnswer(dctx, name); err != nil {
			log.Info("answer body of a lost record not deleted (the bucket's lifecycle rule will)", "route", pr.route.Name, "err", err)
		}
	}
}

// call sends the request upstream, if the call, bounded by ctx's deadline,
// ends before markerExpires; otherwise it sends nothing, and its error
// wraps api.ErrUnavailable and api.ErrNotForwarded (see
// errMarkerMayExpire). The errors of a call wrap api.ErrUpstream, or
// api.ErrUpstreamTimeout when ctx's deadline passed; those of a call that
// never reached the partner also wrap api.ErrNotForwarded.
//
// One admission means at most one send. net/http's Transport sends a
// request again on a new connection when a reused keep-alive connection
// fails before the answer, if it judges the request replayable: a GET,
// HEAD, OPTIONS or TRACE, or any method with an Idempotency-Key or
// X-Idempotency-Key header (which forwarded requests carry), and only if
// the request has no body or can rewind it (GetBody). A partner that acted
// on the first copy and lost the connection before answering would get a
// second copy, which no admission covers. So every request goes with a
// body that cannot be rewound, an empty one too: the Transport documents
// that it retries only requests that have no body or define GetBody; its
// HTTP/1 path then retries nothing (not even a request it never wrote,
// which it re-sends only when the body is known to be empty or
// rewindable), and its HTTP/2 path re-sends such a body only when the
// request never started on the connection. The price: a call on a
// keep-alive connection the partner just closed fails (502, outcome
// unknown) instead of going again; and an empty POST, PUT or PATCH goes
// over HTTP/1.1 chunked, with no Content-Length (GET, HEAD, DELETE and
// OPTIONS are unchanged: the Transport finds the body empty and sends
// none).
func (h *API) call(ctx context.Context, r *http.Request, pr partnerRequest, scope string, markerExpires time.Time) (*http.Response, error) {
	var connected atomic.Bool
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected.Store(true) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), r.Method, pr.target.String(), io.NopCloser(bytes.NewReader(pr.body)))
	if err != nil {
		return nil, fmt.Errorf("partner %s: %w: %w: %w", pr.route.Name, api.ErrUpstream, api.ErrNotForwarded, err)
	}
	req.GetBody = nil // never rewound: see above
	req.ContentLength = int64(len(pr.body))
	req.Header = forwardedHeader(r.Header, pr.route)
	req.Header.Set(api.HeaderFenceToken, pr.token.String())
	if pr.key != "" {
		req.Header.Set(api.HeaderIdempotencyKey, upstreamIdempotencyKey(scope, pr.key))
	}
	if id := edge.RequestID(r.Context()); id != "" {
		req.Header.Set("X-Request-Id", id)
	}
	// Host is the upstream's, from the URL, never the client's.
	req.Host = pr.target.Host
	// The last thing before the send: the marker must outlive the call.
	if err := errMarkerMayExpire(ctx, markerExpires); err != nil {
		h.edge.Logger(ctx).Warn("partner request not sent: its admission may expire during the call", "route", pr.route.Name, "resource", pr.resource, "err", err)
		return nil, fmt.Errorf("partner %s: %w: %w: %w", pr.route.Name, api.ErrUnavailable, api.ErrNotForwarded, err)
	}
	// With tracing, the call is a client span, timed to the answer's
	// headers, and the partner gets its traceparent (in place of the
	// client's).
	spanCtx, span := edge.StartClientSpan(ctx, "partner "+pr.route.Name)
	if span != nil {
		span.SetAttributes(attrPartnerRoute.String(pr.route.Name), attrPartnerMethod.String(r.Method), attrPartnerServer.String(pr.target.Hostname()))
		edge.InjectTraceparent(spanCtx, req.Header)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		err = upstreamError(ctx, fmt.Errorf("partner %s: %w", pr.route.Name, err))
		if !connected.Load() {
			err = fmt.Errorf("%w: %w", api.ErrNotForwarded, err)
		}
		edge.EndClientSpan(span, "error", true, err)
		return nil, err
	}
	if span != nil {
		span.SetAttributes(attrPartnerStatus.Int(resp.StatusCode))
		if resp.StatusCode >= 500 {
			span.SetStatus(codes.Error, resp.Status)
		}
	}
	edge.EndClientSpan(span, "ok", false, nil)
	return resp, nil
}

// errMarkerMayExpire refuses a call whose deadline (ctx's, the route's
// timeout from now) is after markerExpires, the earliest instant at which
// the resource's in-flight marker may expire (api.Admission.Expires; zero
// is unknown, and refused). Its margin over the timeout covers the etcd
// round trips around the call, so it is short only when this gateway was
// held up between the admission and here (a GC or scheduling pause, a
// stopped process, an overloaded host). Once the marker is gone, etcd
// admits the next request for the resource, and this one, if sent, could
// reach the partner after it, or overlap it.
//
// The check uses this process's clock, not a round trip: the bound is
// measured from before the lease was granted, and etcd only lengthens
// leases, so it errs on the safe side (by up to the lease pool's second of
// sharing). An etcd TimeToLive would cost a round trip on every call, and
// its answer would be stale by the time it arrived, by a pause of its own.
//
// Not sending is safe to retry: nothing reached the partner. The caller
// drops the idempotency record (if it is still this admission's; the
// record's create revision tells) and the marker, and a retry goes
// through the admission again, where a token that has meanwhile become
// stale is refused.
func errMarkerMayExpire(ctx context.Context, markerExpires time.Time) error {
	deadline, ok := ctx.Deadline()
	switch {
	case markerExpires.IsZero():
		return errors.New("the admission did not say when its in-flight marker expires")
	case !ok:
		return errors.New("the call has no deadline")
	case deadline.After(markerExpires):
		return fmt.Errorf("the in-flight marker may expire in %v, before the call's deadline in %v", time.Until(markerExpires).Round(time.Millisecond), time.Until(deadline).Round(time.Millisecond))
	}
	return nil
}

// upstreamError classes a failed upstream call: a timeout when ctx's
// deadline passed, an upstream error otherwise.
func upstreamError(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", api.ErrUpstreamTimeout, err)
	}
	return fmt.Errorf("%w: %w", api.ErrUpstream, err)
}

// forwardedHeader returns the client's headers that the route forwards
// (clientForwardedHeader), plus the route's added headers.
func forwardedHeader(in http.Header, route *partnerRoute) http.Header {
	out := clientForwardedHeader(in, route)
	for name, values := range route.AddHeaders {
		out[name] = append([]string(nil), values...)
	}
	return out
}

// perAttemptHeaders name an attempt, not the request: a client sends new
// ones on each retry (W3C trace context, an instrumented client's new
// span), or the gateway sets its own (X-Request-Id). They are forwarded
// and left out of the idempotency fingerprint, so that a retry is still
// the same request. Content-Length is the body's, which the fingerprint
// covers, and the gateway's HTTP client sends its own.
var perAttemptHeaders = []string{"Traceparent", "Tracestate", "Baggage", "X-Request-Id", "Content-Length"}

// fingerprintedHeader is what the idempotency fingerprint covers of a
// request's headers (api.NewHeaderFingerprint): every header of the
// client's that the route forwards, less those the route's AddHeaders
// replace and perAttemptHeaders. A retry with the same key that forwards
// any other header, value or order of values is another request (422).
func fingerprintedHeader(in http.Header, route *partnerRoute) http.Header {
	out := clientForwardedHeader(in, route)
	for name := range route.AddHeaders {
		delete(out, name)
	}
	for _, name := range perAttemptHeaders {
		delete(out, name)
	}
	return out
}

// clientForwardedHeader returns the client's headers minus those never
// forwarded (hop-by-hop, X-Fence-*, the client's credentials, ...: see
// neverForwarded), the routing headers the route does not forward (see
// routingHeaders), the route's stripped headers and those a Connection
// header names. This is the one place where forwarded headers are
// filtered.
func clientForwardedHeader(in http.Header, route *partnerRoute) http.Header {
	out := make(http.Header, len(in)+len(route.AddHeaders))
	for name, values := range in {
		switch {
		case neverForwarded(name), route.strip[name]:
			continue
		case isRoutingHeader(name) && !route.forward[name]:
			continue
		}
		out[name] = append([]string(nil), values...)
	}
	removeConnectionHeaders(out, in)
	return out
}

// removeConnectionHeaders deletes from h the headers that from's
// Connection header names.
func removeConnectionHeaders(h, from http.Header) {
	for _, v := range from.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
}

// upstreamIdempotencyKey is the Idempotency-Key sent to the partner: a
// hash of the key and its scope, the same on every attempt, so that a
// partner that honours keys also deduplicates; two callers' equal keys do
// not collide there.
func upstreamIdempotencyKey(scope string, key api.IdempotencyKey) string {
	sum := sha256.Sum256([]byte(scope + "\x00" + string(key)))
	return "fg-" + hex.EncodeToString(sum[:])
}
