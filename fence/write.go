package fence

import (
	"context"
	"errors"
	"fmt"
	"io"

	"fencegate/api"
)

// WriteResult is the body of a successful PUT.
type WriteResult struct {
	Resource api.Resource `json:"resource"`
	Token    api.Token    `json:"token"`
	ETag     string       `json:"etag"`
	// Created is true when the write created the object.
	Created bool `json:"created"`
	// ReplacedETag is the ETag of the version this write replaced (its
	// If-Match), empty when it created the object.
	ReplacedETag string `json:"replaced_etag,omitempty"`
	// Encryption is the server-side encryption the store answered the
	// write with, for the S3 API to pass on; zero when none.
	Encryption api.Encryption `json:"-"`
}

// Request is what every fenced write starts from: a valid path and
// token, not already known to be stale.
type Request struct {
	// Path is the object; Resource names it ("<store>/<bucket>/<key>").
	Path     api.ObjectPath
	Resource api.Resource
	// Token is the writer's fencing token.
	Token api.Token
	// renew makes the fence check write the mark even when the token
	// equals it (FenceStore.FenceCheckRenew). Deletes set it: a mark that
	// its object records may be evicted (package retention) by a
	// transaction that compares the mark's mod revision with what the
	// evictor read when it saw the object; a delete must move it, or the
	// eviction could land after the delete and take its tombstone.
	renew bool
	// noWrite marks steps 3 and 4 that no write of the object follows
	// (CreateUpload): Hooks.AfterObserve and AfterFenceCheck, which
	// stand between a write's steps, do not run for them.
	noWrite bool
	// cond is the client's own precondition (S3's conditional writes),
	// checked against the observed version (see observeAndFence); the
	// zero value is none, as on the REST API.
	cond WriteCondition
	// encryption is the server-side encryption the write asks of the
	// store (S3's SSE headers); its customer key (SSE-C), when it has
	// one, is sent with the observation too (see observe). It is kept
	// only while the request is served. The zero value is none.
	encryption api.Encryption
}

// FastReject is the protocol's step 2: it refuses a token that the cache
// already knows to be stale (an *api.StaleTokenError), without a round
// trip (safe: high-water marks only grow), and otherwise returns the
// request to fence. A front door calls it once it has authorized the
// caller and parsed the token (Admit does all three).
func (e *Engine) FastReject(ctx context.Context, path api.ObjectPath, token api.Token) (Request, error) {
	fr := Request{Path: path, Resource: path.Resource(), Token: token}
	if hwm, ok := e.fences.CachedHighWaterMark(fr.Resource); ok && hwm > token {
		e.monitor.StaleFound(ctx, StaleFromCache)
		return Request{}, &api.StaleTokenError{Resource: fr.Resource, Token: token, HighWaterMark: hwm}
	}
	return fr, nil
}

// observation says where a write's step 3 may take the object's version
// from.
type observation int

const (
	// observeHead asks S3 with a HEAD. Retries after a lost race use it,
	// as do bodies over etagCacheMaxBody: an out-of-date cache entry could
	// cost them a 502 (or, for bodies that cannot be replayed, a 409), and
	// next to such a body a HEAD costs little.
	observeHead observation = iota
	// observeCached uses the ETag cache when it knows the object's
	// version, else a HEAD.
	observeCached
	// observeCachedExisting uses the ETag cache only when it knows that
	// the object exists. Deletes use it: a cached "absent" would answer
	// 204 without asking S3 anything, so nothing would catch an object
	// created since by another gateway.
	observeCachedExisting
)

// onAbsent says what a write's fence check (protocol step 4) does when the
// object it observed is absent.
type onAbsent int

const (
	// raiseOnAbsent raises the mark as for an object that exists. PUTs
	// use it (a create writes a version), and deletes when
	// Config.TombstonesForAbsent asks for tombstones of absent objects.
	raiseOnAbsent onAbsent = iota
	// checkOnAbsent only checks the token (FenceStore.CheckNotStale),
	// raising nothing: a delete of an absent object writes nothing that a
	// later write must be ordered after (see Engine.Delete).
	checkOnAbsent
)

// observe returns the object's current version for protocol step 3, and
// whether it came from the ETag cache rather than a HEAD.
func (e *Engine) observe(ctx context.Context, fr Request, from observation) (api.ObjectVersion, bool, error) {
	if from != observeHead {
		if seen, ok := e.etags.get(fr.Resource); ok && (seen.Exists || from == observeCached) {
			return seen, true, nil
		}
	}
	seen, err := e.observeStore(ctx, fr)
	if err != nil {
		return api.ObjectVersion{}, false, fmt.Errorf("observe: %w", err)
	}
	return seen, false, nil
}

// observeStore asks the store for the object's version (a HEAD). A write
// with a customer key (SSE-C) sends it with the HEAD: S3 answers a HEAD
// of an object encrypted with one only with that key, and its refusal of
// a HEAD without it (400) or with another (403) fails the write, never
// taken for an absent object.
func (e *Engine) observeStore(ctx context.Context, fr Request) (api.ObjectVersion, error) {
	if fr.encryption.Customer.IsZero() {
		return e.objects.Observe(ctx, fr.Path)
	}
	keyed, ok := e.objects.(KeyedObserver)
	if !ok {
		return api.ObjectVersion{}, fmt.Errorf("%w: the store keeps no objects encrypted with a customer key (SSE-C)", api.ErrInvalidRequest)
	}
	return keyed.ObserveWithKey(ctx, fr.Path, fr.encryption.Customer)
}

// observeAndFence runs the protocol's steps 3 and 4, in that order: it
// observes the object's current version, then checks the fence. The order
// is the correctness argument: the version observed was written by a
// writer whose fence check finished before this one began, so if this
// check passes, this token is at least that writer's. A version from the
// ETag cache keeps that order: it was stored once S3 had answered the
// write that made it, and is read here, before the fence check.
//
// An object that already records a larger token is stale even if no
// high-water mark exists yet (a store fenced before this gateway, or a
// lost etcd).
//
// When the object is absent and absent is checkOnAbsent, the fence check
// is read-only (FenceStore.CheckNotStale): still after the observation,
// refusing a token below the mark, but raising none.
//
// A client's own condition (fr.cond, S3's If-Match and If-None-Match: *)
// is checked against the version observed, after the object's recorded
// token and before the fence check: one that fails is refused
// (refuseCondition) without raising the mark. One that holds needs no
// further check: the conditional write names exactly the version
// observed, so if the store applies it, the condition still held when it
// landed (see WriteCondition). A store that refuses the write's own
// condition (a lost race) sends the caller here again, as without a
// client condition, and the fresh observation decides again: 412 if the
// client's condition no longer holds, a write if it does.
//
// It also reports whether the version came from the ETag cache, so that a
// write that loses a race with it can forget the entry.
func (e *Engine) observeAndFence(ctx context.Context, fr Request, from observation, absent onAbsent) (api.ObjectVersion, bool, error) {
	if e.cfg.Hooks.UnsafeFenceBeforeObserve {
		return e.fenceThenObserve(ctx, fr, from)
	}
	seen, cached, err := e.observe(ctx, fr, from)
	if err == nil && cached && !fr.cond.holds(seen) {
		// A 412 must be true of the store, not of a cache entry that
		// may be out of date: ask S3.
		seen, cached, err = e.observe(ctx, fr, observeHead)
	}
	if err != nil {
		return api.ObjectVersion{}, false, err
	}
	if seen.Token > fr.Token {
		e.monitor.StaleFound(ctx, StaleFromObject)
		return api.ObjectVersion{}, false, &api.StaleTokenError{Resource: fr.Resource, Token: fr.Token, HighWaterMark: seen.Token}
	}
	if !fr.cond.holds(seen) {
		return api.ObjectVersion{}, false, e.refuseCondition(ctx, fr, seen)
	}
	if h := e.cfg.Hooks.AfterObserve; h != nil && !fr.noWrite {
		h(ctx, fr.Resource, fr.Token)
	}
	check := e.fences.FenceCheck
	if fr.renew {
		check = e.fences.FenceCheckRenew
	}
	if !seen.Exists && absent == checkOnAbsent {
		check = e.fences.CheckNotStale
	}
	if err := check(ctx, fr.Resource, fr.Token); err != nil {
		return api.ObjectVersion{}, false, err
	}
	if h := e.cfg.Hooks.AfterFenceCheck; h != nil && !fr.noWrite {
		h(ctx, fr.Resource, fr.Token)
	}
	return seen, cached, nil
}

// refuseCondition answers a write whose client condition (fr.cond) does
// not hold for the version seen: api.ErrPreconditionFailed (412), with
// nothing written. The fence check still runs, read-only
// (FenceStore.CheckNotStale): a write that will not happen must not raise
// the mark (a later writer between the mark and this token would be
// refused for a version never written), but a stale token is still
// answered as stale (409), whatever its condition says. A writer that was
// fenced out learns that first, the one thing the gateway exists to tell
// it, and its answer does not depend on the object it may no longer
// write. The check is linearizable and marks only grow, so a token it
// accepts was not stale when the version was observed either: the 412 is
// true of that moment.
func (e *Engine) refuseCondition(ctx context.Context, fr Request, seen api.ObjectVersion) error {
	if err := e.fences.CheckNotStale(ctx, fr.Resource, fr.Token); err != nil {
		return err
	}
	return fr.cond.failed(seen)
}

// fenceThenObserve is the protocol with steps 3 and 4 swapped. It is
// wrong, and exists only behind Hooks.UnsafeFenceBeforeObserve.
func (e *Engine) fenceThenObserve(ctx context.Context, fr Request, from observation) (api.ObjectVersion, bool, error) {
	if err := e.fences.FenceCheck(ctx, fr.Resource, fr.Token); err != nil {
		return api.ObjectVersion{}, false, err
	}
	if h := e.cfg.Hooks.AfterFenceCheck; h != nil && !fr.noWrite {
		h(ctx, fr.Resource, fr.Token)
	}
	seen, cached, err := e.observe(ctx, fr, from)
	if err != nil {
		return api.ObjectVersion{}, false, err
	}
	if !fr.cond.holds(seen) {
		return api.ObjectVersion{}, false, fr.cond.failed(seen)
	}
	if h := e.cfg.Hooks.AfterObserve; h != nil && !fr.noWrite {
		h(ctx, fr.Resource, fr.Token)
	}
	return seen, cached, nil
}

// Put is the protocol's steps 3 to 5 for a write of body, the same
// for every front door: observe, fence check, conditional write (see
// observeAndFence for why in that order), and after a lost race, while
// the body can be replayed, again from a fresh observation, up to
// Config.WriteAttempts rounds. What the write leaves is learned by the
// ETag cache.
func (e *Engine) Put(ctx context.Context, fr Request, body *Body, contentType string, meta api.ObjectMetadata) (WriteResult, error) {
	in := api.PutObjectInput{
		Path:        fr.Path,
		Size:        body.size,
		ContentType: contentType,
		Metadata:    meta,
		Token:       fr.Token,
		Encryption:  fr.encryption,
	}
	var answered api.Encryption
	in.Answered = &answered
	// The first attempt may take its observation from the ETag cache (for
	// bodies up to etagCacheMaxBody); a retry after a lost race always
	// asks S3.
	from := observeCached
	if body.size > etagCacheMaxBody { // bodies that cannot be replayed are larger still
		from = observeHead
	}
	for attempt := 1; ; attempt++ {
		seen, cached, err := e.observeAndFence(ctx, fr, from, raiseOnAbsent)
		if err != nil {
			return WriteResult{}, err
		}
		in.Replaces = seen
		in.UnsafeUnconditional = e.cfg.Hooks.UnsafeUnconditionalWrite
		in.Body = body.reader()
		etag, err := e.objects.Put(ctx, in)
		if err != nil {
			if stall := body.stalled(); stall != nil {
				err = fmt.Errorf("%w: %w", api.ErrInvalidRequest, stall)
			}
		}
		if err != nil && cached {
			// Whatever went wrong, the entry may be out of date: the
			// next write observes with a HEAD.
			e.etags.forget(fr.Resource, seen)
		}
		if errors.Is(err, api.ErrConcurrentModification) && body.replayable() && attempt < e.cfg.WriteAttempts {
			e.monitor.Logger(ctx).Debug("write lost a race; observing again", "resource", fr.Resource, "attempt", attempt, "cached", cached)
			from = observeHead
			continue
		}
		if err != nil {
			return WriteResult{}, err
		}
		// An answer without an ETag teaches the cache nothing but that
		// its entry is out of date (learn drops it). Neither does an
		// object encrypted with a customer key (SSE-C): every later
		// write observes it with a HEAD that carries that writer's key,
		// so that a write without it (or with another) fails the same
		// way whichever gateway wrote last, rather than pass on a
		// cached version here and fail on a HEAD there.
		learned := api.ObjectVersion{Exists: true, ETag: etag, Token: fr.Token}
		if !fr.encryption.Customer.IsZero() {
			learned.ETag = ""
		}
		e.etags.learn(fr.Resource, learned)
		return e.accepted(ctx, WriteResult{Resource: fr.Resource, Token: fr.Token, ETag: etag, Created: !seen.Exists, ReplacedETag: seen.ETag, Encryption: answered}), nil
	}
}

// Delete is the protocol's steps 3 to 5 for a delete, the same for
// every front door: the fenced delete. The high-water mark stays, as a
// tombstone: a stale writer cannot re-create the object.
//
// Deleting an object that does not exist answers 204 without calling S3
// beyond the observation, and by default leaves no mark: it still refuses
// a token below the resource's mark (409), with a read-only check after
// the observation (checkOnAbsent), but raises nothing and creates no key,
// so that deletes of keys that never existed do not fill etcd (each mark
// is kept for ever). The check is linearizable and marks only grow, so a
// token it accepts was not stale when the object was observed absent
// either: the 204 is true of that moment. What this gives up, against the
// raise (Config.TombstonesForAbsent): the delete of nothing leaves no
// tombstone, so a writer with a token below the deleter's (and not below
// the mark) can create the object afterwards, as if the delete had never
// happened; it wrote nothing, so no version is out of order. An object
// created between the observation and the check is left in place with a
// 204, with or without the raise. A delete that finds the object leaves
// its tombstone as before.
func (e *Engine) Delete(ctx context.Context, fr Request) error {
	fr.renew = true
	absent := checkOnAbsent
	if e.cfg.TombstonesForAbsent {
		absent = raiseOnAbsent
	}
	from := observeCachedExisting
	for attempt := 1; ; attempt++ {
		seen, cached, err := e.observeAndFence(ctx, fr, from, absent)
		if err != nil {
			return err
		}
		if seen.Exists {
			err = e.objects.Delete(ctx, fr.Path, seen.ETag)
		}
		if err != nil && cached {
			e.etags.forget(fr.Resource, seen)
		}
		if errors.Is(err, api.ErrConcurrentModification) && attempt < e.cfg.WriteAttempts {
			from = observeHead
			continue
		}
		if err != nil {
			return err
		}
		if seen.Exists {
			// The token is the deleter's: versions carry non-decreasing
			// tokens, and a later create needs at least this one. A
			// delete of nothing teaches the cache nothing: an "absent"
			// entry with the deleter's token would refuse, here only,
			// creates below a mark that (by default) etcd does not
			// hold.
			e.etags.learn(fr.Resource, api.ObjectVersion{Token: fr.Token})
		}
		e.monitor.DeleteAccepted(ctx, fr.Resource, fr.Token)
		return nil
	}
}

// accepted tells the monitor of a write the store applied, and returns
// its result.
func (e *Engine) accepted(ctx context.Context, res WriteResult) WriteResult {
	e.monitor.WriteAccepted(ctx, res)
	return res
}

// PutRequest is one fenced write of an object, as a front door parsed it.
type PutRequest struct {
	// Path is the object, from ObjectPath.
	Path api.ObjectPath
	// Token is the writer's fencing token; zero is api.ErrMissingToken.
	Token api.Token
	// Body is the object's content, read at most once. Bodies up to the
	// engine's Config.BufferBytes are held in memory (within its
	// BufferBudgetBytes), so that a write that loses a race is retried;
	// larger ones stream to the store.
	Body io.Reader
	// Size is Body's exact length, or -1 when unknown (then the body must
	// fit Config.BufferBytes, else api.ErrLengthRequired).
	Size int64
	// ContentType is stored with the object; empty leaves the store's
	// default.
	ContentType string
	// Metadata is stored with the object (user metadata and standard
	// headers), as the front door validated it; the zero value is none.
	Metadata api.ObjectMetadata
	// Condition is the client's own precondition: the write happens only
	// if it holds too, else api.ErrPreconditionFailed and nothing changes
	// (see WriteCondition). The zero value is none.
	Condition WriteCondition
	// Encryption is the server-side encryption asked of the store, as
	// the front door validated it; a customer key (SSE-C) is also sent
	// with the observation of the object. The store's answer is
	// WriteResult.Encryption. The zero value is none.
	Encryption api.Encryption
}

// PutFenced is a front door's fenced write of in: it checks that the identity of ctx
// (WithIdentity) may write the object, refuses a token the cache knows
// to be stale, reads the body, then observes, checks the fence and writes
// conditionally, retrying a lost race from a fresh observation. Its
// errors are api error classes (an *api.StaleTokenError for a stale
// token); nothing is written unless it returns nil.
func (e *Engine) PutFenced(ctx context.Context, in PutRequest) (WriteResult, error) {
	fr, err := e.Admit(ctx, Write, in.Path, in.Token)
	if err != nil {
		return WriteResult{}, err
	}
	fr.cond, fr.encryption = in.Condition, in.Encryption
	from := &bodyErr{r: in.Body}
	body, err := e.ReadBody(from, in.Size, nil)
	if err != nil {
		return WriteResult{}, err
	}
	defer body.Release()
	res, err := e.Put(ctx, fr, body, in.ContentType, in.Metadata)
	if err != nil && from.err != nil {
		// A body that failed while it streamed to the store (a checksum
		// the door verifies at its end, a client that went away) is why
		// the write failed: say so, rather than the store's refusal of
		// a short body.
		err = fmt.Errorf("%w: reading body: %w", api.ErrInvalidRequest, from.err)
	}
	return res, err
}

// bodyErr records the first error, other than io.EOF, of a body's reads.
type bodyErr struct {
	r   io.Reader
	err error
}

func (b *bodyErr) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

// DeleteFenced is a front door's fenced delete: authorization (Delete), fast reject,
// observation, fence check and conditional delete. Deleting an absent
// object succeeds (see Delete for the mark it leaves).
func (e *Engine) DeleteFenced(ctx context.Context, path api.ObjectPath, token api.Token) error {
	fr, err := e.Admit(ctx, Delete, path, token)
	if err != nil {
		return err
	}
	return e.Delete(ctx, fr)
}

// Admit is what precedes every fenced write: that the caller of ctx may
// do access to path (the Authorizer), a token (zero is
// api.ErrMissingToken), the fast reject (FastReject). It reaches neither
// the fence store nor the object store.
func (e *Engine) Admit(ctx context.Context, access Access, path api.ObjectPath, token api.Token) (Request, error) {
	if err := e.access.Authorize(ctx, access, path.Resource()); err != nil {
		return Request{}, err
	}
	if token == 0 {
		return Request{}, api.ErrMissingToken
	}
	return e.FastReject(ctx, path, token)
}
