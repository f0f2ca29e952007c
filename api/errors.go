package api

import (
	"errors"
	"strconv"
)

// Error classes. Every layer wraps its failures around one of these with
// fmt.Errorf("op: %w", ...), and callers test them with errors.Is. The
// gateway turns them into problem+json answers with ProblemFor.
var (
	ErrMissingToken           = errors.New("missing fencing token")
	ErrMalformedToken         = errors.New("malformed fencing token")
	ErrInvalidObjectPath      = errors.New("invalid object path")
	ErrInvalidRequest         = errors.New("invalid request")
	ErrStaleToken             = errors.New("stale fencing token")
	ErrConcurrentModification = errors.New("concurrent modification")
	ErrNotFound               = errors.New("not found")
	// ErrPreconditionFailed means a read's If-Match or If-Unmodified-Since
	// did not hold (S3 answered 412), or a client's own condition on a
	// write did not hold for the version the gateway observed. (A
	// gateway's conditional write that loses a race is
	// ErrConcurrentModification instead.)
	ErrPreconditionFailed = errors.New("precondition failed")
	// ErrRangeNotSatisfiable means a read's byte range starts past the
	// object's end: S3 answered 416.
	ErrRangeNotSatisfiable = errors.New("range not satisfiable")
	ErrBodyTooLarge        = errors.New("body too large")
	ErrLengthRequired      = errors.New("length required")
	ErrHeadersTooLarge     = errors.New("headers too large")
	ErrMethodNotAllowed    = errors.New("method not allowed")
	ErrTargetTooLong       = errors.New("request target too long")
	// ErrUnavailable means the fence check could not be completed: the
	// token store was unreachable, timed out, or its outcome is unknown.
	// Nothing was forwarded.
	ErrUnavailable = errors.New("fence store unavailable")
	// ErrNoSpace means the token store (etcd) is out of space: its
	// database reached its quota, etcd raised its NOSPACE alarm, and it
	// refuses every write until an operator frees space and disarms the
	// alarm. It is not a class of its own: stores wrap it together with
	// ErrUnavailable, whose row of the table answers it (503
	// fence-unavailable), so that the gateway can say what is wrong.
	ErrNoSpace = errors.New("etcd is out of space")
	// ErrGatewayBusy means the gateway had no room left in its budget for
	// request bodies held in memory (all requests' together): the request
	// was refused before anything was written. Retry later.
	ErrGatewayBusy = errors.New("gateway busy")
	// ErrUpstream means the upstream (S3, a partner) failed or could not
	// be reached.
	ErrUpstream = errors.New("upstream error")
	// ErrUpstreamTimeout means the upstream did not answer in time.
	ErrUpstreamTimeout = errors.New("upstream timeout")

	// ErrLockNotHeld means a token check of kind "held" refused the
	// token: it is not the current holder's of the lock bound to the
	// resource (the holder's session ended, or another holds it now).
	ErrLockNotHeld = errors.New("lock not held")
	// ErrImplausibleToken means a token check of kind "plausible" refused
	// the token: it is larger than etcd's current revision, so no etcd
	// lock can have issued it (a forgery, a bug, or a token of another
	// cluster). Accepting it would lock the resource out for ever.
	ErrImplausibleToken = errors.New("implausible fencing token")
	// ErrLockTimeout means a lock was not acquired within the wait the
	// request asked for; the request's place in the queue was removed.
	ErrLockTimeout = errors.New("lock wait timed out")
	// ErrSessionNotFound means the session does not exist: it expired,
	// was revoked, or never existed.
	ErrSessionNotFound = errors.New("session not found")

	// ErrTooManySessions means the identity has as many live sessions
	// as it may: one must end (be revoked, or expire) before it may
	// create another.
	ErrTooManySessions = errors.New("too many sessions")
	// ErrTooManyLocks means the session holds and waits for as many
	// locks as it may; nothing was queued. Release one, or use another
	// session.
	ErrTooManyLocks = errors.New("too many locks for the session")
	// ErrTooManyWaiters means the gateway serves as many waiting lock
	// requests as it may; the request did nothing. Retry later, or
	// acquire with wait 0.
	ErrTooManyWaiters = errors.New("too many lock waiters")

	// ErrUnauthorized means the request did not authenticate: no API key
	// or client certificate, or one the gateway does not know.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden means the request's identity has no grant of the
	// operation for the resource.
	ErrForbidden = errors.New("forbidden")
	// ErrTooManyRequests means the client already has as many object
	// requests in flight as the gateway lets one client have. Nothing was
	// forwarded.
	ErrTooManyRequests = errors.New("too many requests")

	// ErrNotImplemented means the gateway cannot do what was asked for
	// this resource: its store has no way to do it that the gateway can
	// stand behind (a ticket for a GCS bucket, see docs/tickets.md).
	// Nothing was sent to the store, and no mark was raised.
	ErrNotImplemented = errors.New("not implemented")
)

// StaleTokenError is the detail of an ErrStaleToken refusal: the request's
// token and the high-water mark it lost to.
type StaleTokenError struct {
	Resource      Resource
	Token         Token
	HighWaterMark Token
}

func (e *StaleTokenError) Error() string {
	// Concatenated, not Sprintf: a stale refusal, the gateway's cheapest
	// answer, formats it for its problem body.
	return "stale fencing token " + e.Token.String() + " for " + string(e.Resource) + ": high-water mark is " + e.HighWaterMark.String()
}

// Unwrap makes errors.Is(err, ErrStaleToken) true.
func (e *StaleTokenError) Unwrap() error { return ErrStaleToken }

// ProblemTypePrefix starts every problem type URI fencegate sends.
const ProblemTypePrefix = "urn:fencegate:problem:"

// class is one row of the error table: an error class and how it is
// answered on the wire.
type class struct {
	err       error
	slug      string // the problem type is ProblemTypePrefix + slug
	title     string
	status    int
	retryable bool // the same request may succeed later
}

// classes is the one table that maps error classes to HTTP statuses and
// problem types. Order matters only where one error wraps two classes: the
// first match wins. The statuses are written as numbers (RFC 9110's),
// not net/http's names: api is the vocabulary of the engine too, which
// speaks no HTTP and imports nothing of it.
var classes = []class{
	{ErrMissingToken, "missing-token", "Missing fencing token", 428, false},
	{ErrMalformedToken, "malformed-token", "Malformed fencing token", 400, false},
	{ErrInvalidObjectPath, "invalid-object-path", "Invalid bucket or object key", 400, false},
	{ErrInvalidRequest, "invalid-request", "Invalid request", 400, false},
	{ErrStaleToken, "stale-token", "Stale fencing token", 409, false},
	{ErrConcurrentModification, "concurrent-modification", "Concurrent modification", 409, true},
	{ErrNotFound, "not-found", "Not found", 404, false},
	{ErrPreconditionFailed, "precondition-failed", "Precondition failed", 412, false},
	{ErrRangeNotSatisfiable, "range-not-satisfiable", "Range not satisfiable", 416, false},
	{ErrBodyTooLarge, "body-too-large", "Request body too large", 413, false},
	{ErrLengthRequired, "length-required", "Content-Length required", 411, false},
	{ErrHeadersTooLarge, "headers-too-large", "Request headers too large", 431, false},
	{ErrTargetTooLong, "uri-too-long", "Request target too long", 414, false},
	{ErrMethodNotAllowed, "method-not-allowed", "Method not allowed", 405, false},
	{ErrUnavailable, "fence-unavailable", "Fence check unavailable", 503, true},
	{ErrGatewayBusy, "gateway-busy", "Gateway busy", 503, true},
	{ErrUpstreamTimeout, "upstream-timeout", "Upstream timeout", 504, true},
	{ErrUpstream, "upstream-error", "Upstream error", 502, true},
	{ErrIdempotencyInFlight, "idempotency-in-flight", "Request with this idempotency key in flight", 409, true},
	{ErrIdempotencyMismatch, "idempotency-mismatch", "Idempotency key reused for a different request", 422, false},
	{ErrNotImplemented, "not-implemented", "Not implemented", 501, false},
	{ErrResourceBusy, "resource-busy", "Resource busy", 503, true},
	{ErrIdempotencyBudgetExhausted, "idempotency-budget-exhausted", "Idempotency budget exhausted", 503, true},
	{ErrMissingIdempotencyKey, "missing-idempotency-key", "Missing idempotency key", 400, false},
	{ErrMalformedIdempotencyKey, "malformed-idempotency-key", "Malformed idempotency key", 400, false},
	{ErrLockNotHeld, "lock-not-held", "Lock not held", 409, false},
	{ErrImplausibleToken, "implausible-token", "Implausible fencing token", 400, false},
	{ErrLockTimeout, "lock-timeout", "Lock wait timed out", 409, true},
	{ErrSessionNotFound, "session-not-found", "Session not found", 404, false},
	{ErrTooManySessions, "too-many-sessions", "Too many sessions", 429, true},
	{ErrTooManyLocks, "too-many-locks", "Too many locks for the session", 429, true},
	{ErrTooManyWaiters, "too-many-waiters", "Too many lock waiters", 503, true},
	{ErrUnauthorized, "unauthorized", "Authentication required", 401, false},
	{ErrForbidden, "forbidden", "Forbidden", 403, false},
	{ErrTooManyRequests, "too-many-requests", "Too many requests", 429, true},
}

// internalClass answers errors that belong to no class. Their details stay
// in the server's log.
var internalClass = class{nil, "internal", "Internal error", 500, true}

func classOf(err error) class {
	for _, c := range classes {
		if errors.Is(err, c.err) {
			return c
		}
	}
	return internalClass
}

// ErrorForProblemType returns the error class whose problem type is typ, or
// nil. Clients use it to turn a problem+json answer back into an error that
// errors.Is recognises.
func ErrorForProblemType(typ string) error {
	for _, c := range classes {
		if ProblemTypePrefix+c.slug == typ {
			return c.err
		}
	}
	return nil
}

// StoreError is an error answer of the object store to a request the
// gateway sent it, of error class Class (errors.Is(e, Class) holds, so the
// error table answers it as that class). Its text names the store's code
// and status, never the store's client's text, which carries the store's
// request and host ids: that text is Err's, for the log only.
type StoreError struct {
	// Code is the store's error code, such as S3's NoSuchBucket; empty
	// when its answer had none (a HEAD's has no body) or there was no
	// answer. Status is the answer's HTTP status, zero for none.
	Code   string
	Status int
	// Refused says that the store refused the request for what the
	// client asked (a bucket that does not exist, a part with a wrong
	// ETag), rather than for what the gateway added to it (its write
	// condition, its credentials) or because it failed: the S3 API
	// answers such a refusal with Code and Status, as S3 would.
	Refused bool
	Class   error
	// Err is the failure as the store's client reported it.
	Err error
}

func (e *StoreError) Error() string {
	switch {
	case e.Status == 0:
		return e.Class.Error() + ": the store did not answer"
	case e.Code == "":
		return e.Class.Error() + ": the store answered " + strconv.Itoa(e.Status)
	}
	return e.Class.Error() + ": the store answered " + strconv.Itoa(e.Status) + " " + e.Code
}

// Unwrap makes errors.Is(e, e.Class) true, and finds what Err wraps.
func (e *StoreError) Unwrap() []error { return []error{e.Class, e.Err} }

// StoreAnswer returns the text of the store's own answer in err (a
// *StoreError's Err), for a log line; "" when err has none.
func StoreAnswer(err error) string {
	var store *StoreError
	if errors.As(err, &store) && store.Err != nil {
		return store.Err.Error()
	}
	return ""
}
