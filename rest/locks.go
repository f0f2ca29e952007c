package rest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/events"
	"fencegate/internal/jsonbody"
)

// SessionService keeps sessions: leases that clients keep alive, to which
// lock grants are bound. Each session belongs to the identity that
// created it. Calls on a session take the owner to check: nil checks
// none (an operator's call); otherwise a session that does not belong to
// *owner is refused with api.ErrForbidden, and nothing changes.
// tokenstore.Store implements it.
type SessionService interface {
	// CreateSession grants a session of ttl seconds (zero: the default)
	// that belongs to owner.
	CreateSession(ctx context.Context, ttl int64, owner string) (api.Session, error)
	// KeepAlive renews a session for its TTL, or fails with
	// api.ErrSessionNotFound or api.ErrForbidden.
	KeepAlive(ctx context.Context, id api.SessionID, owner *string) (api.Session, error)
	// RevokeSession ends a session, releasing its locks, or fails with
	// api.ErrSessionNotFound or api.ErrForbidden.
	RevokeSession(ctx context.Context, id api.SessionID, owner *string) error
}

// LockQueue grants named locks to sessions, first come first served.
// Acquire and Release check the session's owner as SessionService does.
// tokenstore.Store implements it.
type LockQueue interface {
	// Acquire waits at most wait for the lock and returns the grant, or
	// fails with api.ErrLockTimeout, having left the queue.
	Acquire(ctx context.Context, name string, session api.SessionID, owner *string, wait time.Duration) (api.LockGrant, error)
	// Release removes the grant (or queue place) with token, reporting
	// whether it was still there; it never touches another grant.
	Release(ctx context.Context, name string, token api.Token, owner *string) (bool, error)
	// LockState reads whether the lock is held and the queue's length;
	// the holder's token only when session (zero: none) is the holder's
	// and belongs to owner. A session given that does not exist or is
	// not owner's fails as for Acquire.
	LockState(ctx context.Context, name string, session api.SessionID, owner *string) (api.LockState, error)
}

// LockService is what the lock API needs: sessions and lock queues.
type LockService interface {
	SessionService
	LockQueue
}

// maxLockRequestBytes bounds the JSON bodies of the lock API.
const maxLockRequestBytes = 4 << 10

// WithLocks mounts the lock API on locks, which must not be nil:
//
//	POST   /v1/sessions                 {"ttl": 10} -> 201 {"session": "<id>", "ttl": 10}
//	POST   /v1/sessions/{id}/keepalive  -> 200 {"session": "<id>", "ttl": 10}
//	DELETE /v1/sessions/{id}            -> 204, releasing the session's locks
//	POST   /v1/locks/{name}             {"session": "<id>", "wait": 5} -> 200 {"name", "token", "session"}
//	DELETE /v1/locks/{name}?token=N     -> 200 {"name", "token", "released"}
//	GET    /v1/locks/{name}[?session=<id>] -> 200 {"name", "held", "queue_length"}, and
//	                                       "holder" (its token) for the holder's session
//
// A lock request long-polls for at most its wait (api.MaxLockWait); when
// the wait runs out it answers 409 lock-timeout (retryable) and the
// request's place in the queue is gone.
//
// With auth, a session belongs to the identity that created it: keepalive,
// revoke, acquire with it, release of its grants and reading the lock
// state with it by another identity answer 403 forbidden, unless the
// caller is an operator (see sessionOwner).
//
// GET shows the holder's token only to a request that names the holder's
// session: anyone allowed to read the lock may not hold it, and the token
// is all that a write behind a "held" token check needs. The event feed
// shows lock events' tokens and sessions by the same rule (seesGrant).
//
// When locks also implements LockExpiries, the event feed publishes
// lock.expired for each grant lost to its session's expiry, and
// lock.revoked for each lost to its revoke, while it has subscribers
// (lockExpiryFeed).
func WithLocks(locks LockService) Option {
	if locks == nil {
		panic("rest: WithLocks(nil)")
	}
	return func(g *API) {
		h := &lockAPI{g: g, locks: locks}
		if n := g.cfg.MaxLockWaiters; n > 0 {
			h.waiters = make(chan struct{}, n)
		}
		g.mounts = append(g.mounts, h.mount)
		g.edge.Registry().MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencegate_lock_waiters",
			Help: "Lock requests with a wait above zero being served (Config.MaxLockWaiters bounds them; past it they are answered 503 too-many-waiters).",
		}, func() float64 { return float64(h.waiting.Load()) }))
		if source, ok := locks.(LockExpiries); ok {
			g.lockExpiries = &lockExpiryFeed{source: source, hub: g.edge.Events()}
		}
	}
}

// lockAPI serves the lock API's routes.
type lockAPI struct {
	g     *API
	locks LockService
	// waiters holds a token for each lock request with a wait being
	// served; nil when Config.MaxLockWaiters is negative (no limit).
	waiters chan struct{}
	waiting atomic.Int64 // lock requests with a wait being served
}

func (h *lockAPI) mount(r chi.Router) {
	r.Post("/v1/sessions", h.createSession)
	r.Post("/v1/sessions/{id}/keepalive", h.keepAlive)
	r.Delete("/v1/sessions/{id}", h.revokeSession)
	r.Post("/v1/locks/{name}", h.acquire)
	r.Delete("/v1/locks/{name}", h.release)
	r.Get("/v1/locks/{name}", h.lockState)
}

func (h *lockAPI) createSession(w http.ResponseWriter, r *http.Request) {
	if err := h.g.authorizeSessions(r.Context()); err != nil {
		h.g.writeError(w, r, err)
		return
	}
	var req api.SessionRequest
	if err := decodeLockRequest(r, &req, true); err != nil {
		h.g.writeError(w, r, err)
		return
	}
	sess, err := h.locks.CreateSession(r.Context(), req.TTL, edge.CallerName(r.Context()))
	if err != nil {
		h.g.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/sessions/"+sess.ID.String())
	writeJSON(w, http.StatusCreated, sess)
}

func (h *lockAPI) keepAlive(w http.ResponseWriter, r *http.Request) {
	id, err := api.ParseSessionID(chi.URLParam(r, "id"))
	if err == nil {
		err = h.g.authorizeSessions(r.Context()) // sessions have no resource
	}
	if err != nil {
		h.g.writeError(w, r, err)
		return
	}
	sess, err := h.locks.KeepAlive(r.Context(), id, h.sessionOwner(r.Context()))
	if err != nil {
		h.g.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

func (h *lockAPI) revokeSession(w http.ResponseWriter, r *http.Request) {
	id, err := api.ParseSessionID(chi.URLParam(r, "id"))
	if err == nil {
		err = h.g.authorizeSessions(r.Context()) // sessions have no resource
	}
	if err != nil {
		h.g.writeError(w, r, err)
		return
	}
	if err := h.locks.RevokeSession(r.Context(), id, h.sessionOwner(r.Context())); err != nil {
		h.g.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *lockAPI) acquire(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	if err := h.authorizeLock(r, name); err != nil {
		h.g.writeError(w, r, err)
		return
	}
	var req api.LockRequest
	if err := decodeLockRequest(r, &req, false); err != nil {
		h.g.writeError(w, r, err)
		return
	}
	if req.Session == 0 {
		h.g.writeError(w, r, fmt.Errorf("%w: \"session\" is required", api.ErrInvalidRequest))
		return
	}
	maxWait := api.MaxLockWait.Seconds()
	if math.IsNaN(req.Wait) || req.Wait < 0 || req.Wait > maxWait {
		h.g.writeError(w, r, fmt.Errorf("%w: \"wait\" must be from 0 to %g seconds", api.ErrInvalidRequest, maxWait))
		return
	}
	wait := time.Duration(req.Wait * float64(time.Second))
	if wait > 0 {
		release, err := h.admitWaiter()
		if err != nil {
			h.g.writeError(w, r, err)
			return
		}
		defer release()
	}
	grant, err := h.locks.Acquire(r.Context(), name, req.Session, h.sessionOwner(r.Context()), wait)
	if err != nil {
		h.g.writeError(w, r, err)
		return
	}
	h.g.edge.Logger(r.Context()).Debug("lock granted", "lock", name, "session", req.Session.String())
	h.publishLock(r, events.KindLockGranted, name, grant.Token, grant.Session)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, grant)
}

func (h *lockAPI) release(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	if err := h.authorizeLock(r, name); err != nil {
		h.g.writeError(w, r, err)
		return
	}
	values, ok := r.URL.Query()["token"]
	if !ok {
		h.g.writeError(w, r, fmt.Errorf("%w: the \"token\" query parameter is required", api.ErrInvalidRequest))
		return
	}
	token, err := api.ParseTokenHeader(values) // the same grammar: exactly one, digits only
	if err != nil {
		h.g.writeError(w, r, err)
		return
	}
	released, err := h.locks.Release(r.Context(), name, token, h.sessionOwner(r.Context()))
	if err != nil {
		h.g.writeError(w, r, err)
		return
	}
	if released {
		h.publishLock(r, events.KindLockReleased, name, token, 0)
	}
	writeJSON(w, http.StatusOK, api.LockRelease{Name: name, Token: token, Released: released})
}

func (h *lockAPI) lockState(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	if err := h.authorizeLock(r, name); err != nil {
		h.g.writeError(w, r, err)
		return
	}
	var session api.SessionID
	if values, ok := r.URL.Query()["session"]; ok {
		if len(values) != 1 {
			h.g.writeError(w, r, fmt.Errorf("%w: at most one \"session\" query parameter", api.ErrInvalidRequest))
			return
		}
		var err error
		if session, err = api.ParseSessionID(values[0]); err != nil {
			h.g.writeError(w, r, err)
			return
		}
	}
	state, err := h.locks.LockState(r.Context(), name, session, h.sessionOwner(r.Context()))
	if err != nil {
		h.g.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, state)
}

// admitWaiter admits a lock request that may wait, if fewer than
// Config.MaxLockWaiters are being served, and returns the function that
// ends its admission; otherwise api.ErrTooManyWaiters, at once. A waiter
// costs the gateway goroutines, heap and an etcd watch for up to
// api.MaxLockWait, and a client can open thousands; the refusal comes
// before any etcd request, so it costs nothing more. The limit is of the
// requests that may wait, not of those that do: whether a request waits
// is known only from etcd, after its place is queued. A request with wait
// 0 is never refused by it, so try-locks go on while the waiters are at
// the limit.
func (h *lockAPI) admitWaiter() (release func(), err error) {
	if h.waiters != nil {
		select {
		case h.waiters <- struct{}{}:
		default:
			return nil, fmt.Errorf("acquire: %w: %d lock requests with a wait are being served, this gateway's limit: retry later, or acquire with wait 0", api.ErrTooManyWaiters, cap(h.waiters))
		}
	}
	h.waiting.Add(1)
	return func() {
		h.waiting.Add(-1)
		if h.waiters != nil {
			<-h.waiters
		}
	}, nil
}

// authorizeLock validates a lock's name and checks that the caller may
// take the lock operation on it (its resource is its name).
func (h *lockAPI) authorizeLock(r *http.Request, name string) error {
	if err := api.ValidateLockName(name); err != nil {
		return err
	}
	return h.g.authorize(r.Context(), edge.OpLock, api.Resource(name))
}

// sessionOwner is the owner that the store checks before it acts on a
// session for this request: the caller's name ("" without auth), or nil,
// no check, for an operator, an identity granted edge.OpAdmin on every
// resource (a grant with the empty prefix), which may keep alive, revoke,
// acquire with and release for any identity's session. An admin grant on
// a narrower prefix is not enough: a session may hold locks of any name.
func (h *lockAPI) sessionOwner(ctx context.Context) *string {
	return h.g.sessionOwnerOf(edge.Caller(ctx))
}

// sessionOwnerOf is sessionOwner for the identity id.
func (g *API) sessionOwnerOf(id *edge.Identity) *string {
	if g.edge.AuthEnabled() && g.edge.AuthorizeIdentity(id, edge.OpAdmin, "") == nil {
		return nil
	}
	var name string
	if id != nil {
		name = id.Name
	}
	return &name
}

// seesGrant reports whether the identity id may see the token and
// session of a grant of lock name whose session belongs to owner. It is
// the rule by which GET /v1/locks/{name}?session=<id> (lockState) shows
// the holder's token: to a caller that may take the lock (authorizeLock)
// and names the holder's session, which must be its own unless the
// caller is an operator (sessionOwner, checked by the store). Anyone
// allowed to read the lock may not hold it, and the token is all that a
// write behind a "held" token check needs: the event feed shows a lock
// event's token and session by this same rule (eventFilter), and the
// event without them to every other subscriber that may read the lock.
func (g *API) seesGrant(id *edge.Identity, name, owner string) bool {
	if g.edge.AuthorizeIdentity(id, edge.OpLock, api.Resource(name)) != nil {
		return false
	}
	checked := g.sessionOwnerOf(id)
	return checked == nil || *checked == owner
}

// decodeLockRequest reads a small JSON body into v as jsonbody.Decode
// does: members spelled as documented, once each, nothing after. An
// empty body is allowed only if emptyOK, and leaves v as it is.
func decodeLockRequest(r *http.Request, v any, emptyOK bool) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxLockRequestBytes+1))
	if err != nil {
		return fmt.Errorf("%w: reading body: %v", api.ErrInvalidRequest, err)
	}
	if len(body) > maxLockRequestBytes {
		return fmt.Errorf("%w: body over %d bytes", api.ErrBodyTooLarge, maxLockRequestBytes)
	}
	if len(body) == 0 {
		if emptyOK {
			return nil
		}
		return fmt.Errorf("%w: a JSON body is required", api.ErrInvalidRequest)
	}
	if err := jsonbody.Decode(body, v); err != nil {
		if errors.Is(err, api.ErrInvalidRequest) {
			return err
		}
		return fmt.Errorf("%w: body: %v", api.ErrInvalidRequest, err)
	}
	return nil
}
