package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"fencegate/api"
)

var (
	// ErrSessionLost means a session ended while the client relied on
	// it: a keepalive was refused (the session expired or was revoked),
	// or its TTL, less a safety margin, passed without a keepalive that
	// succeeded. Locks held through it may belong to someone else now.
	ErrSessionLost = errors.New("fencegate session lost")
	// ErrSessionClosed means the session was closed or orphaned by its
	// owner.
	ErrSessionClosed = errors.New("fencegate session closed")
)

// Session is a session on the gateway (an etcd lease), kept alive by a
// background goroutine until Close, Orphan, or its loss. Locks acquired
// through it are released when it ends. Create it with Client.NewSession.
// Its methods are safe for concurrent use.
//
// The goroutine sends a keepalive every third of the TTL. The session
// counts as lost (Done closes, Err returns ErrSessionLost) when a keepalive
// is refused, or when the TTL less a tenth of it has passed since the
// sending of the last keepalive that succeeded: the gateway renewed the
// lease after that moment, so it cannot expire earlier. The client thus
// learns of the loss before the lease can expire on the gateway, as long
// as its own clock is not more than 10% slower than the server's and it
// is not stalled itself.
type Session struct {
	c   *Client
	id  api.SessionID
	ttl time.Duration

	stop     context.CancelFunc // stops the keepalive goroutine
	stopped  chan struct{}      // closed when the goroutine has returned
	done     chan struct{}      // closed when the session ended for us
	endOnce  sync.Once
	mu       sync.Mutex
	endCause error
}

// NewSession creates a session with the given TTL, rounded up to whole
// seconds (zero means api.DefaultSessionTTL seconds), and starts keeping
// it alive. The gateway may grant more than asked for; TTL says what it
// granted. Close it when done.
func (c *Client) NewSession(ctx context.Context, ttl time.Duration) (*Session, error) {
	if ttl < 0 {
		return nil, fmt.Errorf("fencegate: negative session ttl %v", ttl)
	}
	secs := int64(math.Ceil(ttl.Seconds()))
	sent := time.Now()
	var granted api.Session
	err := c.sendJSON(ctx, request{method: http.MethodPost, path: "/v1/sessions", json: api.SessionRequest{TTL: secs}}, http.StatusCreated, &granted)
	if err != nil {
		return nil, err
	}
	if granted.ID <= 0 || granted.TTL <= 0 {
		return nil, fmt.Errorf("fencegate POST /v1/sessions: answer %+v has no session or ttl", granted)
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s := &Session{
		c:       c,
		id:      granted.ID,
		ttl:     time.Duration(granted.TTL) * time.Second,
		stop:    stop,
		stopped: make(chan struct{}),
		done:    make(chan struct{}),
	}
	go s.keepAlive(runCtx, sent)
	return s, nil
}

// ID returns the session's id.
func (s *Session) ID() api.SessionID { return s.id }

// TTL returns the session's TTL as granted.
func (s *Session) TTL() time.Duration { return s.ttl }

// Done returns a channel that is closed when the session ends for this
// client: lost, closed or orphaned.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns nil while the session is kept alive, then why it ended: an
// error wrapping ErrSessionLost or ErrSessionClosed.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endCause
}

// end records why the session ended, once, and closes Done.
func (s *Session) end(cause error) {
	s.endOnce.Do(func() {
		s.mu.Lock()
		s.endCause = cause
		s.mu.Unlock()
		close(s.done)
	})
}

// Orphan stops keeping the session alive, without revoking it: the gateway
// lets it expire after its TTL, and releases its locks then. It is what a
// process that stalls looks like from outside, and a way to hand a session
// over to another process, which keeps it alive by its ID.
func (s *Session) Orphan() {
	s.stop()
	<-s.stopped
	s.end(fmt.Errorf("session %s: %w (orphaned)", s.id, ErrSessionClosed))
}

// Close stops keeping the session alive and revokes it, which releases
// every lock it holds at once. Revoking a session that is gone already is
// not an error. If the revocation fails, the session expires after its
// TTL.
func (s *Session) Close(ctx context.Context) error {
	s.stop()
	<-s.stopped
	s.end(fmt.Errorf("session %s: %w", s.id, ErrSessionClosed))
	err := s.c.sendJSON(ctx, request{method: http.MethodDelete, path: "/v1/sessions/" + s.id.String()}, http.StatusNoContent, nil)
	if errors.Is(err, api.ErrSessionNotFound) {
		return nil
	}
	return err
}

// lossMargin is how much earlier than the TTL the client gives up on a
// session that it could not keep alive.
func lossMargin(ttl time.Duration) time.Duration { return ttl / 10 }

// keepAlive renews the session every ttl/3 until ctx is done or the
// session is lost. created is when the request that created the session
// was sent.
func (s *Session) keepAlive(ctx context.Context, created time.Time) {
	defer close(s.stopped)
	ttl := s.ttl
	expires := created.Add(ttl - lossMargin(ttl)) // our deadline, before the lease's
	next := created.Add(ttl / 3)
	for {
		timer := time.NewTimer(time.Until(earliest(next, expires)))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		if !time.Now().Before(expires) {
			s.end(fmt.Errorf("session %s: %w: no keepalive succeeded within its ttl %v", s.id, ErrSessionLost, ttl))
			return
		}
		sent := time.Now()
		rctx, cancel := context.WithDeadline(ctx, expires)
		var kept api.Session
		err := s.c.sendJSON(rctx, request{method: http.MethodPost, path: "/v1/sessions/" + s.id.String() + "/keepalive"}, http.StatusOK, &kept)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && kept.TTL > 0:
			ttl = time.Duration(kept.TTL) * time.Second
			expires = sent.Add(ttl - lossMargin(ttl))
			next = sent.Add(ttl / 3)
		case errors.Is(err, api.ErrSessionNotFound):
			s.end(fmt.Errorf("session %s: %w: %w", s.id, ErrSessionLost, err))
			return
		default:
			// The gateway or etcd is unreachable, or answered oddly: try
			// again soon, until the deadline.
			next = time.Now().Add(max(ttl/20, 50*time.Millisecond))
		}
	}
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// bind returns a context derived from parent that is also cancelled, with
// the session's Err as its cause, when the session ends. Call stop when
// done with it.
func (s *Session) bind(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	unbound := make(chan struct{})
	go func() {
		select {
		case <-s.done:
			cancel(s.Err())
		case <-unbound:
		case <-ctx.Done():
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			close(unbound)
			cancel(context.Canceled)
		})
	}
}
