package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"fencegate/api"
	"fencegate/events"
)

// objectsPrefix starts every object route.
const objectsPrefix = "/v1/objects/"

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

// objectPath parses bucket and key from the request's decoded path, and
// names the bucket's store (see BucketStores). Routing used the raw path;
// the key is everything after the bucket's slash, exactly as the client
// encoded it.
func (g *Gateway) objectPath(r *http.Request) (api.ObjectPath, error) {
	rest, ok := strings.CutPrefix(r.URL.Path, objectsPrefix)
	if !ok {
		return api.ObjectPath{}, fmt.Errorf("%w: not an object path", api.ErrInvalidObjectPath)
	}
	bucket, key, _ := strings.Cut(rest, "/")
	return g.ObjectPath(bucket, key)
}

// fencedRequest is what every fenced write starts from: a valid path and
// token, not already known to be stale.
type fencedRequest struct {
	path     api.ObjectPath
	resource api.Resource
	token    api.Token
	// renew makes the fence check write the mark even when the token
	// equals it (FenceStore.FenceCheckRenew). Deletes set it: a mark that
	// its object records may be evicted (package retention) by a
	// transaction that compares the mark's mod revision with what the
	// evictor read when it saw the object; a delete must move it, or the
	// eviction could land after the delete and take its tombstone.
	renew bool
	// noWrite marks steps 3 and 4 that no write of the object follows
	// (CreateUpload): TestHooks.AfterObserve and AfterFenceCheck, which
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

// parseFenced runs the protocol's steps 1 and 2 for a REST request: parse
// the path and the token, and refuse a token that the cache already knows
// to be stale (admitFenced). Between the two it checks that the caller may
// do op to the object: before anything reaches etcd or S3, and before a
// stale answer could tell a caller that may not write the object its
// high-water mark.
func (g *Gateway) parseFenced(r *http.Request, op Operation) (fencedRequest, error) {
	path, err := g.objectPath(r)
	if err != nil {
		return fencedRequest{}, err
	}
	if err := g.authorize(r.Context(), op, path.Resource()); err != nil {
		return fencedRequest{}, err
	}
	token, err := api.ParseTokenHeader(r.Header.Values(api.HeaderFenceToken))
	if err != nil {
		return fencedRequest{}, err
	}
	return g.fastReject(r.Context(), path, token)
}

// fastReject is the protocol's step 2: it refuses a token that the cache
// already knows to be stale, without a round trip (safe: high-water marks
// only grow), and otherwise returns the request to fence. Every front door
// calls it once it has authorized the caller and parsed the token.
func (g *Gateway) fastReject(ctx context.Context, path api.ObjectPath, token api.Token) (fencedRequest, error) {
	fr := fencedRequest{path: path, resource: path.Resource(), token: token}
	if hwm, ok := g.fences.CachedHighWaterMark(fr.resource); ok && hwm > token {
		noteStaleSource(ctx, staleFromCache)
		return fencedRequest{}, &api.StaleTokenError{Resource: fr.resource, Token: token, HighWaterMark: hwm}
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
	// later write must be ordered after (see deleteObject).
	checkOnAbsent
)

// observe returns the object's current version for protocol step 3, and
// whether it came from the ETag cache rather than a HEAD.
func (g *Gateway) observe(ctx context.Context, fr fencedRequest, from observation) (api.ObjectVersion, bool, error) {
	if from != observeHead {
		if seen, ok := g.etags.get(fr.resource); ok && (seen.Exists || from == observeCached) {
			return seen, true, nil
		}
	}
	seen, err := g.observeStore(ctx, fr)
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
func (g *Gateway) observeStore(ctx context.Context, fr fencedRequest) (api.ObjectVersion, error) {
	if fr.encryption.Customer.IsZero() {
		return g.objects.Observe(ctx, fr.path)
	}
	keyed, ok := g.objects.(KeyedObserver)
	if !ok {
		return api.ObjectVersion{}, fmt.Errorf("%w: the store keeps no objects encrypted with a customer key (SSE-C)", api.ErrInvalidRequest)
	}
	return keyed.ObserveWithKey(ctx, fr.path, fr.encryption.Customer)
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
func (g *Gateway) observeAndFence(ctx context.Context, fr fencedRequest, from observation, absent onAbsent) (api.ObjectVersion, bool, error) {
	if g.hooks.UnsafeFenceBeforeObserve {
		return g.fenceThenObserve(ctx, fr, from)
	}
	seen, cached, err := g.observe(ctx, fr, from)
	if err == nil && cached && !fr.cond.holds(seen) {
		// A 412 must be true of the store, not of a cache entry that
		// may be out of date: ask S3.
		seen, cached, err = g.observe(ctx, fr, observeHead)
	}
	if err != nil {
		return api.ObjectVersion{}, false, err
	}
	if seen.Token > fr.token {
		noteStaleSource(ctx, staleFromObject)
		return api.ObjectVersion{}, false, &api.StaleTokenError{Resource: fr.resource, Token: fr.token, HighWaterMark: seen.Token}
	}
	if !fr.cond.holds(seen) {
		return api.ObjectVersion{}, false, g.refuseCondition(ctx, fr, seen)
	}
	if h := g.hooks.AfterObserve; h != nil && !fr.noWrite {
		h(ctx, fr.resource, fr.token)
	}
	check := g.fences.FenceCheck
	if fr.renew {
		check = g.fences.FenceCheckRenew
	}
	if !seen.Exists && absent == checkOnAbsent {
		check = g.fences.CheckNotStale
	}
	if err := check(ctx, fr.resource, fr.token); err != nil {
		return api.ObjectVersion{}, false, err
	}
	if h := g.hooks.AfterFenceCheck; h != nil && !fr.noWrite {
		h(ctx, fr.resource, fr.token)
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
func (g *Gateway) refuseCondition(ctx context.Context, fr fencedRequest, seen api.ObjectVersion) error {
	if err := g.fences.CheckNotStale(ctx, fr.resource, fr.token); err != nil {
		return err
	}
	return fr.cond.failed(seen)
}

// fenceThenObserve is the protocol with steps 3 and 4 swapped. It is
// wrong, and exists only behind TestHooks.UnsafeFenceBeforeObserve.
func (g *Gateway) fenceThenObserve(ctx context.Context, fr fencedRequest, from observation) (api.ObjectVersion, bool, error) {
	if err := g.fences.FenceCheck(ctx, fr.resource, fr.token); err != nil {
		return api.ObjectVersion{}, false, err
	}
	if h := g.hooks.AfterFenceCheck; h != nil && !fr.noWrite {
		h(ctx, fr.resource, fr.token)
	}
	seen, cached, err := g.observe(ctx, fr, from)
	if err != nil {
		return api.ObjectVersion{}, false, err
	}
	if !fr.cond.holds(seen) {
		return api.ObjectVersion{}, false, fr.cond.failed(seen)
	}
	if h := g.hooks.AfterObserve; h != nil && !fr.noWrite {
		h(ctx, fr.resource, fr.token)
	}
	return seen, cached, nil
}

// putObject is the fenced write of the REST API: parse, fast reject, then
// putFenced (observe, fence check, conditional write).
func (g *Gateway) putObject(w http.ResponseWriter, r *http.Request) {
	fr, err := g.parseFenced(r, OpWrite)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	if g.putInParts(w, r, fr) { // bodies above Config.MultipartThreshold
		return
	}
	body, err := g.readBody(w, r)
	if errors.Is(err, api.ErrGatewayBusy) {
		// The rest of the body is not read: close the connection after
		// the answer rather than wait for it (net/http would otherwise
		// try to read up to 256 KiB of it before answering).
		w.Header().Set("Connection", "close")
	}
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	defer body.release()
	res, err := g.putFenced(r.Context(), fr, body, r.Header.Get("Content-Type"), api.ObjectMetadata{})
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
	}
	w.Header().Set("ETag", res.ETag)
	w.Header().Set(api.HeaderFenceToken, res.Token.String())
	writeJSON(w, status, res)
}

// putFenced is the protocol's steps 3 to 5 for a write of body, the same
// for every front door: observe, fence check, conditional write (see
// observeAndFence for why in that order), and after a lost race, while
// the body can be replayed, again from a fresh observation, up to
// Config.WriteAttempts rounds. What the write leaves is learned by the
// ETag cache.
func (g *Gateway) putFenced(ctx context.Context, fr fencedRequest, body *requestBody, contentType string, meta api.ObjectMetadata) (WriteResult, error) {
	in := api.PutObjectInput{
		Path:        fr.path,
		Size:        body.size,
		ContentType: contentType,
		Metadata:    meta,
		Token:       fr.token,
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
		seen, cached, err := g.observeAndFence(ctx, fr, from, raiseOnAbsent)
		if err != nil {
			return WriteResult{}, err
		}
		in.Replaces = seen
		in.UnsafeUnconditional = g.hooks.UnsafeUnconditionalWrite
		in.Body = body.reader()
		etag, err := g.objects.Put(ctx, in)
		if err != nil && body.stalled() {
			err = fmt.Errorf("%w: %w", api.ErrInvalidRequest, errBodyStalled(g.cfg.TransferChunkTimeout))
		}
		if err != nil && cached {
			// Whatever went wrong, the entry may be out of date: the
			// next write observes with a HEAD.
			g.etags.forget(fr.resource, seen)
		}
		if errors.Is(err, api.ErrConcurrentModification) && body.replayable() && attempt < g.cfg.WriteAttempts {
			g.logger(ctx).Debug("write lost a race; observing again", "resource", fr.resource, "attempt", attempt, "cached", cached)
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
		learned := api.ObjectVersion{Exists: true, ETag: etag, Token: fr.token}
		if !fr.encryption.Customer.IsZero() {
			learned.ETag = ""
		}
		g.etags.learn(fr.resource, learned)
		return g.accepted(ctx, WriteResult{Resource: fr.resource, Token: fr.token, ETag: etag, Created: !seen.Exists, ReplacedETag: seen.ETag, Encryption: answered}), nil
	}
}

// deleteObject is the fenced delete. The high-water mark stays, as a
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
func (g *Gateway) deleteObject(w http.ResponseWriter, r *http.Request) {
	fr, err := g.parseFenced(r, OpDelete)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	if err := g.deleteFenced(r.Context(), fr); err != nil {
		g.writeError(w, r, err)
		return
	}
	w.Header().Set(api.HeaderFenceToken, fr.token.String())
	w.WriteHeader(http.StatusNoContent)
}

// deleteFenced is the protocol's steps 3 to 5 for a delete, the same for
// every front door (see deleteObject for what a delete of an absent
// object does).
func (g *Gateway) deleteFenced(ctx context.Context, fr fencedRequest) error {
	fr.renew = true
	absent := checkOnAbsent
	if g.cfg.TombstonesForAbsent {
		absent = raiseOnAbsent
	}
	from := observeCachedExisting
	for attempt := 1; ; attempt++ {
		seen, cached, err := g.observeAndFence(ctx, fr, from, absent)
		if err != nil {
			return err
		}
		if seen.Exists {
			err = g.objects.Delete(ctx, fr.path, seen.ETag)
		}
		if err != nil && cached {
			g.etags.forget(fr.resource, seen)
		}
		if errors.Is(err, api.ErrConcurrentModification) && attempt < g.cfg.WriteAttempts {
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
			g.etags.learn(fr.resource, api.ObjectVersion{Token: fr.token})
		}
		g.publishObject(ctx, events.KindDeleteAccepted, fr.resource, fr.token, "", false)
		return nil
	}
}

// getObject passes GET and HEAD through, with the object's recorded token
// in X-Fence-Token, and the client's Range and preconditions as readInput
// validates them: S3's 206, 304, 412 and 416 reach the client.
func (g *Gateway) getObject(w http.ResponseWriter, r *http.Request) {
	path, err := g.objectPath(r)
	if err == nil {
		err = g.authorize(r.Context(), OpRead, path.Resource())
	}
	var in api.GetObjectInput
	if err == nil {
		in, err = readInput(r, path)
	}
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	var obj *api.Object
	if r.Method == http.MethodHead {
		obj, err = g.objects.Head(r.Context(), in)
	} else {
		obj, err = g.objects.Get(r.Context(), in)
	}
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	if obj.Body != nil {
		defer obj.Body.Close()
	}
	w.WriteHeader(setObjectHeaders(w.Header(), obj))
	if obj.Body != nil {
		if _, err := g.copyToClient(w, obj.Body); err != nil {
			g.logger(r.Context()).Warn("object read interrupted", "bucket", path.Bucket, "key", path.Key, "err", err)
		}
	}
}

// getFence answers a resource's current high-water mark, read
// linearizably.
func (g *Gateway) getFence(w http.ResponseWriter, r *http.Request) {
	resource, _ := strings.CutPrefix(r.URL.Path, "/v1/fences/")
	if resource == "" || len(resource) > maxResourceBytes {
		g.writeError(w, r, fmt.Errorf("%w: resource name must be 1 to %d bytes", api.ErrInvalidRequest, maxResourceBytes))
		return
	}
	if err := g.authorize(r.Context(), OpRead, api.Resource(resource)); err != nil {
		g.writeError(w, r, err)
		return
	}
	hwm, err := g.fences.HighWaterMark(r.Context(), api.Resource(resource))
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Fence{Resource: api.Resource(resource), HighWaterMark: hwm})
}

// maxResourceBytes bounds resource names: "gcs/" (or "s3/"), a bucket,
// "/", a key.
const maxResourceBytes = 4 + 63 + 1 + api.MaxKeyBytes

// requestBody is a PUT's body: in memory when it fits the buffer, so that
// it can be replayed after a lost race, or the request's own stream.
type requestBody struct {
	buf    *bufferedBody // non-nil when buffered
	stream io.Reader     // when not buffered
	size   int64
	// client is the request's body under its transfer deadlines; nil
	// where the connection takes none.
	client *clientBody
}

func (b *requestBody) replayable() bool { return b.buf != nil }

// stalled reports whether the client stopped sending the body: a chunk
// did not arrive within Config.TransferChunkTimeout.
func (b *requestBody) stalled() bool { return b.client != nil && b.client.stalled }

// errBodyStalled says why a body that stopped arriving was refused.
func errBodyStalled(timeout time.Duration) error {
	return fmt.Errorf("the body stopped arriving: no %d KiB within %v", transferChunkBytes>>10, timeout)
}

func (b *requestBody) reader() io.Reader {
	if b.buf != nil {
		return b.buf.reader()
	}
	return b.stream
}

// release gives a buffered body's memory back to the gateway's budget
// for bodies; the request is done with it.
func (b *requestBody) release() { b.buf.release() }

// readBody buffers bodies up to Config.BufferBytes and lets larger ones
// stream. A body of unknown length must fit the buffer (S3 needs the
// length up front), else 411. A buffered body is read as it arrives, in
// chunks reserved from the budget of all requests' bodies
// (Config.BufferBudgetBytes), never allocated at its Content-Length up
// front: a client that announces a large body and sends nothing holds one
// chunk. When the budget has no room, the answer is 503 gateway-busy and
// nothing is written. The caller releases the body when the request ends.
// Either way the body is read under the transfer deadlines (see
// clientBody): a sender that stalls is cut off.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) (*requestBody, error) {
	if r.ContentLength > g.cfg.MaxBodyBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", api.ErrBodyTooLarge, r.ContentLength, g.cfg.MaxBodyBytes)
	}
	from, client := g.clientReader(w, r)
	return g.readBodyFrom(from, r.ContentLength, client)
}

// readBodyFrom is readBody of a body from, of n bytes (-1: unknown), read
// under client's transfer deadlines (nil: none, or from reads through
// them already unbeknown to it).
func (g *Gateway) readBodyFrom(from io.Reader, n int64, client *clientBody) (*requestBody, error) {
	if n > g.cfg.MaxBodyBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", api.ErrBodyTooLarge, n, g.cfg.MaxBodyBytes)
	}
	if n > g.cfg.BufferBytes {
		return &requestBody{stream: from, size: n, client: client}, nil
	}
	buf, err := g.bufferWhole(from, n, g.cfg.BufferBytes, client)
	if err != nil {
		return nil, err
	}
	if buf.size > g.cfg.BufferBytes { // of unknown length
		buf.release()
		return nil, fmt.Errorf("%w: a body over %d bytes needs a Content-Length", api.ErrLengthRequired, g.cfg.BufferBytes)
	}
	return &requestBody{buf: buf, size: buf.size}, nil
}

// bufferWhole reads a body of n bytes (-1: unknown) from into memory
// reserved from the gateway's budget, under client's transfer deadlines
// (nil: none): exactly n bytes, else a 400; of unknown length, up to its
// end or to one byte past max, which the caller refuses. Its errors are
// answers (bodyReadError).
func (g *Gateway) bufferWhole(from io.Reader, n, max int64, client *clientBody) (*bufferedBody, error) {
	limit, first := n, int64(bodyChunkBytes)
	if n < 0 {
		limit, first = max+1, firstChunkBytes
	}
	buf, err := g.bufferBody(from, limit, first)
	if err != nil {
		return nil, g.bodyReadError(err, client)
	}
	if n >= 0 && buf.size != n {
		buf.release()
		return nil, g.bodyReadError(fmt.Errorf("%d bytes of %d", buf.size, n), client)
	}
	return buf, nil
}

// bodyReadError is the answer to a failed read of a body being buffered,
// read under client's transfer deadlines (nil: none): the budget's
// refusal as it is (503 gateway-busy), else a 400 that says whether the
// client stalled.
func (g *Gateway) bodyReadError(err error, client *clientBody) error {
	if errors.Is(err, api.ErrGatewayBusy) {
		return err
	}
	if client != nil && client.stalled {
		return fmt.Errorf("%w: %w", api.ErrInvalidRequest, errBodyStalled(g.cfg.TransferChunkTimeout))
	}
	return fmt.Errorf("%w: reading body: %w", api.ErrInvalidRequest, err)
}

// bufferBody reads up to max bytes of body into memory reserved from the
// gateway's budget (see readInto), counting the refusals when the budget
// has no room. Its errors are readInto's, for readBody to map.
func (g *Gateway) bufferBody(body io.Reader, max, first int64) (*bufferedBody, error) {
	buf, err := readInto(g.bodies, body, max, first)
	if errors.Is(err, api.ErrGatewayBusy) {
		g.metrics.bodyBudgetRefusals.Inc()
	}
	if err != nil {
		return nil, err
	}
	return buf, nil
}
