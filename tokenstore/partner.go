package tokenstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
)

// Partner admissions: the fence check, the per-resource in-flight marker and
// the idempotency record of a request to a partner API, decided in one etcd
// transaction.
//
// Leases. The marker and the in-flight idempotency record are bound to a
// lease that is never kept alive: its TTL is the request's Hold (the
// route's timeout) plus a margin for the two etcd round trips around the
// upstream call (2 x RequestTimeout + 1 s). A request cannot stay upstream
// longer than its Hold, so the marker cannot vanish while its gateway may
// still have the request upstream, even if that gateway is cut off from
// etcd (a kept-alive per-process lease would expire then, and let a second
// gateway forward while the first request still runs). If the gateway
// dies, the marker and the record go when the lease expires. To spare a
// lease grant per request, requests share a lease for up to a second (see
// leasePool): a marker outlives a dead gateway by Hold + margin, and at
// most one second more.

// holdLeaseReuse is how long in-flight leases are shared between requests.
const holdLeaseReuse = time.Second

// Partners admits requests to partner APIs, with the etcd client, key
// prefix, request timeout and high-water mark cache of a Store. It is safe
// for concurrent use. Make it with NewPartners.
type Partners struct {
	store  *Store
	leases *leasePool
	usage  *usageLedger // idempotency budgets (idempotency_usage.go)
}

// NewPartners returns the partner admissions of store.
func NewPartners(store *Store) (*Partners, error) {
	if store == nil {
		return nil, errors.New("tokenstore: nil store")
	}
	return &Partners{store: store, leases: newLeasePool(store.client, store.timeout), usage: newUsageLedger(store)}, nil
}

// CachedHighWaterMark is the Store's: a lower bound of resource's mark,
// known without a round trip.
func (p *Partners) CachedHighWaterMark(resource api.Resource) (api.Token, bool) {
	return p.store.CachedHighWaterMark(resource)
}

// markerKey is the in-flight marker of a resource.
func (s *Store) markerKey(r api.Resource) string { return s.prefix + "inflight/" + string(r) }

// idempotencyKey is the record of an idempotency key in its scope.
func (s *Store) idempotencyKey(scope string, key api.IdempotencyKey) string {
	return s.prefix + "idem/" + scope + "/" + string(key)
}

// holdMargin covers the etcd round trips before and after the upstream
// call: the admission's transaction and Finish's.
func (s *Store) holdMargin() time.Duration { return 2*s.timeout + time.Second }

// AdmitPartner decides whether a request may be forwarded to a partner.
// The resource's Policy applies as in FenceCheck: under CheckPlausible a
// token above etcd's current revision is refused first
// (api.ErrImplausibleToken), before anything is looked up or taken; under
// CheckHeld the holder check is a layer of the admission transaction (see
// heldTxn), so that the token is the lock holder's at the revision that
// raises the mark and takes the marker.
//
// With an idempotency claim whose budgets (api.IdempotencyBudget) are used
// up, it only looks for the key's record, answers from it as below when
// there is one, and otherwise fails with
// api.ErrIdempotencyBudgetExhausted, writing nothing (see
// idempotency_usage.go).
//
// With an idempotency claim, it then looks for the key's record: a
// completed record with the same fingerprint is returned as
// Admission.Replay (nothing else is checked: the request was admitted
// before), an in-flight one is api.ErrIdempotencyInFlight, and one with
// another fingerprint api.ErrIdempotencyMismatch. Otherwise it runs the
// fence check and takes the resource's in-flight marker (and creates the
// key's record, in flight) in one etcd transaction:
//
//	If(CreateRevision(record) > 0) Then(Get(record))      -- with a claim only
//	Else(heldTxn(lock, token,                              -- under CheckHeld only
//	  Txn(
//	    If(Value(hwm) > token) Then(Get(hwm))              -- stale
//	    Else(Txn(
//	        If(CreateRevision(marker) = 0)
//	        Then(Put(hwm, token), Put(marker, lease), Put(record, lease))
//	        Else(Get(marker)))))))                          -- busy
//
// Each layer that does not apply is left out, and the next one takes its
// place at the top. Nothing is written unless the request is admitted: a
// refused, stale or busy request leaves neither a raised mark nor a
// record. When the resource is busy, it watches the marker's deletion and
// tries again, for up to req.MaxWait; a token that became stale (or lost
// the lock) meanwhile is refused then. After that it fails with
// api.ErrResourceBusy.
//
// Errors: a *api.StaleTokenError, an error wrapping api.ErrImplausibleToken
// or a *api.LockNotHeldError (api.ErrLockNotHeld),
// api.ErrIdempotencyInFlight, api.ErrIdempotencyMismatch,
// api.ErrIdempotencyBudgetExhausted, api.ErrResourceBusy, ctx's error when ctx ends while waiting, or
// api.ErrUnavailable when etcd cannot decide (the outcome is then unknown,
// and the caller must forward nothing; what the transaction may have taken
// is removed on a best-effort basis, and otherwise expires with its lease).
//
// Each transaction runs to its end even if ctx is cancelled meanwhile, so
// that a client that disconnects never leaves an outcome unknown.
func (p *Partners) AdmitPartner(ctx context.Context, req api.PartnerAdmission) (api.Admission, error) {
	s := p.store
	if req.Hold <= 0 {
		return api.Admission{}, fmt.Errorf("admit %s: hold %v must be above zero", req.Resource, req.Hold)
	}
	if req.Token < 1 || req.Token > api.MaxToken {
		return api.Admission{}, fmt.Errorf("admit %s: %w: token %d out of range", req.Resource, api.ErrMalformedToken, req.Token)
	}
	policy := s.policies.match(req.Resource)
	if policy.Check == CheckPlausible {
		// Outside the transaction, as in FenceCheck: etcd's revision only
		// grows, so a token found plausible stays so.
		checkCtx, cancel := context.WithTimeout(ctx, s.timeout)
		err := s.checkPlausible(checkCtx, req.Resource, req.Token)
		cancel()
		if err != nil {
			return api.Admission{}, fmt.Errorf("admit: %w", err)
		}
	}
	if c := req.Idempotency; c != nil && len(c.Budgets) > 0 {
		// A used-up budget refuses new records, not replays: see
		// idempotency_usage.go.
		if err := p.usage.overBudget(ctx, c.Budgets); err != nil {
			if !errors.Is(err, api.ErrIdempotencyBudgetExhausted) {
				return api.Admission{}, fmt.Errorf("admit %s: %w", req.Resource, err)
			}
			return p.lookUpRecord(ctx, req, err)
		}
	}
	deadline := time.Now().Add(req.MaxWait)
	for {
		if err := ctx.Err(); err != nil {
			return api.Admission{}, fmt.Errorf("admit %s: %w", req.Resource, err)
		}
		start := p.leases.now()
		out, err := p.admitOnce(ctx, req, policy)
		if err != nil || !out.busy {
			if out.admission.Finish != nil {
				out.admission.Expires = markerExpiry(start, req.Hold+s.holdMargin())
			}
			return out.admission, err
		}
		if req.MaxWait <= 0 || !time.Now().Before(deadline) {
			return api.Admission{}, fmt.Errorf("admit %s: %w: another request is in flight", req.Resource, api.ErrResourceBusy)
		}
		if err := s.waitMarkerGone(ctx, s.markerKey(req.Resource), out.markerRevision, deadline); err != nil {
			return api.Admission{}, err
		}
	}
}

// markerExpiry is Admission.Expires: a lower bound of when the marker of
// an admission that started at start may expire. admitOnce binds the
// marker to a lease from the pool that lives at least hold (the request's
// Hold plus holdMargin) from when the pool was asked, which is after
// start: a pooled lease is reused only if its own lower bound is that far
// off; a new one's TTL (whole seconds, at least hold) runs from when
// etcd's leader applies the grant, after the pool read its clock. etcd
// only ever lengthens a lease (a new leader renews every lease), never
// shortens it, unless it is revoked or etcd is restored from a backup.
func markerExpiry(start time.Time, hold time.Duration) time.Time { return start.Add(hold) }

// admitOutcome is the result of one admission transaction.
type admitOutcome struct {
	admission api.Admission
	// busy: the marker is held; markerRevision is the revision at which
	// it was seen held.
	busy           bool
	markerRevision int64
}

// admitOnce runs one admission transaction, with the holder check of
// policy when it is CheckHeld: it builds it (buildAdmission), commits it,
// and reads its answer (readAdmission).
func (p *Partners) admitOnce(ctx context.Context, req api.PartnerAdmission, policy Policy) (admitOutcome, error) {
	s := p.store
	lease, err := p.leases.lease(ctx, req.Hold+s.holdMargin(), holdLeaseReuse)
	if err != nil {
		return admitOutcome{}, fmt.Errorf("admit %s: lease: %w: %w", req.Resource, api.ErrUnavailable, err)
	}
	t, err := s.buildAdmission(req, policy, lease, newNonce())
	if err != nil {
		return admitOutcome{}, fmt.Errorf("admit %s: %w", req.Resource, err)
	}
	txnCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	resp, err := s.client.Txn(txnCtx).If(t.txn.cmps...).Then(t.txn.then...).Else(t.txn.els...).Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// The pooled lease is gone (revoked, or etcd restored from a
		// backup): nothing was written. Forget it; the next try grants.
		p.leases.forget(lease)
		return admitOutcome{}, fmt.Errorf("admit %s: %w: %w", req.Resource, api.ErrUnavailable, err)
	}
	if err != nil {
		s.cleanUpUnknownAdmission(ctx, t.markerKey, t.markerValue, t.recordKey, t.recordValue)
		return admitOutcome{}, fmt.Errorf("admit %s: %w: %w", req.Resource, api.ErrUnavailable, err)
	}
	s.revisions.observe(resp.Header.Revision)
	out, err := s.readAdmission(t, txnAnswer{succeeded: resp.Succeeded, responses: resp.Responses})
	switch {
	case err != nil, out.admission.Replay != nil:
		return out, err
	case out.busy:
		// The marker existed at the transaction's revision: wait for a
		// deletion after it. Not after the marker's own revision, which
		// etcd may have compacted away while the marker was held: a
		// watch from there is refused, and the wait would become a loop
		// of reads until the marker goes.
		out.markerRevision = resp.Header.Revision
		return out, nil
	}
	s.cache.raise(req.Resource, req.Token)
	held := heldAdmission{
		partners:  p,
		resource:  req.Resource,
		marker:    t.markerKey,
		record:    t.recordKey,
		nonce:     t.nonce,
		revision:  resp.Header.Revision, // the create revision of both keys
		retention: defaultRetention,
	}
	if c := req.Idempotency; c != nil {
		held.claim = *c
		held.token = req.Token
		if c.Retention > 0 {
			held.retention = c.Retention
		}
	}
	return admitOutcome{admission: api.Admission{Finish: held.finish, ID: t.nonce}}, nil
}

// admission is one admission transaction, built, with what it writes.
type admission struct {
	req    api.PartnerAdmission
	policy Policy
	nonce  string
	// markerKey holds markerValue (the nonce and the token) once
	// admitted; recordKey ("" without a claim) recordValue.
	markerKey, markerValue string
	recordKey              string
	recordValue            []byte
	txn                    txnLayer
}

// txnLayer is one layer of a nested transaction: its compares and
// branches. The branch that goes on to the next layer holds exactly one
// operation, that layer's transaction.
type txnLayer struct {
	cmps      []clientv3.Cmp
	then, els []clientv3.Op
}

// op is the layer as an operation of the layer around it.
func (l txnLayer) op() clientv3.Op { return clientv3.OpTxn(l.cmps, l.then, l.els) }

// buildAdmission builds req's admission transaction (see AdmitPartner)
// from the inside out: the fence check and the marker, then the holder
// check under CheckHeld, then the record lookup with a claim. Each layer
// takes the one built before as the one operation of the branch that
// goes on.
func (s *Store) buildAdmission(req api.PartnerAdmission, policy Policy, lease clientv3.LeaseID, nonce string) (admission, error) {
	token := encodeToken(req.Token)
	t := admission{req: req, policy: policy, nonce: nonce, markerKey: s.markerKey(req.Resource), markerValue: nonce + " " + token}
	hwmKey := s.hwmKey(req.Resource)
	puts := []clientv3.Op{
		clientv3.OpPut(hwmKey, token),
		clientv3.OpPut(t.markerKey, t.markerValue, clientv3.WithLease(lease)),
	}
	if c := req.Idempotency; c != nil {
		t.recordKey = s.idempotencyKey(c.Scope, c.Key)
		value, err := encodeRecord(record{State: stateInFlight, Fingerprint: c.Fingerprint.String(), HeaderFingerprint: c.HeaderFingerprint.String(), Token: req.Token, Nonce: nonce, Resource: req.Resource})
		if err != nil {
			return admission{}, err
		}
		t.recordValue = value
		puts = append(puts, clientv3.OpPut(t.recordKey, string(value), clientv3.WithLease(lease)))
	}
	marker := txnLayer{ // busy unless the marker is absent
		cmps: []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(t.markerKey), "=", 0)},
		then: puts,
		els:  []clientv3.Op{clientv3.OpGet(t.markerKey)},
	}
	t.txn = txnLayer{ // stale when the mark is above the token
		cmps: []clientv3.Cmp{clientv3.Compare(clientv3.Value(hwmKey), ">", token)},
		then: []clientv3.Op{clientv3.OpGet(hwmKey)},
		els:  []clientv3.Op{marker.op()},
	}
	if policy.Check == CheckHeld {
		cmps, then, els := s.heldTxn(policy.Lock, req.Token, t.txn.op())
		t.txn = txnLayer{cmps, then, els}
	}
	if t.recordKey != "" { // a replay or a refusal when the record exists
		t.txn = txnLayer{
			cmps: []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(t.recordKey), ">", 0)},
			then: []clientv3.Op{clientv3.OpGet(t.recordKey)},
			els:  []clientv3.Op{t.txn.op()},
		}
	}
	return t, nil
}

// txnAnswer is the answer of one layer: whether its compares succeeded,
// and the responses of the branch taken.
type txnAnswer struct {
	succeeded bool
	responses []*etcdserverpb.ResponseOp
}

// inner is the answer of the next layer, the one operation of the branch
// taken.
func (a txnAnswer) inner() txnAnswer {
	return answerOf(a.responses[0])
}

// answerOf is the answer of a nested transaction's operation.
func answerOf(op *etcdserverpb.ResponseOp) txnAnswer {
	txn := op.GetResponseTxn()
	return txnAnswer{succeeded: txn.GetSucceeded(), responses: txn.GetResponses()}
}

// kvs are the keys of the branch's one range read.
func (a txnAnswer) kvs() []*mvccpb.KeyValue { return a.responses[0].GetResponseRange().GetKvs() }

// readAdmission reads the answer of t's transaction, layer by layer from
// the outside in, as buildAdmission built them: a replay or refusal from
// the record, a token check's refusal, stale, busy, or admitted (the zero
// admitOutcome).
func (s *Store) readAdmission(t admission, a txnAnswer) (admitOutcome, error) {
	req := t.req
	if t.recordKey != "" {
		if a.succeeded {
			return existingRecord(req, a.kvs())
		}
		a = a.inner()
	}
	if t.policy.Check == CheckHeld {
		admitted, err := heldResult(req.Resource, t.policy.Lock, req.Token, a.succeeded, a.responses)
		if err != nil {
			return admitOutcome{}, fmt.Errorf("admit: %w", err)
		}
		a = answerOf(admitted)
	}
	if a.succeeded { // stale
		kvs := a.kvs()
		if len(kvs) != 1 {
			return admitOutcome{}, fmt.Errorf("admit %s: compare succeeded but the mark is gone: %w", req.Resource, api.ErrUnavailable)
		}
		hwm, err := decodeToken(kvs[0].Value)
		if err != nil {
			return admitOutcome{}, fmt.Errorf("admit %s: %w", req.Resource, err)
		}
		s.cache.raise(req.Resource, hwm)
		return admitOutcome{}, &api.StaleTokenError{Resource: req.Resource, Token: req.Token, HighWaterMark: hwm}
	}
	if !a.inner().succeeded {
		return admitOutcome{busy: true}, nil
	}
	return admitOutcome{}, nil
}

// waitMarkerGone waits until the marker key is deleted after revision
// fromRev, or deadline passes (api.ErrResourceBusy), or ctx ends.
func (s *Store) waitMarkerGone(ctx context.Context, key string, fromRev int64, deadline time.Time) error {
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	watch := s.client.Watch(clientv3.WithRequireLeader(wctx), key, clientv3.WithRev(fromRev+1), clientv3.WithFilterPut())
	for wr := range watch {
		if err := wr.Err(); err != nil {
			// Compacted past fromRev, or the leader is lost: let the
			// caller look again.
			return nil
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("admit: waiting for %s: %w", key, ctx.Err())
	case wctx.Err() != nil:
		return fmt.Errorf("admit: %w: another request was still in flight when the wait ended", api.ErrResourceBusy)
	}
	return nil // the watch closed on its own: look again
}

// cleanUpUnknownAdmission removes, on a best-effort basis, what an
// admission transaction of unknown outcome may have written: the marker
// and the record, each only if it still holds this admission's value
// (whose nonce no other admission has). The high-water mark may stay
// raised, as after any 503. Whatever is left expires with its lease.
func (s *Store) cleanUpUnknownAdmission(ctx context.Context, markerKey, markerValue, recordKey string, recordValue []byte) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	ops := []clientv3.Op{clientv3.OpDelete(markerKey)}
	if recordKey != "" {
		ops = append(ops, clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(recordKey), "=", string(recordValue))},
			[]clientv3.Op{clientv3.OpDelete(recordKey)}, nil))
	}
	_, _ = s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(markerKey), "=", markerValue)).
		Then(ops...).
		Commit()
}

// heldAdmission is what an admitted request holds until Finish.
type heldAdmission struct {
	partners  *Partners
	resource  api.Resource
	marker    string
	record    string // "" without an idempotency claim
	nonce     string // the admission's, in the marker and the record
	revision  int64  // create revision of the marker and the record
	claim     api.IdempotencyClaim
	token     api.Token
	retention time.Duration
}

// finishAttempts bounds the tries of Finish's transaction, which is
// idempotent (guarded by the keys' create revision).
const finishAttempts = 3

// finish stores resp in the record (or drops the record when resp is nil)
// and deletes the marker, each only if it is still this admission's:
//
//	If(CreateRevision(record) = rev)
//	Then(Put(record, completed, retention lease) or Delete(record), Txn(marker...))
//	Else(Txn(If(CreateRevision(marker) = rev) Then(Delete(marker))))
func (h heldAdmission) finish(ctx context.Context, resp *api.StoredResponse) error {
	releaseMarker := clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(h.marker), "=", h.revision)},
		[]clientv3.Op{clientv3.OpDelete(h.marker)}, nil)
	f := finishing{undo: func() {}}
	if h.record != "" && resp != nil {
		value, err := h.completedRecord(resp)
		if err != nil {
			return fmt.Errorf("finish %s: %w", h.resource, err)
		}
		f.value = value
	}
	var err error
	for attempt := 1; attempt <= finishAttempts; attempt++ {
		if attempt > 1 {
			time.Sleep(time.Duration(attempt-1) * 100 * time.Millisecond)
		}
		err = h.finishOnce(ctx, &f, releaseMarker)
		if err == nil || ctx.Err() != nil || errors.Is(err, api.ErrIdempotencyRecordLost) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("finish %s: %w: %w (the marker and record expire with their lease)", h.resource, api.ErrUnavailable, err)
	}
	return err
}

// finishing is what Finish's attempts share: the completed record's
// value (nil: the record is dropped), and, once charged, the operations
// that count it in its budgets and the function that takes that back
// (see usageLedger.charge). An attempt of unknown outcome keeps the
// charge, and the next attempt puts the same totals again: the record is
// counted once.
type finishing struct {
	value    []byte
	charged  bool
	usageOps []clientv3.Op
	undo     func()
}

// completedRecord is the value of h's record completed with resp.
func (h heldAdmission) completedRecord(resp *api.StoredResponse) ([]byte, error) {
	if resp.BodyRef != nil && len(resp.Body) > 0 {
		return nil, errors.New("a stored response has a body and a reference to one")
	}
	r := record{
		State:             stateComplete,
		Fingerprint:       h.claim.Fingerprint.String(),
		HeaderFingerprint: h.claim.HeaderFingerprint.String(),
		Token:             h.token,
		Resource:          h.resource,
		Nonce:             h.nonce,
		Status:            resp.Status,
		Header:            resp.Header,
		BodyOmitted:       resp.BodyOmitted,
		Completed:         time.Now().UTC().Format(time.RFC3339Nano),
		body:              resp.Body,
	}
	r.setBodyRef(resp.BodyRef)
	return encodeRecord(r)
}

func (h heldAdmission) finishOnce(ctx context.Context, f *finishing, releaseMarker clientv3.Op) error {
	s := h.partners.store
	if h.record == "" {
		tctx, cancel := context.WithTimeout(ctx, s.timeout)
		defer cancel()
		_, err := s.client.Txn(tctx).Then(releaseMarker).Commit()
		return err
	}
	var recordOp clientv3.Op
	var lease clientv3.LeaseID
	if f.value == nil {
		recordOp = clientv3.OpDelete(h.record)
	} else {
		var err error
		lease, err = h.partners.leases.lease(ctx, h.retention, retentionLeaseReuse)
		if err != nil {
			return err
		}
		recordOp = clientv3.OpPut(h.record, string(f.value), clientv3.WithLease(lease))
		if !f.charged {
			// The record counts in its budgets' accounts from the
			// transaction that completes it (idempotency_usage.go).
			f.usageOps, f.undo, err = h.partners.usage.charge(ctx, h.claim.Budgets, h.retention, int64(len(h.record)+len(f.value)))
			if err != nil {
				return err
			}
			f.charged = true
		}
	}
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	r, err := s.client.Txn(tctx).
		If(clientv3.Compare(clientv3.CreateRevision(h.record), "=", h.revision)).
		Then(append([]clientv3.Op{recordOp, releaseMarker}, f.usageOps...)...).
		Else(releaseMarker).
		Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// Nothing was written: forget whichever lease is gone, and
		// charge again with the next attempt's.
		f.undo()
		f.charged, f.usageOps, f.undo = false, nil, func() {}
		h.partners.leases.forget(lease)
		h.partners.usage.forgetAll()
		return err
	}
	if err != nil {
		// The outcome is unknown: the charge stays, erring on the side
		// of the budget.
		return err
	}
	if !r.Succeeded {
		f.undo()
		return api.ErrIdempotencyRecordLost
	}
	return nil
}

// newNonce returns 16 random hex digits that tell one admission's values
// from every other's.
func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}
