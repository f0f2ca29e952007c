package tokenstore

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
)

// Idempotency budgets (api.IdempotencyBudget): what the completed records
// of an account (a route, an identity) hold in etcd, counted for every
// gateway at once without reading the records.
//
// A record cannot be counted by counting keys: that is a scan of every
// record per admission, and etcd sums no values. Nor by a counter that
// Finish raises: records go when their retention lease expires, and
// nothing runs then to lower it. So each gateway keeps, per account and
// per window of completion time, a usage key of its own:
//
//	<prefix>idem-usage/<account>/<window start>-<length>-<retention>/<writer>
//	    = "<seq> <records> <bytes>", each 20 digits
//
// bound to a lease that expires when every record completed in the window
// has expired: the window's end plus the retention, plus the sharing of
// retention leases and a second. The usage key goes with them, also when
// its gateway is gone (records of another retention have keys of their
// own), so the sum over an account's usage keys is what its
// records hold, or more (a record is counted until its window's records
// all expired). Windows are a 24th of the retention (between a minute and
// an hour), so an account has at most 25 usage keys per gateway and
// retention: reading its usage is one range read of those, whatever the
// number of records.
//
// Each writer (a Partners, random per process) is the only one that
// writes its keys, and knows their totals; Finish puts the new total in
// its own transaction, guarded by the sequence number, so that of two
// Finishes that commit out of order the older total never replaces the
// newer: If(Value(usage) > new) Then() Else(Put(usage, new)) (a missing
// key fails the compare and is created; values of one key differ in
// their sequence number, so none but the new one's own is equal).
//
// An admission with budgets reads each account's usage, at most once a
// second per account and gateway, plus what this gateway completed since:
// when one is used up, it only looks for the key's record (a replay still
// works) and otherwise refuses with api.ErrIdempotencyBudgetExhausted,
// writing nothing. The check is not a transaction with the records: the
// requests in flight, and what other gateways completed in the last
// second, can take an account past its budget, by that much.

// usageRefresh is how long an account's usage read from etcd is used.
const usageRefresh = time.Second

// usageWindow is the length of the windows of completion time for
// records kept for retention.
func usageWindow(retention time.Duration) time.Duration {
	w := (retention / 24).Truncate(time.Second)
	return min(max(w, time.Minute), time.Hour)
}

// usageLedger counts the completed records of accounts: this writer's
// usage keys, and a cache of every writer's sums.
type usageLedger struct {
	client  *clientv3.Client
	prefix  string // <store prefix>idem-usage/
	timeout time.Duration
	writer  string
	now     func() time.Time

	mu     sync.Mutex
	counts map[string]*usageCount  // by usage key: this writer's
	leases map[string]pooledLease  // by window: "<start>-<length>-<retention>"
	cache  map[string]*cachedUsage // by account
	grant  sync.Mutex              // one grant at a time
}

// usageCount is this writer's total in one usage key.
type usageCount struct {
	seq, records, bytes int64
	expires             time.Time // of its lease: then it is forgotten
}

// cachedUsage is an account's usage as read from etcd, and what this
// writer charged it since.
type cachedUsage struct {
	read        time.Time
	etcd, since api.IdempotencyUsage
}

func newUsageLedger(s *Store) *usageLedger {
	return &usageLedger{
		client: s.client, prefix: s.prefix + "idem-usage/", timeout: s.timeout,
		writer: newNonce(), now: time.Now,
		counts: make(map[string]*usageCount), leases: make(map[string]pooledLease), cache: make(map[string]*cachedUsage),
	}
}

// accountPrefix is the key prefix of account's usage keys; the account is
// path-escaped, so that it holds no '/'.
func (l *usageLedger) accountPrefix(account string) string {
	return l.prefix + url.PathEscape(account) + "/"
}

// usage returns what account's completed records hold (see the top of
// this file for how stale it may be).
func (l *usageLedger) usage(ctx context.Context, account string) (api.IdempotencyUsage, error) {
	now := l.now()
	l.mu.Lock()
	c := l.cache[account]
	if c != nil && now.Sub(c.read) < usageRefresh {
		u := api.IdempotencyUsage{Records: c.etcd.Records + c.since.Records, Bytes: c.etcd.Bytes + c.since.Bytes}
		l.mu.Unlock()
		return u, nil
	}
	l.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	resp, err := l.client.Get(rctx, l.accountPrefix(account), clientv3.WithPrefix())
	if err != nil {
		return api.IdempotencyUsage{}, fmt.Errorf("idempotency usage of %s: %w: %w", account, api.ErrUnavailable, err)
	}
	var u api.IdempotencyUsage
	for _, kv := range resp.Kvs {
		_, records, bytes, err := decodeUsage(kv)
		if err != nil {
			return api.IdempotencyUsage{}, fmt.Errorf("idempotency usage of %s: %w", account, err)
		}
		u.Records += records
		u.Bytes += bytes
	}
	l.mu.Lock()
	l.cache[account] = &cachedUsage{read: now, etcd: u}
	l.mu.Unlock()
	return u, nil
}

// encodeUsage is a usage key's value: fixed-width decimals, so that etcd's
// byte-wise Value compare orders values by seq.
func encodeUsage(seq, records, bytes int64) string {
	return fmt.Sprintf("%020d %020d %020d", seq, records, bytes)
}

func decodeUsage(kv *mvccpb.KeyValue) (seq, records, bytes int64, err error) {
	f := strings.Fields(string(kv.Value))
	if len(f) != 3 {
		return 0, 0, 0, fmt.Errorf("usage key %s: malformed value", kv.Key)
	}
	var n [3]int64
	for i := range f {
		if n[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return 0, 0, 0, fmt.Errorf("usage key %s: %w", kv.Key, err)
		}
	}
	return n[0], n[1], n[2], nil
}

// charge counts a record of size bytes, kept for retention, in each of
// budgets' accounts, and returns the operations that put the new totals
// (for Finish's transaction) and a function that takes the charge back
// (when that transaction stored nothing).
func (l *usageLedger) charge(ctx context.Context, budgets []api.IdempotencyBudget, retention time.Duration, size int64) ([]clientv3.Op, func(), error) {
	if len(budgets) == 0 {
		return nil, func() {}, nil
	}
	now := l.now()
	window := usageWindow(retention)
	start := now.Truncate(window)
	// Every record completed in the window expires by its end plus the
	// retention and the sharing of retention leases (and a second of
	// rounding): the usage key lives that long, and a second more.
	ttl := ttlSeconds(start.Add(window).Sub(now) + retention + retentionLeaseReuse + 2*time.Second)
	// One lease per window and retention, granted at its first record:
	// it lives until the window's last record has expired.
	windowName := fmt.Sprintf("%d-%d-%d", start.Unix(), int64(window/time.Second), int64(retention/time.Second))
	lease, err := l.windowLease(ctx, windowName, ttl)
	if err != nil {
		return nil, nil, err
	}
	expires := start.Add(window + retention + retentionLeaseReuse + 2*time.Second)
	var ops []clientv3.Op
	var keys []string
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range budgets {
		key := l.accountPrefix(b.Account) + windowName + "/" + l.writer
		c := l.counts[key]
		if c == nil {
			c = &usageCount{expires: expires}
			l.counts[key] = c
		}
		c.seq++
		c.records++
		c.bytes += size
		value := encodeUsage(c.seq, c.records, c.bytes)
		ops = append(ops, clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), ">", value)},
			nil,
			[]clientv3.Op{clientv3.OpPut(key, value, clientv3.WithLease(lease))}))
		keys = append(keys, key)
		if cu := l.cache[b.Account]; cu != nil {
			cu.since.Records++
			cu.since.Bytes += size
		}
	}
	l.forgetExpired(now)
	undo := func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		for i, key := range keys {
			if c := l.counts[key]; c != nil {
				c.records--
				c.bytes -= size
			}
			if cu := l.cache[budgets[i].Account]; cu != nil {
				cu.since.Records--
				cu.since.Bytes -= size
			}
		}
	}
	return ops, undo, nil
}

// forgetExpired drops the counts and leases that have expired. l.mu is
// held.
func (l *usageLedger) forgetExpired(now time.Time) {
	for key, c := range l.counts {
		if now.After(c.expires) {
			delete(l.counts, key)
		}
	}
	for window, lease := range l.leases {
		if now.After(lease.expires) {
			delete(l.leases, window)
		}
	}
}

// windowLease returns the lease of a window's usage keys, granting it
// (ttl seconds) the first time.
func (l *usageLedger) windowLease(ctx context.Context, window string, ttl int64) (clientv3.LeaseID, error) {
	l.mu.Lock()
	lease, ok := l.leases[window]
	l.mu.Unlock()
	if ok {
		return lease.id, nil
	}
	l.grant.Lock()
	defer l.grant.Unlock()
	l.mu.Lock()
	lease, ok = l.leases[window]
	l.mu.Unlock()
	if ok {
		return lease.id, nil
	}
	gctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	start := l.now()
	resp, err := l.client.Grant(gctx, ttl)
	if err != nil {
		return 0, fmt.Errorf("grant usage lease of %ds: %w", ttl, err)
	}
	l.mu.Lock()
	l.leases[window] = pooledLease{id: resp.ID, expires: start.Add(time.Duration(resp.TTL) * time.Second)}
	l.mu.Unlock()
	return resp.ID, nil
}

// forgetAll drops every window's lease, when one of them may be gone
// (revoked, or etcd restored from a backup): the next charge grants.
func (l *usageLedger) forgetAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.leases)
}

// overBudget returns an error wrapping api.ErrIdempotencyBudgetExhausted
// when one of budgets is used up, nil when none is.
func (l *usageLedger) overBudget(ctx context.Context, budgets []api.IdempotencyBudget) error {
	for _, b := range budgets {
		if b.Records <= 0 && b.Bytes <= 0 {
			continue
		}
		u, err := l.usage(ctx, b.Account)
		if err != nil {
			return err
		}
		if (b.Records > 0 && u.Records >= b.Records) || (b.Bytes > 0 && u.Bytes >= b.Bytes) {
			return fmt.Errorf("%w: %s holds %d records and %d bytes, its budget is %s", api.ErrIdempotencyBudgetExhausted, b.Account, u.Records, u.Bytes, budgetString(b))
		}
	}
	return nil
}

func budgetString(b api.IdempotencyBudget) string {
	bound := func(n int64, unit string) string {
		if n <= 0 {
			return "no bound of " + unit
		}
		return strconv.FormatInt(n, 10) + " " + unit
	}
	return bound(b.Records, "records") + " and " + bound(b.Bytes, "bytes")
}

// IdempotencyUsage returns what the completed idempotency records of
// account (an api.IdempotencyBudget's) hold in etcd, as the budget check
// sees it: read at most a second ago, plus what this gateway completed
// since.
func (p *Partners) IdempotencyUsage(ctx context.Context, account string) (api.IdempotencyUsage, error) {
	return p.usage.usage(ctx, account)
}

// lookUpRecord answers a claim while one of its budgets is used up: from
// the key's record when it has one (a replay, or a refusal), else with
// budgetErr. It writes nothing.
func (p *Partners) lookUpRecord(ctx context.Context, req api.PartnerAdmission, budgetErr error) (api.Admission, error) {
	s := p.store
	c := req.Idempotency
	gctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.client.Get(gctx, s.idempotencyKey(c.Scope, c.Key))
	if err != nil {
		return api.Admission{}, fmt.Errorf("admit %s: %w: %w", req.Resource, api.ErrUnavailable, err)
	}
	if len(resp.Kvs) == 0 {
		return api.Admission{}, fmt.Errorf("admit %s: %w", req.Resource, budgetErr)
	}
	out, err := existingRecord(req, resp.Kvs)
	return out.admission, err
}
