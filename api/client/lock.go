package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"fencegate/api"
)

// Lock is a lock held through a session. Its Token is a fencing token:
// send it with every write that the lock protects.
type Lock struct {
	Name  string
	Token api.Token
	s     *Session
}

// Session returns the session the lock is bound to: the lock is released
// when it ends.
func (l *Lock) Session() *Session { return l.s }

// Unlock releases the lock. It removes only this grant (by its token), so
// calling it again, or after the session ended, never releases a later
// holder; neither is an error.
func (l *Lock) Unlock(ctx context.Context) error {
	var rel api.LockRelease
	return l.s.c.sendJSON(ctx, request{
		method: http.MethodDelete,
		path:   "/v1/locks/" + l.Name,
		query:  url.Values{"token": {l.Token.String()}},
	}, http.StatusOK, &rel)
}

// LockState reads whether a lock is held and its queue length, naming the
// session: when the session holds the lock, the answer's Holder is its
// token. A session of another identity is refused (api.ErrForbidden).
func (s *Session) LockState(ctx context.Context, name string) (api.LockState, error) {
	if err := api.ValidateLockName(name); err != nil {
		return api.LockState{}, err
	}
	var st api.LockState
	err := s.c.sendJSON(ctx, request{
		method: http.MethodGet,
		path:   "/v1/locks/" + name,
		query:  url.Values{"session": {s.id.String()}},
	}, http.StatusOK, &st)
	return st, err
}

// Lock acquires the lock name for the session, waiting until it is
// granted, ctx is done, or the session ends (then the error wraps
// ErrSessionLost or ErrSessionClosed). Waiters are served in the order
// they queued.
//
// The wait is a series of long polls of at most api.MaxLockWait each. A
// poll that runs out leaves the queue, and the next one queues again at
// the back: a wait longer than api.MaxLockWait may be overtaken by
// acquirers that arrived while the client was between two polls. A poll
// that the gateway refuses because it serves as many waiters as it may
// (api.ErrTooManyWaiters: nothing was queued) is sent again after the
// answer's Retry-After.
func (s *Session) Lock(ctx context.Context, name string) (*Lock, error) {
	for {
		wait := api.MaxLockWait
		if deadline, ok := ctx.Deadline(); ok {
			// Leave time for the answer to come back before ctx ends.
			wait = min(wait, time.Until(deadline)*9/10)
		}
		l, err := s.acquire(ctx, name, max(wait, 0))
		switch {
		case ctx.Err() != nil || s.Err() != nil:
		case errors.Is(err, api.ErrLockTimeout) && wait == api.MaxLockWait:
			continue // a long poll ran out: poll again
		case errors.Is(err, api.ErrTooManyWaiters):
			if serr := sleep(ctx, retryDelay(err)); serr != nil {
				return nil, fmt.Errorf("lock %s: %w (after %w)", name, serr, err)
			}
			continue
		}
		return l, err
	}
}

// retryDelay is the Retry-After of err's answer, or a second.
func retryDelay(err error) time.Duration {
	if e, ok := errors.AsType[*Error](err); ok && e.retryAfter > 0 {
		return e.retryAfter
	}
	return time.Second
}

// sleep waits for d, or returns ctx's error when ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TryLock acquires the lock name if it is free, without waiting; if it is
// held, the error wraps api.ErrLockTimeout.
func (s *Session) TryLock(ctx context.Context, name string) (*Lock, error) {
	return s.acquire(ctx, name, 0)
}

// acquire makes one POST /v1/locks/{name} with the given wait.
func (s *Session) acquire(ctx context.Context, name string, wait time.Duration) (*Lock, error) {
	if err := api.ValidateLockName(name); err != nil {
		return nil, err
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	bound, stop := s.bind(ctx)
	defer stop()
	var grant api.LockGrant
	err := s.c.sendJSON(bound, request{
		method: http.MethodPost,
		path:   "/v1/locks/" + name,
		json:   api.LockRequest{Session: s.id, Wait: wait.Seconds()},
	}, http.StatusOK, &grant)
	if err != nil {
		if cause := context.Cause(bound); ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
			return nil, fmt.Errorf("lock %s: %w", name, cause) // the session ended while we waited
		}
		return nil, err
	}
	if grant.Token == 0 || grant.Name != name {
		return nil, fmt.Errorf("fencegate POST /v1/locks/%s: answer %+v has no token", name, grant)
	}
	return &Lock{Name: name, Token: grant.Token, s: s}, nil
}

// WithLock runs fn while holding the lock name, in a session of its own
// (TTL: Client.SessionTTL), and then releases the lock and ends the
// session. fn gets the lock's fencing token, to send with its writes, and
// a ctx that is cancelled, with a cause wrapping ErrSessionLost, when the
// session is lost (see Session): fn should stop then, since another
// holder may already have the lock.
//
// WithLock returns fn's error; if the session was lost while fn ran, the
// error also wraps ErrSessionLost, whatever fn returned. Errors before fn
// runs (the gateway unreachable, ctx done while waiting) are returned
// without running fn.
func (c *Client) WithLock(ctx context.Context, name string, fn func(ctx context.Context, token api.Token) error) error {
	s, err := c.NewSession(ctx, c.SessionTTL)
	if err != nil {
		return fmt.Errorf("with lock %s: %w", name, err)
	}
	defer func() {
		// Revoking the session releases the lock too, even after ctx
		// ended; if it fails, the session expires after its TTL.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.Close(cctx)
	}()
	l, err := s.Lock(ctx, name)
	if err != nil {
		return fmt.Errorf("with lock %s: %w", name, err)
	}
	fnCtx, stop := s.bind(ctx)
	fnErr := fn(fnCtx, l.Token)
	stop()
	if lost := s.Err(); lost != nil {
		return errors.Join(fmt.Errorf("with lock %s: %w", name, lost), fnErr)
	}
	return fnErr
}
