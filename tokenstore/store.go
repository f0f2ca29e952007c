package tokenstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
)

// Config configures a Store.
type Config struct {
	// Prefix is put before every key the store writes, so that several
	// deployments can share one etcd cluster. Empty means "fencegate/".
	Prefix string
	// RequestTimeout bounds each etcd request. Zero means 2 seconds.
	RequestTimeout time.Duration
	// CacheBytes bounds the memory of the high-water mark cache, which
	// lets a stale token be refused without a round trip: resource names
	// and per-entry overhead, counted in bytes since clients choose the
	// names. Past it, arbitrary entries are forgotten, which is always
	// safe (a forgotten mark costs a round trip to etcd, never a wrong
	// answer). Zero means 64 MiB.
	CacheBytes int64
	// MaxSessionsPerIdentity bounds the live sessions of each identity
	// (the owner CreateSession is given; "" without auth is one
	// identity), counted across every gateway on the etcd cluster: past
	// it CreateSession fails with api.ErrTooManySessions. Zero means
	// DefaultMaxSessionsPerIdentity; negative means no limit.
	MaxSessionsPerIdentity int
	// MaxLocksPerSession bounds the locks a session holds plus the
	// queues it waits in: past it Acquire fails with api.ErrTooManyLocks
	// and queues nothing. Zero means DefaultMaxLocksPerSession; negative
	// means no limit.
	MaxLocksPerSession int
	// Policies add token checks to the fence checks of the resources
	// they match (see Policy and Check). Nil means CheckNone everywhere.
	Policies []Policy
	// DisableGroupCommit sends every fence check that raises or creates a
	// mark in a transaction of its own. False (the default) lets
	// concurrent ones share transactions (group commit, groupcommit.go):
	// the same answers, fewer Raft entries and fsyncs under load.
	DisableGroupCommit bool
	// ObserveFenceBatch, when not nil, is called with the number of fence
	// checks each group-commit transaction carries, once per transaction
	// as it is sent to etcd, whatever etcd answers: 1 for a check sent
	// alone, more for a batch (at most 64). It must be safe for
	// concurrent use and must not block: it runs on the fence check's
	// path. Nil means the sizes are not observed. A check confirmed
	// without a write (the mark this Store last saw is at its token), and
	// every check under DisableGroupCommit, goes outside group commit and
	// is not observed.
	ObserveFenceBatch func(size int)
}

// defaultCacheBytes is Config.CacheBytes' default: about 50,000 marks of
// resources with names near the longest (1 KiB keys), a million of 10-byte
// keys.
const defaultCacheBytes = 64 << 20

// Store keeps high-water marks in etcd. It is safe for concurrent use.
type Store struct {
	client  *clientv3.Client
	prefix  string
	timeout time.Duration
	cache   *hwmCache
	// confirms reads marks for confirmMark, batched (confirm.go).
	confirms *confirmer
	// raises sends the fence checks that write, batched (groupcommit.go);
	// nil when Config.DisableGroupCommit is set.
	raises *groupCommitter

	// policies, revisions and the counters serve the token checks and
	// the lock API (checks.go, locks.go).
	policies      policies
	revisions     *revisionClock
	revisionReads atomic.Int64
	lockWakeups   atomic.Int64
	// expiryWatchErrors counts what may have cost WatchLockExpiries a
	// report (lockexpiry.go).
	expiryWatchErrors atomic.Int64
	// maxSessions and maxLocks are Config's MaxSessionsPerIdentity and
	// MaxLocksPerSession, negative for no limit (locks.go).
	maxSessions int64
	maxLocks    int64
	// limited makes the creations under one limited index take turns
	// (indexturns.go).
	limited *indexTurns
}

// Defaults of the lock API's limits (Config).
const (
	// DefaultMaxSessionsPerIdentity is the default bound on an
	// identity's live sessions: at the longest TTL, an hour, it keeps a
	// client that creates sessions in a loop to a thousand etcd leases.
	DefaultMaxSessionsPerIdentity = 1000
	// DefaultMaxLocksPerSession is the default bound on the locks a
	// session holds plus the queues it waits in. Revoking a session
	// deletes all its keys in one etcd revision; the bound keeps that
	// revision small (two keys a lock, plus three).
	DefaultMaxLocksPerSession = 64
)

// New returns a Store that uses client, which the caller keeps and closes.
func New(client *clientv3.Client, cfg Config) (*Store, error) {
	if client == nil {
		return nil, errors.New("tokenstore: nil etcd client")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "fencegate/"
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 2 * time.Second
	}
	if cfg.RequestTimeout < 0 {
		return nil, fmt.Errorf("tokenstore: negative request timeout %v", cfg.RequestTimeout)
	}
	if cfg.CacheBytes == 0 {
		cfg.CacheBytes = defaultCacheBytes
	}
	if cfg.CacheBytes < 0 {
		return nil, fmt.Errorf("tokenstore: negative cache size %d", cfg.CacheBytes)
	}
	if cfg.MaxSessionsPerIdentity == 0 {
		cfg.MaxSessionsPerIdentity = DefaultMaxSessionsPerIdentity
	}
	if cfg.MaxLocksPerSession == 0 {
		cfg.MaxLocksPerSession = DefaultMaxLocksPerSession
	}
	ps, err := newPolicies(cfg.Policies)
	if err != nil {
		return nil, fmt.Errorf("tokenstore: %w", err)
	}
	var raises *groupCommitter
	if !cfg.DisableGroupCommit {
		raises = newGroupCommitter(client, cfg.RequestTimeout, cfg.ObserveFenceBatch)
	}
	return &Store{
		raises:      raises,
		client:      client,
		prefix:      cfg.Prefix,
		timeout:     cfg.RequestTimeout,
		cache:       newHWMCache(cfg.CacheBytes),
		confirms:    newConfirmer(client, cfg.RequestTimeout),
		policies:    ps,
		revisions:   newRevisionClock(),
		maxSessions: int64(cfg.MaxSessionsPerIdentity),
		maxLocks:    int64(cfg.MaxLocksPerSession),
		limited:     newIndexTurns(),
	}, nil
}

func (s *Store) hwmKey(r api.Resource) string { return s.prefix + "hwm/" + string(r) }

// FenceCheck accepts token for resource if token >= the resource's
// high-water mark, raising the mark to token, in one etcd transaction:
//
//	If(Value(key) > token) Then(Get(key)) Else(Put(key, token))
//
// A missing key fails every Value compare, so the first token for a
// resource falls into Else and creates the key. Equal tokens are accepted:
// one lock holder may write many times; when this Store last saw the mark
// at exactly token, a read-only transaction confirms it instead, without a
// Raft write (see confirmMark). Checks that write and come in together
// share an etcd transaction, each nested whole with its own compare and
// answer (group commit, see groupCommitter), unless
// Config.DisableGroupCommit is set.
//
// The resource's Policy (the one with the longest matching prefix) may add
// a token check: CheckPlausible first refuses a token above etcd's current
// revision, with no etcd request unless the token is above every revision
// this Store has seen; CheckHeld runs in the same single transaction (see
// fenceCheckHeld). Neither adds a round trip to an accepted write in
// steady state.
//
// It returns nil when accepted, a *api.StaleTokenError (errors.Is
// api.ErrStaleToken) when refused, an error wrapping api.ErrLockNotHeld or
// api.ErrImplausibleToken when a token check refused, and an error wrapping
// api.ErrUnavailable when the outcome is unknown: etcd unreachable, timed
// out, or the request cancelled. In that last case the mark may or may not
// have been raised, and the caller must forward nothing. When etcd is out
// of space (its NOSPACE alarm), the error wraps api.ErrNoSpace too (see
// noSpace).
func (s *Store) FenceCheck(ctx context.Context, resource api.Resource, token api.Token) error {
	return s.fenceCheckTimed(ctx, resource, token, true)
}

// FenceCheckRenew decides token as FenceCheck does, with the same errors,
// but an accepted token always writes the mark, even when it equals the
// mark: never a read-only confirmation, so the mark gets a new mod
// revision. Deletes use it. A mark evictor (package retention) deletes a
// mark only if its mod revision is still the one it read when it saw the
// object record the mark; a delete of that object by the mark's own
// holder must move the mod revision, or the eviction could land after
// the delete and take the object's tombstone with it, letting a stale
// writer create the object again.
func (s *Store) FenceCheckRenew(ctx context.Context, resource api.Resource, token api.Token) error {
	return s.fenceCheckTimed(ctx, resource, token, false)
}

// fenceCheckTimed is FenceCheck (confirm: a read-only confirmation may
// accept an equal token) and FenceCheckRenew (it may not), under the
// request timeout and with NOSPACE answered.
func (s *Store) fenceCheckTimed(ctx context.Context, resource api.Resource, token api.Token, confirm bool) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := s.fenceCheck(ctx, resource, token, confirm)
	if err != nil && errors.Is(err, rpctypes.ErrNoSpace) {
		return s.noSpace(ctx, resource, token, err)
	}
	return err
}

// fenceCheck is FenceCheck, with etcd's errors as they come; confirm says
// whether confirmMark may accept without a write.
func (s *Store) fenceCheck(ctx context.Context, resource api.Resource, token api.Token, confirm bool) error {
	switch p := s.policies.match(resource); p.Check {
	case CheckPlausible:
		if err := s.checkPlausible(ctx, resource, token); err != nil {
			return err
		}
	case CheckHeld:
		return s.fenceCheckHeld(ctx, resource, token, p.Lock)
	}
	key, value := s.hwmKey(resource), encodeToken(token)
	if confirm && s.confirmMark(ctx, resource, key, value, token) {
		return nil
	}
	resp, err := s.commitFence(ctx, key, fenceOp(key, value))
	if err != nil {
		return fmt.Errorf("fence check %s: %w: %w", resource, api.ErrUnavailable, err)
	}
	return s.fenceResult(resource, token, resp)
}

// fenceOp is the fence check's transaction on the mark at key, as an op
// that a transaction can carry:
//
//	Txn(If(Value(key) > value) Then(Get(key)) Else(Put(key, value)))
func fenceOp(key, value string) clientv3.Op {
	return clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), ">", value)},
		[]clientv3.Op{clientv3.OpGet(key)},
		[]clientv3.Op{clientv3.OpPut(key, value)},
	)
}

// commitFence runs op, a fence check's transaction that writes no key but
// the mark at key (fenceOp, or heldTxn nesting it), and returns its
// response, with etcd's revision observed. Under group commit it may
// share an etcd transaction with other checks (groupcommit.go says why
// its answer is still its own); otherwise op's compares and branches are
// sent as a transaction of their own. An error means the outcome is
// unknown.
func (s *Store) commitFence(ctx context.Context, key string, op clientv3.Op) (*clientv3.TxnResponse, error) {
	if s.raises != nil {
		resp, revision, err := s.raises.commit(ctx, key, op)
		if err != nil {
			return nil, err
		}
		s.revisions.observe(revision)
		return (*clientv3.TxnResponse)(resp), nil
	}
	cmps, then, els := op.Txn()
	resp, err := s.client.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
	if err != nil {
		return nil, err
	}
	s.revisions.observe(resp.Header.Revision)
	return resp, nil
}

// noSpace answers a fence check that etcd refused because it is out of
// space: its database reached its quota (--quota-backend-bytes), it raised
// the NOSPACE alarm, and it refuses every transaction that writes, until
// an operator compacts, defragments and disarms the alarm. A stale token
// needs no write to be refused, so the mark is read (reads still work) and
// a token below it is refused as usual: stale writers get their final
// answer, not a 503 to retry for as long as the alarm lasts. Any other
// token gets err, wrapping api.ErrNoSpace as well as api.ErrUnavailable,
// whose message says what is wrong.
func (s *Store) noSpace(ctx context.Context, resource api.Resource, token api.Token, err error) error {
	if hwm, rerr := s.HighWaterMark(ctx, resource); rerr == nil && hwm > token {
		return &api.StaleTokenError{Resource: resource, Token: token, HighWaterMark: hwm}
	}
	return fmt.Errorf("%w (%w: its database reached its quota and etcd refuses writes until an operator compacts, defragments and disarms the NOSPACE alarm)", err, api.ErrNoSpace)
}

// confirmMark accepts token without a write when this Store last saw
// resource's mark at exactly token (one lock holder writing again, the
// common case) and a read of the mark in etcd finds it still is. etcd
// serves the read-only transaction that reads it as a linearizable read:
// no Raft log entry and no fsync, about half the leader's work of the
// write transaction, and the confirmer (confirm.go) reads the marks of
// concurrent confirmations in one transaction. Accepting then is what the
// write transaction would do (token >= mark, and raising the mark to token
// changes nothing), at a point in time after the call began. It reports
// false, having decided nothing, when the cache does not say so, the mark
// moved, or etcd failed; FenceCheck then runs the write transaction, which
// decides (and reports any failure).
func (s *Store) confirmMark(ctx context.Context, resource api.Resource, key, value string, token api.Token) bool {
	if hwm, ok := s.cache.get(resource); !ok || hwm != token {
		return false
	}
	equal, revision := s.confirms.confirm(ctx, key, value)
	if !equal {
		return false
	}
	s.revisions.observe(revision)
	return true
}

// fenceResult reads the answer of the transaction
// If(Value(hwm) > token) Then(Get(hwm)) Else(Put(hwm, token)).
func (s *Store) fenceResult(resource api.Resource, token api.Token, resp *clientv3.TxnResponse) error {
	if !resp.Succeeded {
		s.cache.raise(resource, token)
		return nil
	}
	return s.staleResult(resource, token, resp)
}

// staleResult reads the answer of a fence check's transaction whose
// compare Value(hwm) > token succeeded, and whose first response is
// Get(hwm): the refusal, with the mark it found.
func (s *Store) staleResult(resource api.Resource, token api.Token, resp *clientv3.TxnResponse) error {
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) != 1 {
		return fmt.Errorf("fence check %s: compare succeeded but key is gone: %w", resource, api.ErrUnavailable)
	}
	hwm, err := decodeToken(kvs[0].Value)
	if err != nil {
		return fmt.Errorf("fence check %s: %w", resource, err)
	}
	s.cache.raise(resource, hwm)
	return &api.StaleTokenError{Resource: resource, Token: token, HighWaterMark: hwm}
}

// CheckNotStale decides token for resource as FenceCheck would, without
// raising the mark: it refuses a token below the mark (a
// *api.StaleTokenError), and accepts any other, creating no mark where
// there is none. It is FenceCheck's transaction without its Else, one
// read-only etcd transaction:
//
//	If(Value(hwm) > token) Then(Get(hwm))
//
// which etcd serves as a linearizable read (no Raft log entry, no new
// revision): the mark it compares with is at least every mark raised
// before the call began. The resource's Policy applies as in FenceCheck:
// CheckPlausible first, and under CheckHeld the compare nests in heldTxn's
// transaction, which then writes nothing either.
//
// A caller uses it where an accepted token changes nothing that a later
// writer could be ordered after (a delete of an object that is not there):
// a mark raised for it would only take etcd space, for ever. Accepting
// without raising gives up what the raise would have kept: a writer with a
// smaller token, at or above the mark, is still accepted afterwards.
//
// Errors are FenceCheck's; etcd's NOSPACE alarm does not refuse it, since
// it writes nothing.
func (s *Store) CheckNotStale(ctx context.Context, resource api.Resource, token api.Token) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	key, value := s.hwmKey(resource), encodeToken(token)
	stale := clientv3.Compare(clientv3.Value(key), ">", value)
	var resp *clientv3.TxnResponse
	switch p := s.policies.match(resource); p.Check {
	case CheckHeld:
		check := clientv3.OpTxn([]clientv3.Cmp{stale}, []clientv3.Op{clientv3.OpGet(key)}, nil)
		cmps, then, els := s.heldTxn(p.Lock, token, check)
		held, err := s.client.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
		if err != nil {
			return fmt.Errorf("fence check %s: %w: %w", resource, api.ErrUnavailable, err)
		}
		s.revisions.observe(held.Header.Revision)
		admitted, err := heldResult(resource, p.Lock, token, held.Succeeded, held.Responses)
		if err != nil {
			return fmt.Errorf("fence check: %w", err)
		}
		resp = (*clientv3.TxnResponse)(admitted.GetResponseTxn())
	case CheckPlausible:
		if err := s.checkPlausible(ctx, resource, token); err != nil {
			return err
		}
		fallthrough
	default:
		var err error
		resp, err = s.client.Txn(ctx).If(stale).Then(clientv3.OpGet(key)).Commit()
		if err != nil {
			return fmt.Errorf("fence check %s: %w: %w", resource, api.ErrUnavailable, err)
		}
		s.revisions.observe(resp.Header.Revision)
	}
	if !resp.Succeeded {
		return nil // not stale; the cache learns nothing: the mark may be absent
	}
	return s.staleResult(resource, token, resp)
}

// HighWaterMark reads resource's high-water mark with a linearizable read:
// the answer is at least every mark raised before the call began. Zero
// means no token was ever accepted for resource.
func (s *Store) HighWaterMark(ctx context.Context, resource api.Resource) (api.Token, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.client.Get(ctx, s.hwmKey(resource))
	if err != nil {
		return 0, fmt.Errorf("read high-water mark %s: %w: %w", resource, api.ErrUnavailable, err)
	}
	s.revisions.observe(resp.Header.Revision)
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	hwm, err := decodeToken(resp.Kvs[0].Value)
	if err != nil {
		return 0, fmt.Errorf("read high-water mark %s: %w", resource, err)
	}
	s.cache.raise(resource, hwm)
	return hwm, nil
}

// CachedHighWaterMark returns the largest high-water mark this Store has
// learned for resource from etcd, without a round trip. It is a lower bound
// of the true mark: use it only to refuse tokens below it, never to accept.
func (s *Store) CachedHighWaterMark(resource api.Resource) (api.Token, bool) {
	return s.cache.get(resource)
}

// Ping checks that etcd can decide fence checks. It lists etcd's alarms,
// a request that goes through Raft and so needs a leader and a quorum,
// and fails while any alarm is raised: under NOSPACE etcd refuses every
// write, and under CORRUPT a member's data is not to be trusted. The error
// wraps api.ErrUnavailable, and api.ErrNoSpace for NOSPACE.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.client.AlarmList(ctx)
	if err != nil {
		return fmt.Errorf("etcd: %w: %w", api.ErrUnavailable, err)
	}
	s.revisions.observe(resp.Header.Revision)
	return alarmError(resp.Alarms)
}

// alarmError is nil when no alarm is raised, and otherwise names each
// raised alarm and the members that raised it.
func alarmError(alarms []*etcdserverpb.AlarmMember) error {
	if len(alarms) == 0 {
		return nil
	}
	members := make(map[etcdserverpb.AlarmType][]string)
	var types []etcdserverpb.AlarmType
	for _, a := range alarms {
		if _, ok := members[a.Alarm]; !ok {
			types = append(types, a.Alarm)
		}
		members[a.Alarm] = append(members[a.Alarm], fmt.Sprintf("%x", a.MemberID))
	}
	slices.Sort(types)
	var parts []string
	noSpace := false
	for _, t := range types {
		parts = append(parts, fmt.Sprintf("%s alarm raised (member %s)", t, strings.Join(members[t], ", ")))
		noSpace = noSpace || t == etcdserverpb.AlarmType_NOSPACE
	}
	msg := strings.Join(parts, "; ")
	if noSpace {
		return fmt.Errorf("%s: %w: %w, and refuses writes until an operator compacts, defragments and disarms the alarm", msg, api.ErrUnavailable, api.ErrNoSpace)
	}
	return fmt.Errorf("%s: %w", msg, api.ErrUnavailable)
}

// Space is how full etcd's database is, as one member reports it.
type Space struct {
	// Size is the database file's size in bytes, what etcd compares with
	// its quota.
	Size int64
	// InUse is the part of Size that holds data; defragmenting gives the
	// rest back.
	InUse int64
	// Quota is the size at which etcd raises its NOSPACE alarm
	// (--quota-backend-bytes; etcd reports its default when it is unset).
	Quota int64
}

// Space reads the size of etcd's database and its quota from the status
// of the member that the client's connection reaches, on the connection
// the client already has (etcd's Maintenance.Status would dial a new one
// for every call). Members hold the same data, so their sizes differ only
// by what compaction and defragmentation left on each.
func (s *Store) Space(ctx context.Context) (Space, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := etcdserverpb.NewMaintenanceClient(s.client.ActiveConnection()).Status(ctx, &etcdserverpb.StatusRequest{})
	if err != nil {
		return Space{}, fmt.Errorf("etcd status: %w: %w", api.ErrUnavailable, rpctypes.Error(err))
	}
	return Space{Size: resp.DbSize, InUse: resp.DbSizeInUse, Quota: resp.DbSizeQuota}, nil
}
