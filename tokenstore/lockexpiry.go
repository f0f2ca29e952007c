package tokenstore

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
)

// Lock expiries: telling the grants lost with their session's lease from
// those released, and of those, the lease that expired from the lease
// that was revoked. (The names here, WatchLockExpiries and
// ExpiryWatchErrors, say expiry for both ends of a lease; the reports
// tell them apart.)
//
// A session's lease ends by expiring (nobody kept it alive for its TTL) or
// by a revoke (RevokeSession). Either way etcd deletes every key bound to
// the lease in one revision: the session's record, its places in queues,
// and the index keys. A release (Release, or Acquire leaving a queue)
// deletes a place and its index key, never the record. So a place deleted
// in the revision that deletes its session's record was lost with the
// lease, and one deleted in any other revision was released; which one it
// was is exact, read from etcd's history, whichever gateway did it.
//
// To tell a revoke from an expiry, RevokeSession first writes a marker,
// <prefix>revoking/<session id in hex>, bound to the session's lease, in
// the transaction that checks the session's owner: the marker goes in the
// revision that revokes the lease. A lease end whose revision deletes the
// session's marker is a revoke; one that deletes none is an expiry. A
// marker whose revoke then fails stays until the lease ends: if that
// session then expires, its grants are reported as revoked. A revoke is
// reported as an expiry only when the store that revoked wrote no marker
// (one of a version from before the markers).
//
// The lock was lost only if the place held it: the oldest place in the
// queue just before that revision, read at that revision minus one.

// revokingKey returns the key of the marker of session id's revoke.
func (s *Store) revokingKey(id api.SessionID) string { return s.prefix + "revoking/" + id.String() }

// expiryWatchRetry is the pause before a failed watch of lock expiries
// starts again.
const expiryWatchRetry = time.Second

// WatchLockExpiries calls fn, from one goroutine, for each lock grant
// lost with its session's lease, until ctx ends; then it returns ctx's
// error. The lease ended because the session expired (revoked false) or
// because RevokeSession revoked it (revoked true; see the top of this
// file for the exceptions). fn gets the grant (the lock's name, the
// holder's token and session), the name of the identity that owned the
// session ("" when it was created without auth, or when etcd no longer
// has the record's last value), and which end it was. A grant released,
// and a place in a queue that did not hold the lock, are never reported.
//
// It watches etcd from the revision after the current one when it is
// called (one read first), so lease ends from about the call on are
// reported, each once per call: a watch that fails (etcd unavailable, no
// leader) starts again where it stopped. What can be missed: lease ends
// in revisions that etcd compacted before they were read (a watch that
// fell behind its compaction, or whose holder check found the revision
// compacted), and holder checks that failed; LockStats.ExpiryWatchErrors
// counts these and the watch's restarts. Two calls report a grant twice.
//
// The watch is of the lock API's keys only (queues, sessions, their
// indexes and revoke markers: the range from <prefix>locks/ to
// <prefix>sessions/), and of deletions only: fence checks cost it
// nothing.
func (s *Store) WatchLockExpiries(ctx context.Context, fn func(grant api.LockGrant, holder string, revoked bool)) error {
	var from int64 // 0: not read yet
	for ctx.Err() == nil {
		if from == 0 { // from now: etcd's current revision
			rctx, cancel := context.WithTimeout(ctx, s.timeout)
			resp, err := s.client.Get(rctx, s.prefix+"ping", clientv3.WithCountOnly())
			cancel()
			if err == nil {
				s.observeHeader(resp.Header)
				from = resp.Header.Revision + 1
			}
		}
		if from != 0 {
			from = s.watchExpiries(ctx, from, fn)
		}
		if ctx.Err() != nil {
			break
		}
		s.expiryWatchErrors.Add(1)
		select {
		case <-ctx.Done():
		case <-time.After(expiryWatchRetry):
		}
	}
	return ctx.Err()
}

// watchExpiries watches deletions of the lock API's keys from revision
// from, reporting the grants lost with their lease to fn, until the watch or ctx ends, and
// returns the revision to watch from next.
func (s *Store) watchExpiries(ctx context.Context, from int64, fn func(api.LockGrant, string, bool)) int64 {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	watch := s.client.Watch(wctx, s.prefix+"locks/", clientv3.WithRange(s.prefix+"sessions0"),
		clientv3.WithRev(from), clientv3.WithFilterPut(), clientv3.WithPrevKV())
	for wr := range watch {
		if err := wr.Err(); err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) && wr.CompactRevision > from {
				return wr.CompactRevision // what lies before it is lost
			}
			return from
		}
		s.observeHeader(wr.Header)
		for i := 0; i < len(wr.Events); {
			// etcd sends a revision's events in one response, in order.
			rev := wr.Events[i].Kv.ModRevision
			j := i
			for j < len(wr.Events) && wr.Events[j].Kv.ModRevision == rev {
				j++
			}
			s.reportExpiries(ctx, rev, wr.Events[i:j], fn)
			from, i = rev+1, j
		}
	}
	return from
}

// reportExpiries reports to fn the grants that the deletions of one
// revision, rev, took from sessions whose lease ended, and whether it was
// revoked (see the top of this file).
func (s *Store) reportExpiries(ctx context.Context, rev int64, deletes []*clientv3.Event, fn func(api.LockGrant, string, bool)) {
	var (
		ended    map[string]string // session ids whose record went, to owners
		revoked  map[string]bool
		places   []*mvccpb.KeyValue // the queue keys deleted, as they were
		sessions = s.prefix + "sessions/"
		revoking = s.prefix + "revoking/"
		queues   = s.prefix + "locks/"
	)
	for _, ev := range deletes {
		if ev.Type != mvccpb.DELETE {
			continue
		}
		switch key := string(ev.Kv.Key); {
		case strings.HasPrefix(key, sessions):
			if ended == nil {
				ended = make(map[string]string)
			}
			owner := ""
			if ev.PrevKv != nil {
				owner = string(ev.PrevKv.Value)
			}
			ended[strings.TrimPrefix(key, sessions)] = owner
		case strings.HasPrefix(key, revoking):
			if revoked == nil {
				revoked = make(map[string]bool)
			}
			revoked[strings.TrimPrefix(key, revoking)] = true
		case strings.HasPrefix(key, queues) && ev.PrevKv != nil:
			places = append(places, ev.PrevKv)
		case strings.HasPrefix(key, queues): // its token is lost: compacted
			s.expiryWatchErrors.Add(1)
		}
	}
	if len(ended) == 0 {
		return // releases only
	}
	for _, place := range places {
		name, id, ok := strings.Cut(strings.TrimPrefix(string(place.Key), queues), "/")
		owner, lost := ended[id]
		if !ok || !lost {
			continue
		}
		session, err := api.ParseSessionID(id)
		if err != nil {
			continue
		}
		held, err := s.heldBefore(ctx, name, place.CreateRevision, rev)
		if err != nil {
			s.expiryWatchErrors.Add(1)
			continue
		}
		if held {
			fn(api.LockGrant{Name: name, Token: api.Token(place.CreateRevision), Session: session}, owner, revoked[id])
		}
	}
}

// heldBefore reports whether the place created at token was the oldest
// in lock name's queue, its holder, at revision rev-1.
func (s *Store) heldBefore(ctx context.Context, name string, token, rev int64) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.client.Get(ctx, s.lockQueue(name), append(clientv3.WithFirstCreate(), clientv3.WithRev(rev-1))...)
	if err != nil {
		return false, err
	}
	kvs := resp.Kvs
	return len(kvs) > 0 && kvs[0].CreateRevision == token, nil
}
