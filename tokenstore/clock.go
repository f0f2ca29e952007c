package tokenstore

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
)

// etcd keeps revisions, not times. RecordRevision and RevisionAges keep
// what an age needs in etcd itself, measured by etcd's own clock: a
// revision, and a lease granted after it was read, whose countdown tells
// how long ago that was. They survive the restart of any gateway.

func (s *Store) clockPrefix() string { return s.prefix + "clock/" }

// RecordRevision notes etcd's current revision r in etcd, to be read back
// by RevisionAges with a lower bound of its age, for ttl (rounded up to
// seconds; a longer TTL if etcd's minimum is longer): it reads r, then
// grants a lease of ttl, then writes the key <prefix>clock/<r> bound to
// it. The lease's countdown starts after r was read, so the time it has
// counted is at most the time since r was reached. It returns r.
func (s *Store) RecordRevision(ctx context.Context, ttl time.Duration) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	read, err := s.client.Get(ctx, s.clockPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("record revision: %w: %w", api.ErrUnavailable, err)
	}
	r := read.Header.Revision
	lease, err := s.client.Grant(ctx, int64(math.Ceil(ttl.Seconds())))
	if err != nil {
		return 0, fmt.Errorf("record revision: %w: %w", api.ErrUnavailable, err)
	}
	if _, err := s.client.Put(ctx, s.clockPrefix()+encodeRevision(r), "", clientv3.WithLease(lease.ID)); err != nil {
		return 0, fmt.Errorf("record revision: %w: %w", api.ErrUnavailable, err)
	}
	return r, nil
}

// RevisionAges reads the revisions that RecordRevision noted and whose
// leases have not expired, each with a lower bound of its age, in
// revision order: the lease's granted TTL less what remains of it, less
// one second, since etcd reports what remains in whole seconds, rounded
// down. A lease's countdown only ever runs late, never early: a new etcd
// leader restarts each lease's countdown (in full, or from its last
// checkpoint), which makes ages smaller, never larger. It reads the
// leases one at a time, so its cost grows with the revisions recorded:
// callers record one per a fraction of the longest age they need.
func (s *Store) RevisionAges(ctx context.Context) ([]api.RevisionAge, error) {
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	resp, err := s.client.Get(rctx, s.clockPrefix(), clientv3.WithPrefix())
	cancel()
	if err != nil {
		return nil, fmt.Errorf("read revision ages: %w: %w", api.ErrUnavailable, err)
	}
	var ages []api.RevisionAge
	for _, kv := range resp.Kvs {
		r, err := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), s.clockPrefix()), 10, 64)
		if err != nil || kv.Lease == 0 {
			continue // not RecordRevision's
		}
		lctx, cancel := context.WithTimeout(ctx, s.timeout) // each read its own: there may be hundreds
		ttl, err := s.client.TimeToLive(lctx, clientv3.LeaseID(kv.Lease))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("read revision ages: %w: %w", api.ErrUnavailable, err)
		}
		if ttl.TTL < 0 {
			continue // expired since the read
		}
		age := time.Duration(ttl.GrantedTTL-ttl.TTL-1) * time.Second
		ages = append(ages, api.RevisionAge{Revision: r, Age: max(age, 0)})
	}
	return ages, nil
}

// encodeRevision writes a revision as 20 zero-padded digits, so that keys
// sort in revision order.
func encodeRevision(r int64) string { return fmt.Sprintf("%020d", r) }
