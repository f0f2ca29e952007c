package tokenstore

import (
	"context"
	"errors"
	"fmt"
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

// CreateSession grants a session that belongs to owner (the identity's
// name; "" without auth): an etcd lease of ttl seconds (zero means
// api.DefaultSessionTTL), and the session's record bound to it, which
// makes the lease a session. etcd may grant more than asked for, never
// less; the answer says what it granted. When the record cannot be
// written, the lease is revoked and the call fails with
// api.ErrUnavailable.
func (s *Store) CreateSession(ctx context.Context, ttl int64, owner string) (api.Session, error) {
	if ttl == 0 {
		ttl = api.DefaultSessionTTL
	}
	if ttl < api.MinSessionTTL || ttl > api.MaxSessionTTL {
		return api.Session{}, fmt.Errorf("%w: session ttl %d: want %d to %d seconds", api.ErrInvalidRequest, ttl, api.MinSessionTTL, api.MaxSessionTTL)
	}
	gctx, cancel := context.WithTimeout(ctx, s.timeout)
	resp, err := s.client.Grant(gctx, ttl)
	cancel()
	if err != nil {
		return api.Session{}, fmt.Errorf("create session: %w: %w", api.ErrUnavailable, err)
	}
	s.observeHeader(resp.ResponseHeader)
	sess := api.Session{ID: api.SessionID(resp.ID), TTL: resp.TTL}

	pctx, cancel := context.WithTimeout(ctx, s.timeout)
	put, err := s.client.Put(pctx, s.sessionKey(sess.ID), owner, clientv3.WithLease(resp.ID))
	cancel()
	if err == nil {
		s.observeHeader(put.Header)
		return sess, nil
	}
	// Without its record the lease is no session: end it, even though
	// ctx may be done. If that fails too, nobody knows its id, and it
	// expires after its TTL.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	if _, rerr := s.client.Revoke(rctx, resp.ID); rerr != nil {
		return api.Session{}, fmt.Errorf("create session: recording its owner: %w: %w (then revoking %s failed: %v)", api.ErrUnavailable, err, sess.ID, rerr)
	}
	return api.Session{}, fmt.Errorf("create session: recording its owner: %w: %w", api.ErrUnavailable, err)
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
func (s *Store) RevokeSession(ctx context.Context, id api.SessionID, owner *string) error {
	const op = "revoke session"
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.checkSession(ctx, op, id, owner); err != nil {
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
// the queue is removed); api.ErrSessionNotFound for a session that does not
// exist (ended, or a lease that is no session: nothing was queued);
// api.ErrForbidden for another identity's session (nothing was
// queued); api.ErrLockNotHeld when the session's place vanished while it
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

	// Queue up (or find our place) and read the holder, in one round trip,
	// as concurrency.Mutex's tryAcquire does, if the session is owner's.
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	holder := clientv3.OpGet(queue, clientv3.WithFirstCreate()...)
	resp, rev, err := s.commitOwned(rctx, "acquire "+name+": session", session, owner, clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(key, "", clientv3.WithLease(clientv3.LeaseID(session))), holder},
		[]clientv3.Op{clientv3.OpGet(key), holder}))
	cancel()
	if err != nil {
		return api.LockGrant{}, err
	}
	myRev := rev
	if !resp.Succeeded {
		myRev = resp.Responses[0].GetResponseRange().Kvs[0].CreateRevision
	}
	grant.Token = api.Token(myRev)
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 && kvs[0].CreateRevision == myRev {
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
	if _, lerr := s.release(cleanupCtx, key, myRev); lerr != nil {
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

// waitTurn waits until key, created at myRev, is the oldest in queue: it
// finds the key just ahead (the largest create revision below myRev),
// waits for its deletion, and looks again, as concurrency's waitDeletes
// does. Each look also checks, in the same transaction, that our own key
// still exists.
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
		if err := s.waitDelete(ctx, string(kvs[0].Key), resp.Header.Revision+1); err != nil {
			return err
		}
	}
}

// waitDelete waits for the deletion of key after revision fromRev-1. It
// returns nil also when the watch cannot start at fromRev because etcd
// compacted it: the caller looks again.
func (s *Store) waitDelete(ctx context.Context, key string, fromRev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range s.client.Watch(wctx, key, clientv3.WithRev(fromRev), clientv3.WithFilterPut()) {
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
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: watch of %s closed", api.ErrUnavailable, key)
}

// Release removes the grant or queue place of lock name whose token is
// token, and reports whether this call removed it (false: it was gone
// already, released before or lost with its session). It deletes only the
// key whose create revision is token, so a retried release never removes a
// newer holder's key. The key's session (the last element of its name)
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
	if owner == nil {
		released, err := s.release(ctx, key, int64(token))
		if err != nil {
			return false, fmt.Errorf("release %s: %w", name, err)
		}
		return released, nil
	}
	session, err := api.ParseSessionID(strings.TrimPrefix(key, s.lockQueue(name)))
	if err != nil { // not a key of ours: nobody's session
		return false, fmt.Errorf("release %s: token %d: %w: its queue key names no session", name, token, api.ErrForbidden)
	}
	del, _, err := s.commitOwned(ctx, "release "+name+": session", session, owner, clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", int64(token))},
		[]clientv3.Op{clientv3.OpDelete(key)}, nil))
	switch {
	case errors.Is(err, api.ErrSessionNotFound):
		return false, nil // the session ended since the read, and its key with it
	case err != nil:
		return false, err
	}
	return del.Succeeded, nil
}

// release deletes key if its create revision is still rev.
func (s *Store) release(ctx context.Context, key string, rev int64) (bool, error) {
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
		Then(clientv3.OpDelete(key)).
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
}

// LockStats returns the lock API's counters since New.
func (s *Store) LockStats() LockStats {
	return LockStats{Wakeups: s.lockWakeups.Load()}
}

// observeHeader raises the revision clock from a response header (nil
// headers read as revision 0).
func (s *Store) observeHeader(h *etcdserverpb.ResponseHeader) {
	s.revisions.observe(h.GetRevision())
}
