package tokenstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
)

// Sessions and locks: the token issuer behind the lock API.
//
// A session is an etcd lease that fencegate granted as one, and belongs to
// the identity that created it. A lock is a queue of keys, one per session
// waiting for it or holding it. Every key is bound to its session's lease,
// so that it goes with it:
//
//	<prefix>sessions/<session id in hex>     the session's record: the name
//	                                         of the identity that created it
//	                                         ("" without auth)
//	<prefix>locks/<name>/<session id in hex> the session's place in lock
//	                                         name's queue (empty value)
//	<prefix>owner-sessions/<owner>/<session id in hex>
//	                                         the owner's index of its
//	                                         sessions (owner path-escaped,
//	                                         so that it has no "/")
//	<prefix>session-locks/<session id in hex>/<name>
//	                                         the session's index of its
//	                                         places in queues
//	<prefix>revoking/<session id in hex>     written by RevokeSession just
//	                                         before the revoke, so that the
//	                                         lease's end is told from an
//	                                         expiry (lockexpiry.go)
//
// The two indexes exist so that the limits (Config.MaxSessionsPerIdentity,
// MaxLocksPerSession) can be counted in etcd, for every gateway at once,
// with one range count. Each index key is written in the transaction that
// writes the key it indexes, bound to the same lease, and deleted in the
// transaction that deletes it (or with the lease), so an index counts
// exactly the live keys it indexes. Places and sessions created by a
// version without the indexes are not counted until they end.
//
// etcd cannot compare a count in a transaction, so each limit is checked
// optimistically: read the index's count at revision R; if it is below
// the limit, commit the new keys only if no key of the index was created
// (or changed) after R, a compare on the whole range
// (ModRevision(index) < R+1 with a prefix; an empty range passes). Keys
// deleted since R only lower the count. So when the transaction commits,
// the index holds at most the keys it held at R, plus the new one: at most
// the limit. When the compare fails, another creation won the race; the
// transaction's Else branch counts again at its own revision and the call
// tries again from there (each failure is another caller's success, so
// the tries are bounded by the limit; a bound on attempts is kept anyway).
//
// A lease is a session only while its record exists. The store binds keys
// to other leases too (a partner request's in-flight marker, stored
// idempotency answers: see partner.go), and lease ids can be guessed; a
// lease without a record is no session, whoever asks: keeping it alive,
// revoking it and acquiring with it fail with api.ErrSessionNotFound and
// leave it alone, for operators too.
//
// Only the owner may keep a session alive, revoke it, acquire with it, or
// release its grants; the other calls fail with api.ErrForbidden and change
// nothing. The caller passes the owner to check, or nil for any (the
// gateway passes nil for an operator). Acquire and Release check the
// record in the transaction that does the work (a compare on it, the work
// nested in the branch it allows); KeepAlive and RevokeSession read it
// first, since a lease request cannot be part of a transaction (see
// checkSession for why the read stays true until the lease request).
//
// The key created first (the smallest create revision) holds the lock, and
// its create revision is the holder's fencing token: etcd revisions grow
// across the whole cluster, so every later grant of any lock has a larger
// token. This is etcd's concurrency.Mutex (client/v3/concurrency/mutex.go),
// with the waiting done here so that HTTP clients can long-poll:
//
//   - Acquire puts the session's key and reads the oldest key in one
//     transaction; when it is the oldest, the lock is held at once.
//   - Otherwise the waiter watches only the key just ahead of its own (the
//     largest create revision below its own) for its deletion, then looks
//     again. A release or an expiry deletes one key, which exactly one
//     waiter watches: no thundering herd, and waiters are served in the
//     order their keys were created (FIFO).
//   - A session that ends (revoked, or expired because nobody kept it alive)
//     loses its keys with its lease, in one revision: the lock passes on
//     after the TTL even if its holder vanished.

// lockQueue returns the key prefix of lock name's queue.
func (s *Store) lockQueue(name string) string { return s.prefix + "locks/" + name + "/" }

// sessionKey returns the key of session id's record.
func (s *Store) sessionKey(id api.SessionID) string { return s.prefix + "sessions/" + id.String() }

// ownerSessions returns the key prefix of owner's index of sessions. The
// owner is path-escaped, which is one to one and leaves no "/": the index
// of "a" does not contain that of "a/b".
func (s *Store) ownerSessions(owner string) string {
	return s.prefix + "owner-sessions/" + url.PathEscape(owner) + "/"
}

// sessionLocks returns the key prefix of session id's index of places in
// queues; a place's index key is this plus the lock's name, which has no
// "/".
func (s *Store) sessionLocks(id api.SessionID) string {
	return s.prefix + "session-locks/" + id.String() + "/"
}

// limitAttempts bounds the transactions of one call that checks limit
// (see above). Each failed attempt is another creation's success, so
// while the index stays below the limit a call fails at most limit times
// before the count reaches it (and the call answers that the limit is
// reached); the extra attempts cover keys that ended meanwhile and made
// room again. Concurrent creations of one identity must not fail as if
// etcd had: a fixed small bound gave 76 of 100 concurrent creations 503.
func limitAttempts(limit int64) int64 { return limit + 16 }

// belowLimit is the compare that lets a limited creation commit: no key
// of index was created or changed after revision rev, at which it held
// fewer keys than the limit.
func belowLimit(index string, rev int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(index), "<", rev+1).WithPrefix()
}

// CreateSession grants a session that belongs to owner (the identity's
// name; "" without auth): an etcd lease of ttl seconds (zero means
// api.DefaultSessionTTL), and the session's record and owner's index key
// bound to it, which make the lease a session. etcd may grant more than
// asked for, never less; the answer says what it granted.
//
// When owner has Config.MaxSessionsPerIdentity live sessions already, the
// call fails with api.ErrTooManySessions: at once, before any lease is
// granted, when a count says so; otherwise the lease is revoked. The count
// is of owner's index, in etcd, so the limit holds across every gateway
// (see the top of this file for why it cannot be overshot). When the
// record cannot be written, the lease is revoked and the call fails with
// api.ErrUnavailable. Creations for one owner through this Store take
// turns (indexturns.go), so only another gateway's creation can win the
// count's race; a lost race is tried again, on a lease kept fresh
// meanwhile (keepLeaseFresh), so that a long run of them is neither
// answered as etcd unavailable nor with a lease about to expire.
func (s *Store) CreateSession(ctx context.Context, ttl int64, owner string) (api.Session, error) {
	const op = "create session"
	if ttl == 0 {
		ttl = api.DefaultSessionTTL
	}
	if ttl < api.MinSessionTTL || ttl > api.MaxSessionTTL {
		return api.Session{}, fmt.Errorf("%w: session ttl %d: want %d to %d seconds", api.ErrInvalidRequest, ttl, api.MinSessionTTL, api.MaxSessionTTL)
	}
	index := s.ownerSessions(owner)
	if s.maxSessions >= 0 {
		// Refuse an owner at its limit before granting a lease.
		if _, err := s.countSessions(ctx, op, index); err != nil {
			return api.Session{}, err
		}
	}
	sess, fresh, err := s.grantLease(ctx, ttl)
	if err != nil {
		return api.Session{}, err
	}
	var rev int64 // the revision at which index held fewer than the limit
	if s.maxSessions >= 0 {
		// The lease is granted outside the turn, which holds only what
		// must be in order: the count and the commit.
		release, err := s.limited.take(ctx, s.turnOf(index, &owner))
		if err != nil {
			return api.Session{}, s.abandonLease(ctx, clientv3.LeaseID(sess.ID), fmt.Errorf("%s: %w: waiting for the owner's other creations: %w", op, api.ErrUnavailable, err))
		}
		defer release()
		// Counted again: the owner's creations that committed while this
		// one waited for its turn are in this count.
		if rev, err = s.countSessions(ctx, op, index); err != nil {
			return api.Session{}, s.abandonLease(ctx, clientv3.LeaseID(sess.ID), err)
		}
	}
	for attempt := int64(1); ; attempt++ {
		// The wait for the turn, and each lost race, age the lease.
		if sess, fresh, err = s.keepLeaseFresh(ctx, sess, fresh, ttl); err != nil {
			return api.Session{}, err
		}
		lease := clientv3.WithLease(clientv3.LeaseID(sess.ID))
		writes := []clientv3.Op{clientv3.OpPut(s.sessionKey(sess.ID), owner, lease), clientv3.OpPut(index+sess.ID.String(), "", lease)}
		var limit []clientv3.Cmp
		if s.maxSessions >= 0 {
			limit = append(limit, belowLimit(index, rev))
		}
		pctx, cancel := context.WithTimeout(ctx, s.timeout)
		put, err := s.client.Txn(pctx).If(limit...).Then(writes...).
			Else(clientv3.OpGet(index, clientv3.WithPrefix(), clientv3.WithCountOnly())).Commit()
		cancel()
		if err != nil {
			return api.Session{}, s.abandonLease(ctx, clientv3.LeaseID(sess.ID), fmt.Errorf("%s: recording its owner: %w: %w", op, api.ErrUnavailable, err))
		}
		s.observeHeader(put.Header)
		if put.Succeeded {
			return sess, nil
		}
		// Another session of owner was created since rev: count again.
		switch count := put.Responses[0].GetResponseRange().Count; {
		case count >= s.maxSessions:
			return api.Session{}, s.abandonLease(ctx, clientv3.LeaseID(sess.ID), tooManySessionsError(s.maxSessions))
		case attempt >= limitAttempts(s.maxSessions):
			return api.Session{}, s.abandonLease(ctx, clientv3.LeaseID(sess.ID), fmt.Errorf("%s: %w: the owner's sessions changed %d times while counting them", op, api.ErrUnavailable, attempt))
		}
		rev = put.Header.Revision
	}
}

// countSessions counts owner's index of sessions and answers the revision
// of the count, or api.ErrTooManySessions when the owner is at its limit.
func (s *Store) countSessions(ctx context.Context, op, index string) (rev int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.client.Get(ctx, index, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("%s: counting the owner's sessions: %w: %w", op, api.ErrUnavailable, err)
	}
	s.observeHeader(resp.Header)
	if resp.Count >= s.maxSessions {
		return 0, tooManySessionsError(s.maxSessions)
	}
	return resp.Header.Revision, nil
}

// grantLease grants the lease of a session to be, of ttl seconds, and
// answers it with the time just before it was asked for: the lease lasts
// at least its TTL from then.
func (s *Store) grantLease(ctx context.Context, ttl int64) (api.Session, time.Time, error) {
	asked := time.Now()
	gctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.client.Grant(gctx, ttl)
	if err != nil {
		return api.Session{}, time.Time{}, fmt.Errorf("create session: %w: %w", api.ErrUnavailable, err)
	}
	s.observeHeader(resp.ResponseHeader)
	return api.Session{ID: api.SessionID(resp.ID), TTL: resp.TTL}, asked, nil
}

// keepLeaseFresh is called by CreateSession before it tries again after
// a lost race, with the lease it holds for the session to be and the time
// that lease's TTL was last started (fresh). The tries may go on for a
// while, one per creation that won meanwhile, and the lease was granted
// before the first: it must neither run out before the record is written
// (the write would fail as if etcd had) nor be answered with less time
// left than its TTL. Once a third of its TTL has passed, it is renewed;
// if it has expired already, which leaves nothing behind since no try
// wrote anything bound to it, another of ttl seconds is granted.
func (s *Store) keepLeaseFresh(ctx context.Context, sess api.Session, fresh time.Time, ttl int64) (api.Session, time.Time, error) {
	if time.Since(fresh) < time.Duration(sess.TTL)*time.Second/3 {
		return sess, fresh, nil
	}
	asked := time.Now()
	kctx, cancel := context.WithTimeout(ctx, s.timeout)
	resp, err := s.client.KeepAliveOnce(kctx, clientv3.LeaseID(sess.ID))
	cancel()
	switch {
	case err == nil:
		s.observeHeader(resp.ResponseHeader)
		return api.Session{ID: sess.ID, TTL: resp.TTL}, asked, nil
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return s.grantLease(ctx, ttl)
	}
	return api.Session{}, time.Time{}, s.abandonLease(ctx, clientv3.LeaseID(sess.ID), fmt.Errorf("create session: renewing its lease: %w: %w", api.ErrUnavailable, err))
}

// tooManySessionsError refuses a session past the limit of its owner.
func tooManySessionsError(limit int64) error {
	return fmt.Errorf("create session: %w: the identity has %d live sessions, its limit: revoke one, or let one expire", api.ErrTooManySessions, limit)
}

// abandonLease revokes lease, granted for a session that is not to be,
// even though ctx may be done, and returns err, the reason. Without its
// record the lease is no session; if the revoke fails too, nobody knows
// its id, and it expires after its TTL.
func (s *Store) abandonLease(ctx context.Context, lease clientv3.LeaseID, err error) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	if _, rerr := s.client.Revoke(rctx, lease); rerr != nil {
		return fmt.Errorf("%w (then revoking %s failed: %v)", err, api.SessionID(lease), rerr)
	}
	return err
}

// KeepAlive renews a session's lease once, for its whole TTL from now, if
// it belongs to owner (nil: to anyone). A session that expired or was
// revoked, and a lease that is no session, are api.ErrSessionNotFound;
// another identity's session is api.ErrForbidden. Neither is renewed.
func (s *Store) KeepAlive(ctx context.Context, id api.SessionID, owner *string) (api.Session, error) {
	const op = "keep session alive"
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.checkSession(ctx, op, id, owner); err != nil {
		return api.Session{}, err
	}
	resp, err := s.client.KeepAliveOnce(ctx, clientv3.LeaseID(id))
	if err != nil {
		return api.Session{}, sessionError(op, id, err)
	}
	s.observeHeader(resp.ResponseHeader)
	return api.Session{ID: id, TTL: resp.TTL}, nil
}

// RevokeSession ends a session that belongs to owner (nil: to anyone) at
// once: every lock it holds is released and every queue it waits in is
// left, in one etcd revision. A session that expired or was revoked
// already, and a lease that is no session, are api.ErrSessionNotFound;
// another identity's session is api.ErrForbidden. Neither is revoked.
//
// The owner's check is a transaction that also writes the session's
// revoke marker, bound to its lease (see lockexpiry.go: it tells
// WatchLockExpiries that the lease's end is no expiry); what the check
// finds stays true until the revoke, as for checkSession.
func (s *Store) RevokeSession(ctx context.Context, id api.SessionID, owner *string) error {
	const op = "revoke session"
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	mark := clientv3.OpPut(s.revokingKey(id), "", clientv3.WithLease(clientv3.LeaseID(id)))
	if _, _, err := s.commitOwned(ctx, op, id, owner, clientv3.OpTxn(nil, []clientv3.Op{mark}, nil)); err != nil {
		return err
	}
	resp, err := s.client.Revoke(ctx, clientv3.LeaseID(id))
	if err != nil {
		return sessionError(op, id, err)
	}
	s.observeHeader(resp.Header)
	return nil
}

// checkSession reads session id's record and fails unless the lease is a
// session (api.ErrSessionNotFound: no record) that belongs to owner (nil:
// to anyone; otherwise api.ErrForbidden).
//
// KeepAlive and RevokeSession call it, then send their lease request: etcd
// cannot renew or revoke a lease inside a transaction. What the read finds
// stays true until that request, for a record is written only by
// CreateSession, under the id of the lease it was just granted and bound
// to that lease, and goes with it in the revision that ends it. So while
// the record exists, lease id is that session, never a lease of another
// kind. What can happen in between is that the session ends (expires, or
// another call revokes it): the lease request then finds no lease, and the
// answer is api.ErrSessionNotFound, as if the read came after. A lease
// granted meanwhile cannot take over the id: etcd picks each lease id from
// its member's generator of unique ids (member id, start time, counter)
// and refuses to grant an id in use; only a client that names the id of
// its grant, which this store never does, could re-create an ended one.
func (s *Store) checkSession(ctx context.Context, op string, id api.SessionID, owner *string) error {
	resp, err := s.client.Get(ctx, s.sessionKey(id))
	if err != nil {
		return fmt.Errorf("%s %s: %w: %w", op, id, api.ErrUnavailable, err)
	}
	s.observeHeader(resp.Header)
	switch {
	case len(resp.Kvs) == 0:
		return noSessionError(op, id)
	case owner != nil && string(resp.Kvs[0].Value) != *owner:
		return notOwnerError(op, id)
	}
	return nil
}

// commitOwned commits inner, a transaction (clientv3.OpTxn), nested in one
// that runs it only if session is a session (its record exists) that
// belongs to owner (nil: to anyone), and returns inner's answer and the
// revision of the whole. The check costs no round trip of its own.
// Errors: api.ErrSessionNotFound when the session does not exist (no
// record: it ended, or the lease is no session), and inner did not run;
// api.ErrForbidden when it is another identity's (inner did not run);
// api.ErrUnavailable when etcd failed.
func (s *Store) commitOwned(ctx context.Context, op string, session api.SessionID, owner *string, inner clientv3.Op) (*etcdserverpb.TxnResponse, int64, error) {
	key := s.sessionKey(session)
	// A missing key's create revision compares as 0; a Value compare on a
	// missing key is always false.
	allowed := clientv3.Compare(clientv3.CreateRevision(key), ">", 0)
	if owner != nil {
		allowed = clientv3.Compare(clientv3.Value(key), "=", *owner)
	}
	resp, err := s.client.Txn(ctx).If(allowed).Then(inner).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return nil, 0, sessionError(op, session, err)
	}
	s.revisions.observe(resp.Header.Revision)
	switch {
	case resp.Succeeded:
		return resp.Responses[0].GetResponseTxn(), resp.Header.Revision, nil
	case len(resp.Responses[0].GetResponseRange().Kvs) == 0:
		return nil, 0, noSessionError(op, session)
	}
	return nil, 0, notOwnerError(op, session)
}

// noSessionError is the error for a lease without a session record: a
// session that ended, or a lease that never was one.
func noSessionError(op string, id api.SessionID) error {
	return fmt.Errorf("%s %s: %w", op, id, api.ErrSessionNotFound)
}

// notOwnerError refuses the caller a session that belongs to another
// identity, without naming it.
func notOwnerError(op string, id api.SessionID) error {
	return fmt.Errorf("%s %s: %w: the session belongs to another identity", op, id, api.ErrForbidden)
}

// sessionError maps etcd's "lease not found" to api.ErrSessionNotFound and
// anything else to api.ErrUnavailable.
func sessionError(op string, id api.SessionID, err error) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("%s %s: %w", op, id, api.ErrSessionNotFound)
	}
	return fmt.Errorf("%s %s: %w: %w", op, id, api.ErrUnavailable, err)
}

// Acquire takes lock name for session, waiting at most wait for the
// holders and waiters ahead of it. It answers the grant, whose token is
// the create revision of the session's queue key.
//
// Acquiring again with a session that already holds or waits for the lock
// finds its place: the same token, so a retried request is harmless. A
// session may hold a lock only once.
//
// The session must exist and belong to owner (nil: to anyone): the check
// is a compare on its record in the transaction that queues it.
//
// Errors: api.ErrLockTimeout when the wait ran out (the session's place in
// the queue is removed; with a zero wait, no place was ever queued, and
// the call wrote nothing to etcd); api.ErrSessionNotFound for a session that does not
// exist (ended, or a lease that is no session: nothing was queued);
// api.ErrForbidden for another identity's session (nothing was
// queued); api.ErrTooManyLocks when the session has
// Config.MaxLocksPerSession places already, held or waited for, and none
// in this queue (nothing was queued); api.ErrLockNotHeld when the session's place vanished while it
// waited (its session ended, or it was released by token);
// api.ErrUnavailable when etcd failed, in which case the session may still
// have a place in the queue: acquire again with it, or revoke it. When ctx
// ends first, its error, after the place is removed.
func (s *Store) Acquire(ctx context.Context, name string, session api.SessionID, owner *string, wait time.Duration) (api.LockGrant, error) {
	if err := api.ValidateLockName(name); err != nil {
		return api.LockGrant{}, err
	}
	if session <= 0 {
		return api.LockGrant{}, fmt.Errorf("%w: no session", api.ErrInvalidRequest)
	}
	if wait < 0 {
		return api.LockGrant{}, fmt.Errorf("%w: negative wait", api.ErrInvalidRequest)
	}
	queue := s.lockQueue(name)
	key := queue + session.String()
	grant := api.LockGrant{Name: name, Session: session}
	myRev, holder, err := s.queueUp(ctx, name, session, owner, wait == 0)
	if err != nil {
		return api.LockGrant{}, err
	}
	if myRev == 0 { // a zero wait, and the lock is another session's: nothing was queued
		return api.LockGrant{}, fmt.Errorf("acquire %s: %w after %v", name, api.ErrLockTimeout, wait)
	}
	grant.Token = api.Token(myRev)
	if holder == myRev {
		return grant, nil
	}

	waitCtx, cancelWait := context.WithTimeout(ctx, wait)
	defer cancelWait()
	err = context.DeadlineExceeded // a zero wait does not wait
	if wait > 0 {
		err = s.waitTurn(waitCtx, queue, key, myRev)
	}
	if err == nil {
		return grant, nil
	}
	// Leave the queue, removing only our own place (the key with our
	// create revision), even though ctx may be done.
	cleanupCtx, cancelCleanup := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancelCleanup()
	if _, lerr := s.release(cleanupCtx, myRev, key, s.sessionLocks(session)+name); lerr != nil {
		// Still queued, perhaps: the session's end will remove the key.
		return api.LockGrant{}, fmt.Errorf("acquire %s: %v; then leaving the queue failed: %w", name, err, lerr)
	}
	switch {
	case ctx.Err() != nil:
		return api.LockGrant{}, fmt.Errorf("acquire %s: %w", name, ctx.Err())
	case waitCtx.Err() != nil && !errors.Is(err, api.ErrLockNotHeld):
		return api.LockGrant{}, fmt.Errorf("acquire %s: %w after %v", name, api.ErrLockTimeout, wait)
	}
	return api.LockGrant{}, fmt.Errorf("acquire %s: %w", name, err)
}

// queueUp puts session's key in lock name's queue, with its index key,
// or finds the key that is there already, and reads the holder, in one
// transaction that checks, as concurrency.Mutex's tryAcquire does, and
// only if the session is owner's (commitOwned). It returns the key's
// create revision (the session's token) and the holder's (0: none).
//
// With a limit on the session's places (Config.MaxLocksPerSession), the
// put also needs the session's index below the limit, as counted by a
// read before (see the top of this file): a read-only transaction, which
// also refuses another identity's session and a session at its limit
// without a write. A session at its limit still finds a place it has:
// acquiring again is a retry, and queues nothing new. The session's
// acquires by one caller through this Store take turns at this
// (indexturns.go), so only another gateway's can win the count's race.
//
// With noWait (an acquire with a zero wait), the put also needs the queue
// to be empty: a place queued behind a holder would only be removed again
// at once, two etcd revisions for an answer of "held". A compare on the
// queue's prefix holds for every key in it, and on an empty range is
// evaluated against a zero key (see heldTxn), so
// CreateRevision(queue*) = 0 is "the queue is empty". When it is not, and
// the session has no place of its own there (which it finds, as above),
// queueUp writes nothing and returns myRev 0 with the holder's create
// revision.
func (s *Store) queueUp(ctx context.Context, name string, session api.SessionID, owner *string, noWait bool) (myRev, holder int64, err error) {
	op := "acquire " + name + ": session"
	queue := s.lockQueue(name)
	key := queue + session.String()
	index := s.sessionLocks(session)
	// Each request has its own timeout (Config.RequestTimeout bounds each
	// etcd request): the tries after lost races are requests of their
	// own, and under a burst of acquires by one session there may be as
	// many as the limit; under one timeout for all, the late ones would
	// fail as if etcd had.
	var rev int64 // the revision at which index held fewer than the limit
	if s.maxLocks >= 0 {
		release, err := s.limited.take(ctx, s.turnOf(index, owner))
		if err != nil {
			return 0, 0, fmt.Errorf("%s %s: %w: waiting for its other acquires: %w", op, session, api.ErrUnavailable, err)
		}
		defer release()
		var (
			count    int64
			hasPlace bool
		)
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		rev, count, hasPlace, err = s.countPlaces(rctx, op, session, owner, key)
		cancel()
		if err != nil {
			return 0, 0, err
		}
		if !hasPlace && count >= s.maxLocks {
			return 0, 0, fmt.Errorf("%s %s: %w: it holds and waits for %d locks, its limit: release one, or use another session", op, session, api.ErrTooManyLocks, s.maxLocks)
		}
	}
	first := clientv3.OpGet(queue, clientv3.WithFirstCreate()...)
	lease := clientv3.WithLease(clientv3.LeaseID(session))
	for attempt := int64(1); ; attempt++ {
		put := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}
		if s.maxLocks >= 0 {
			put = append(put, belowLimit(index, rev))
		}
		if noWait {
			put = append(put, clientv3.Compare(clientv3.CreateRevision(queue), "=", 0).WithPrefix())
		}
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		resp, txnRev, err := s.commitOwned(rctx, op, session, owner, clientv3.OpTxn(put,
			[]clientv3.Op{clientv3.OpPut(key, "", lease), clientv3.OpPut(index+name, "", lease), first},
			[]clientv3.Op{clientv3.OpGet(key), first, clientv3.OpGet(index, clientv3.WithPrefix(), clientv3.WithCountOnly())}))
		cancel()
		if err != nil {
			return 0, 0, err
		}
		if resp.Succeeded {
			return txnRev, firstCreate(resp.Responses[2]), nil
		}
		switch mine := resp.Responses[0].GetResponseRange().GetKvs(); {
		case len(mine) > 0: // our place, from before
			return mine[0].CreateRevision, firstCreate(resp.Responses[1]), nil
		case s.maxLocks >= 0 && resp.Responses[2].GetResponseRange().Count >= s.maxLocks:
			return 0, 0, fmt.Errorf("%s %s: %w: it holds and waits for %d locks, its limit: release one, or use another session", op, session, api.ErrTooManyLocks, s.maxLocks)
		case noWait && firstCreate(resp.Responses[1]) != 0: // held by another session
			return 0, firstCreate(resp.Responses[1]), nil
		case attempt >= limitAttempts(s.maxLocks):
			return 0, 0, fmt.Errorf("%s %s: %w: its places changed %d times while counting them", op, session, api.ErrUnavailable, attempt)
		}
		rev = txnRev // another place of the session was made since rev: count again
	}
}

// countPlaces reads, in one read-only transaction, session's record,
// whether key (its place in the queue being joined) exists, and the count
// of its index of places, and answers the revision, the count, and
// whether key exists (then the call finds its place: no limit applies).
// Errors are commitOwned's.
func (s *Store) countPlaces(ctx context.Context, op string, session api.SessionID, owner *string, key string) (rev, count int64, hasPlace bool, err error) {
	resp, err := s.client.Txn(ctx).Then(
		clientv3.OpGet(s.sessionKey(session)),
		clientv3.OpGet(key, clientv3.WithCountOnly()),
		clientv3.OpGet(s.sessionLocks(session), clientv3.WithPrefix(), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return 0, 0, false, sessionError(op, session, err)
	}
	s.revisions.observe(resp.Header.Revision)
	switch record := resp.Responses[0].GetResponseRange().Kvs; {
	case len(record) == 0:
		return 0, 0, false, noSessionError(op, session)
	case owner != nil && string(record[0].Value) != *owner:
		return 0, 0, false, notOwnerError(op, session)
	}
	return resp.Header.Revision, resp.Responses[2].GetResponseRange().Count, resp.Responses[1].GetResponseRange().Count > 0, nil
}

// firstCreate is the create revision of the one key a range read found,
// 0 for none.
func firstCreate(r *etcdserverpb.ResponseOp) int64 {
	if kvs := r.GetResponseRange().GetKvs(); len(kvs) > 0 {
		return kvs[0].CreateRevision
	}
	return 0
}

// waitTurn waits until key, created at myRev, is the oldest in queue: it
// finds the key just ahead (the largest create revision below myRev),
// waits for its deletion (or our own key's), and looks again, as
// concurrency's waitDeletes does. Each look also checks, in the same
// transaction, that our own key still exists.
func (s *Store) waitTurn(ctx context.Context, queue, key string, myRev int64) error {
	ahead := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(myRev-1))
	for {
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		resp, err := s.client.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", myRev)).
			Then(clientv3.OpGet(queue, ahead...)).
			Commit()
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: %w", api.ErrUnavailable, err)
		}
		s.revisions.observe(resp.Header.Revision)
		if !resp.Succeeded {
			return fmt.Errorf("%w: the place in the queue (token %d) is gone: its session ended, or it was released", api.ErrLockNotHeld, myRev)
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return nil // nobody ahead: ours is the oldest key
		}
		if err := s.waitDelete(ctx, resp.Header.Revision+1, string(kvs[0].Key), key); err != nil {
			return err
		}
	}
}

// waitDelete waits for the deletion of ahead, the place just ahead of
// the caller's, or of own, the caller's place, after revision fromRev-1.
// Own's deletion ends the wait too: the place went with its session (a
// revoke, an expiry) or was released, and the caller's next look finds it
// gone and answers so at once, instead of waiting on a place that no
// longer exists until the one ahead goes or the wait runs out. It returns
// nil also when a watch cannot start at fromRev because etcd compacted
// it: the caller looks again.
func (s *Store) waitDelete(ctx context.Context, fromRev int64, ahead, own string) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	aheadDeleted := s.client.Watch(wctx, ahead, clientv3.WithRev(fromRev), clientv3.WithFilterPut())
	ownDeleted := s.client.Watch(wctx, own, clientv3.WithRev(fromRev), clientv3.WithFilterPut())
	for {
		var (
			wr  clientv3.WatchResponse
			ok  bool
			key string
		)
		select {
		case wr, ok = <-aheadDeleted:
			key = ahead
		case wr, ok = <-ownDeleted:
			key = own
		}
		if !ok {
			if err := ctx.Err(); err != nil {
				return err
			}
			return fmt.Errorf("%w: watch of %s closed", api.ErrUnavailable, key)
		}
		if err := wr.Err(); err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) {
				return nil
			}
			return fmt.Errorf("%w: watching %s: %w", api.ErrUnavailable, key, err)
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				s.lockWakeups.Add(1)
				s.revisions.observe(ev.Kv.ModRevision)
				return nil
			}
		}
	}
}

// Release removes the grant or queue place of lock name whose token is
// token, and reports whether this call removed it (false: it was gone
// already, released before or lost with its session). It deletes only the
// key whose create revision is token, so a retried release never removes a
// newer holder's key; the place's index key (see the top of this file)
// goes in the same transaction. The key's session (the last element of its name)
// must belong to owner (nil: to anyone), or the call fails with
// api.ErrForbidden and removes nothing.
func (s *Store) Release(ctx context.Context, name string, token api.Token, owner *string) (bool, error) {
	if err := api.ValidateLockName(name); err != nil {
		return false, err
	}
	if token == 0 || token > api.MaxToken {
		return false, fmt.Errorf("%w: token %d", api.ErrMalformedToken, token)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	// The key is named by its session, which the caller need not send:
	// find it by its create revision, then delete it only if it is still
	// that key (a session may have re-created its key since).
	resp, err := s.client.Get(ctx, s.lockQueue(name), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithMinCreateRev(int64(token)), clientv3.WithMaxCreateRev(int64(token)))
	if err != nil {
		return false, fmt.Errorf("release %s: %w: %w", name, api.ErrUnavailable, err)
	}
	s.revisions.observe(resp.Header.Revision)
	if len(resp.Kvs) == 0 {
		return false, nil
	}
	key := string(resp.Kvs[0].Key)
	session, perr := api.ParseSessionID(strings.TrimPrefix(key, s.lockQueue(name)))
	if owner == nil {
		keys := []string{key}
		if perr == nil {
			keys = append(keys, s.sessionLocks(session)+name)
		}
		released, err := s.release(ctx, int64(token), keys...)
		if err != nil {
			return false, fmt.Errorf("release %s: %w", name, err)
		}
		return released, nil
	}
	if perr != nil { // not a key of ours: nobody's session
		return false, fmt.Errorf("release %s: token %d: %w: its queue key names no session", name, token, api.ErrForbidden)
	}
	del, _, err := s.commitOwned(ctx, "release "+name+": session", session, owner, clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", int64(token))},
		[]clientv3.Op{clientv3.OpDelete(key), clientv3.OpDelete(s.sessionLocks(session) + name)}, nil))
	switch {
	case errors.Is(err, api.ErrSessionNotFound):
		return false, nil // the session ended since the read, and its key with it
	case err != nil:
		return false, err
	}
	return del.Succeeded, nil
}

// release deletes a place in a queue, keys[0], with the other keys (its
// index key), if the place's create revision is still rev.
func (s *Store) release(ctx context.Context, rev int64, keys ...string) (bool, error) {
	deletes := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		deletes[i] = clientv3.OpDelete(k)
	}
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(keys[0]), "=", rev)).
		Then(deletes...).
		Commit()
	if err != nil {
		return false, fmt.Errorf("%w: %w", api.ErrUnavailable, err)
	}
	s.revisions.observe(resp.Header.Revision)
	return resp.Succeeded, nil
}

// LockState reads lock name's state, linearizably, in one round trip:
// whether it is held, and the length of its queue. The holder's token is
// in the answer only when session (zero: none) is the holder's and belongs
// to owner (nil: to anyone): the token is all that a write guarded by a
// held token check needs, so it goes only to whoever could get it back by
// acquiring with the holder's session. A session that is given must exist
// (api.ErrSessionNotFound: no session record) and belong to owner
// (api.ErrForbidden), as for every call that names a session.
func (s *Store) LockState(ctx context.Context, name string, session api.SessionID, owner *string) (api.LockState, error) {
	if err := api.ValidateLockName(name); err != nil {
		return api.LockState{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	queue := s.lockQueue(name)
	reads := []clientv3.Op{clientv3.OpGet(queue, clientv3.WithFirstCreate()...), clientv3.OpGet(queue, clientv3.WithPrefix(), clientv3.WithCountOnly())}
	if session != 0 {
		reads = append(reads, clientv3.OpGet(s.sessionKey(session)))
	}
	resp, err := s.client.Txn(ctx).Then(reads...).Commit()
	if err != nil {
		return api.LockState{}, fmt.Errorf("lock state %s: %w: %w", name, api.ErrUnavailable, err)
	}
	s.revisions.observe(resp.Header.Revision)
	holder := resp.Responses[0].GetResponseRange().Kvs
	state := api.LockState{Name: name, Held: len(holder) > 0, QueueLength: resp.Responses[1].GetResponseRange().Count}
	if session == 0 {
		return state, nil
	}
	const op = "lock state: session"
	switch record := resp.Responses[2].GetResponseRange().Kvs; {
	case len(record) == 0:
		return api.LockState{}, noSessionError(op, session)
	case owner != nil && string(record[0].Value) != *owner:
		return api.LockState{}, notOwnerError(op, session)
	}
	if state.Held && string(holder[0].Key) == queue+session.String() {
		state.Holder = api.Token(holder[0].CreateRevision)
	}
	return state, nil
}

// LockStats are counters of the lock API, for metrics and tests.
type LockStats struct {
	// Wakeups counts waiters woken by the deletion of the key they
	// watched, the one just ahead of theirs. Each release or expiry of a
	// queue key wakes at most one waiter: with n acquirers served one
	// after another, it grows by n-1.
	Wakeups int64
	// ExpiryWatchErrors counts the restarts of WatchLockExpiries' watch
	// and the deletions it could not judge (their revision compacted,
	// or a read failed): each may have cost a report of a grant lost
	// with its lease (expired or revoked).
	ExpiryWatchErrors int64
}

// LockStats returns the lock API's counters since New.
func (s *Store) LockStats() LockStats {
	return LockStats{Wakeups: s.lockWakeups.Load(), ExpiryWatchErrors: s.expiryWatchErrors.Load()}
}

// observeHeader raises the revision clock from a response header (nil
// headers read as revision 0).
func (s *Store) observeHeader(h *etcdserverpb.ResponseHeader) {
	s.revisions.observe(h.GetRevision())
}
