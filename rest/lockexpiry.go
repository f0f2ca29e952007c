package rest

import (
	"context"
	"sync"
	"time"

	"fencegate/api"
	"fencegate/events"
)

// LockExpiries reports the lock grants lost with their session's lease:
// because the session expired, or because it was revoked.
// tokenstore.Store implements it; WithLocks uses it when the LockService
// it is given implements it too.
type LockExpiries interface {
	// WatchLockExpiries calls fn, from one goroutine, for each grant lost
	// with its session's lease (never one released), with the name of the
	// identity that owned the session and whether the session was revoked
	// (false: it expired), whichever gateway revoked it, from about the
	// call on, until ctx ends; then it returns ctx's error.
	WatchLockExpiries(ctx context.Context, fn func(grant api.LockGrant, holder string, revoked bool)) error
}

// lockExpiryFeed publishes lock.expired and lock.revoked events on the
// gateway's feed.
// It watches its source only while the feed has subscribers: the first
// subscriber starts the watch, and the last one to leave stops it, so
// that a gateway nobody watches holds no etcd watch and spends nothing.
// The watch sees every gateway's locks: each gateway with subscribers
// publishes each expiry or revoke once to its own subscribers, whichever
// gateway granted the lock or revoked its session.
type lockExpiryFeed struct {
	source LockExpiries
	hub    *events.Hub

	mu    sync.Mutex
	users int // subscribers joined
	// stop ends the running watch; nil when none runs.
	stop context.CancelFunc
	// done is closed when the last watch started has ended; nil before
	// the first.
	done chan struct{}
}

// join counts a subscriber in, starting the watch for the first, and
// returns the function that counts it out (once), stopping the watch
// when it was the last. A nil feed (no source) does nothing.
func (f *lockExpiryFeed) join() (leave func()) {
	if f == nil {
		return func() {}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users++
	if f.users == 1 {
		ctx, cancel := context.WithCancel(context.Background())
		previous, done := f.done, make(chan struct{})
		f.stop, f.done = cancel, done
		go f.watch(ctx, previous, done)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.users--; f.users == 0 {
				f.stop()
				f.stop = nil
			}
		})
	}
}

// watch publishes expiries and revokes until ctx ends, then closes done.
// It starts only once the watch before it (previous, nil: none) has
// ended, and ends only after it, even when stopped before its turn: so
// the watches end in the order they were started, and never do two run
// at once, which would publish one twice. A new watch starts from etcd's
// revision of then, after the last one the previous could have
// published.
func (f *lockExpiryFeed) watch(ctx context.Context, previous <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	if previous != nil {
		<-previous // stopped already, when the last subscriber left
	}
	if ctx.Err() == nil {
		_ = f.source.WatchLockExpiries(ctx, f.publish) // ends with ctx
	}
}

// publish publishes the loss of grant, owned by holder, to its session's
// expiry, or its revoke. The event's time is when this gateway learned
// it: etcd does not record when a lease ended. It carries no identity
// (no request of this gateway's made it: the revoke may have been
// another's) and no waiters.
func (f *lockExpiryFeed) publish(grant api.LockGrant, holder string, revoked bool) {
	if !f.hub.Active() {
		return
	}
	kind := events.KindLockExpired
	if revoked {
		kind = events.KindLockRevoked
	}
	f.hub.Publish(&events.Event{
		Time:     time.Now(),
		Kind:     kind,
		Resource: grant.Name,
		Token:    grant.Token,
		Session:  grant.Session.String(),
		Holder:   holder,
		// The session's owner: its token and session go to the
		// subscribers the lock API shows them to (seesGrant).
		SessionOwner: holder,
	})
}
