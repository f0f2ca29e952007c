package tokenstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
)

// Check is a kind of token check that a Policy adds to the fence check's
// "token >= high-water mark".
type Check string

// The token checks.
const (
	// CheckNone accepts any token that is not stale: tokens may come from
	// any monotonic source (an etcd Mutex, a database lease table, a
	// ZooKeeper zxid). It is the default.
	CheckNone Check = "none"
	// CheckPlausible also refuses a token larger than etcd's current
	// revision (api.ErrImplausibleToken): no lock on this etcd cluster
	// can have issued it, and accepting it would raise the high-water
	// mark so far that no real token could ever write again. Use it when
	// tokens are revisions of the gateway's own etcd cluster (fencegate
	// locks, or concurrency.Mutex on the same cluster).
	CheckPlausible Check = "plausible"
	// CheckHeld also refuses a token that is not the current holder's of
	// the policy's lock (api.ErrLockNotHeld), in the same etcd
	// transaction as the high-water mark raise (and, for a partner
	// resource, as the rest of the admission). A writer whose session
	// expired is refused even when nobody else has acquired the lock
	// yet, which plain fencing cannot do. Tokens must come from
	// fencegate's lock API (POST /v1/locks/{name}).
	CheckHeld Check = "held"
)

// ParseCheck parses the name of a check: "none", "plausible" or "held".
func ParseCheck(s string) (Check, error) {
	switch c := Check(s); c {
	case CheckNone, CheckPlausible, CheckHeld:
		return c, nil
	}
	return "", fmt.Errorf("token check %q: want none, plausible or held", s)
}

// Policy binds a token check to the resources whose names start with
// Prefix, such as "s3/reports/" for every object of the bucket "reports"
// or "partner/payments/" for every resource of the partner route
// "payments". It applies to both Store.FenceCheck and
// Partners.AdmitPartner.
type Policy struct {
	// Prefix selects the resources the policy applies to. When several
	// policies match a resource, the one with the longest prefix wins.
	// Empty matches every resource.
	Prefix api.Resource
	// Check is the check to apply. Empty means CheckNone.
	Check Check
	// Lock names the fencegate lock whose current holder's token a
	// CheckHeld write must carry. Required with CheckHeld, and empty with
	// the other checks.
	Lock string
}

// policies is a validated list of policies, longest prefix first.
type policies []Policy

// Validate checks p on its own: a known check, and a lock name with
// CheckHeld and only with it. Its messages do not name the prefix: the
// caller does.
func (p Policy) Validate() error {
	check := p.Check
	if check == "" {
		check = CheckNone
	}
	if _, err := ParseCheck(string(check)); err != nil {
		return err
	}
	switch {
	case check == CheckHeld && p.Lock == "":
		return errors.New("held needs a lock name (held:LOCK)")
	case check == CheckHeld:
		return api.ValidateLockName(p.Lock)
	case p.Lock != "":
		return errors.New("a lock name goes only with held")
	}
	return nil
}

// ValidatePolicies checks ps as Config.Policies: each policy (see
// Policy.Validate), and at most one per prefix.
func ValidatePolicies(ps []Policy) error {
	_, err := newPolicies(ps)
	return err
}

// newPolicies validates ps and sorts a copy by decreasing prefix length.
func newPolicies(ps []Policy) (policies, error) {
	out := slices.Clone(ps)
	seen := make(map[api.Resource]bool, len(out))
	var errs []error
	for i := range out {
		p := &out[i]
		if p.Check == "" {
			p.Check = CheckNone
		}
		if err := p.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("policy for prefix %q: %w", p.Prefix, err))
		}
		if seen[p.Prefix] {
			errs = append(errs, fmt.Errorf("two policies for prefix %q", p.Prefix))
		}
		seen[p.Prefix] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b Policy) int { return len(b.Prefix) - len(a.Prefix) })
	return out, nil
}

// match returns the policy with the longest prefix of resource, or a
// CheckNone policy when none matches.
func (ps policies) match(resource api.Resource) Policy {
	for _, p := range ps {
		if strings.HasPrefix(string(resource), string(p.Prefix)) {
			return p
		}
	}
	return Policy{Check: CheckNone}
}

// revisionClock is the largest etcd revision this Store has seen in any
// answer from etcd (response headers, watch events). etcd's revision only
// grows, so it is a lower bound of the current revision: a token at or
// below it is plausible without asking etcd. Only a token above it costs a
// round trip (a linearizable read of the current revision), and a token
// issued by a lock of this gateway never does, since the grant's own answer
// raised the clock to its token.
type revisionClock struct {
	seen atomic.Int64
	// refresh serializes refreshes (a semaphore that honours contexts),
	// so that a burst of tokens from the future costs one read at a time.
	refresh chan struct{}
}

func newRevisionClock() *revisionClock {
	return &revisionClock{refresh: make(chan struct{}, 1)}
}

// observe raises the clock to rev, if rev is larger.
func (c *revisionClock) observe(rev int64) {
	for {
		old := c.seen.Load()
		if rev <= old || c.seen.CompareAndSwap(old, rev) {
			return
		}
	}
}

// checkPlausible refuses a token larger than etcd's current revision. It
// makes no etcd request when the token is at or below the largest revision
// seen; otherwise one linearizable read, whose answer is the current
// revision.
func (s *Store) checkPlausible(ctx context.Context, resource api.Resource, token api.Token) error {
	if int64(token) <= s.revisions.seen.Load() {
		return nil
	}
	select {
	case s.revisions.refresh <- struct{}{}:
		defer func() { <-s.revisions.refresh }()
	case <-ctx.Done():
		return fmt.Errorf("token check %s: %w: %w", resource, api.ErrUnavailable, ctx.Err())
	}
	if int64(token) <= s.revisions.seen.Load() { // raised while we queued
		return nil
	}
	s.revisionReads.Add(1)
	resp, err := s.client.Get(ctx, s.prefix+"ping", clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("token check %s: reading etcd's revision: %w: %w", resource, api.ErrUnavailable, err)
	}
	s.revisions.observe(resp.Header.Revision)
	if int64(token) > resp.Header.Revision {
		return fmt.Errorf("token check %s: %w: token %d is above etcd's current revision %d", resource, api.ErrImplausibleToken, token, resp.Header.Revision)
	}
	return nil
}

// RevisionReads counts the etcd reads that plausible checks made because a
// token was above the largest revision seen. In steady state, with tokens
// issued before the gateway's last answer from etcd, it does not grow.
func (s *Store) RevisionReads() int64 { return s.revisionReads.Load() }

// fenceCheckHeld is the fence check under CheckHeld: one etcd transaction
// (heldTxn) that accepts token only if it is the current holder's of the
// lock, and then compares and raises the high-water mark as FenceCheck
// does:
//
//	heldTxn(lock, token,
//	    Txn(If(Value(hwm) > token)
//	        Then(Get(hwm))                 -> stale
//	        Else(Put(hwm, token))))        -> accepted
func (s *Store) fenceCheckHeld(ctx context.Context, resource api.Resource, token api.Token, lock string) error {
	key, value := s.hwmKey(resource), encodeToken(token)
	cmps, then, els := s.heldTxn(lock, token, fenceOp(key, value))
	// The check only reads the lock's queue and writes only the mark, so
	// it may share a group commit with other checks, of this lock too.
	resp, err := s.commitFence(ctx, key, clientv3.OpTxn(cmps, then, els))
	if err != nil {
		return fmt.Errorf("fence check %s: %w: %w", resource, api.ErrUnavailable, err)
	}
	admitted, err := heldResult(resource, lock, token, resp.Succeeded, resp.Responses)
	if err != nil {
		return fmt.Errorf("fence check: %w", err)
	}
	return s.fenceResult(resource, token, (*clientv3.TxnResponse)(admitted.GetResponseTxn()))
}

// heldTxn returns the compares and branches of a transaction that runs
// admitted only if token is the create revision of the oldest key in the
// lock's queue (the current holder, see locks.go). Callers put them at the
// top of a transaction (Txn.If(cmps...).Then(then...).Else(els...)) or
// nest them (clientv3.OpTxn(heldTxn(...))), so that the check and what it
// guards are one etcd transaction, and read the answer with heldResult.
//
// etcd cannot name "the key whose create revision is token" (the queue key
// is named by the holder's session, which the writer does not send), but a
// compare on a key range must hold for every key in the range, and on an
// empty range it is evaluated against a zero key (create revision 0) (etcd
// server/etcdserver/txn/txn.go, applyCompare). So, with Q the queue prefix:
//
//	If(CreateRevision(Q*) > token-1)       every queue key was created at or after token;
//	                                       false on an empty queue (0 > token-1 is false)
//	Then(Txn(
//	    If(CreateRevision(Q*) > token)     ... and none at token: token's key is gone
//	    Then(Count(Q*))                    -> not held
//	    Else(admitted)))                   a key created at token exists and is the oldest
//	Else(Count(Q*))                        -> not held (an older key holds, or none)
//
// Create revisions in one queue are distinct (each queue key is created by
// its own transaction), so "all >= token and not all > token" is exactly
// "the oldest key was created at token". A holder record key is not needed:
// the queue itself is the record, and a lease that expires removes its
// queue key in the same revision, so a writer whose session ended is
// refused even if nobody else has queued. A refusal reads only how many
// keys the queue has (whether the lock is free), never the holder's key:
// its create revision is the token that passes, and the refused caller
// must not learn it.
func (s *Store) heldTxn(lock string, token api.Token, admitted clientv3.Op) (cmps []clientv3.Cmp, then, els []clientv3.Op) {
	queue := s.lockQueue(lock)
	count := clientv3.OpGet(queue, clientv3.WithPrefix(), clientv3.WithCountOnly())
	return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(queue), ">", int64(token)-1).WithPrefix()},
		[]clientv3.Op{clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(queue), ">", int64(token)).WithPrefix()},
			[]clientv3.Op{count},
			[]clientv3.Op{admitted},
		)},
		[]clientv3.Op{count}
}

// heldResult reads the answer of heldTxn's transaction, given whether its
// compare succeeded and its responses: the response of admitted when token
// is the holder's, else a *api.LockNotHeldError.
func heldResult(resource api.Resource, lock string, token api.Token, succeeded bool, responses []*etcdserverpb.ResponseOp) (*etcdserverpb.ResponseOp, error) {
	if succeeded {
		inner := responses[0].GetResponseTxn()
		if !inner.GetSucceeded() {
			return inner.GetResponses()[0], nil
		}
		responses = inner.GetResponses()
	}
	held := responses[0].GetResponseRange().GetCount() > 0
	return nil, &api.LockNotHeldError{Resource: resource, Lock: lock, Token: token, Held: held}
}
