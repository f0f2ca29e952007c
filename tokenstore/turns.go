package tokenstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
)

// HoldTurn takes turn name for holder, or keeps it, and reports whether
// holder has it: a key <prefix>turns/<name> whose value is its holder,
// bound to a lease of ttl (rounded up to seconds) that each call by the
// holder renews. Another holder gets false until the holder stops
// calling for ttl and its lease expires. It gives one gateway at a time a
// background job (the mark evictor) without a session kept alive in the
// background; it is a courtesy, not a lock: a holder that pauses past ttl
// may still be working when the next one starts, so the job must be
// correct with several at once.
func (s *Store) HoldTurn(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	key := s.prefix + "turns/" + name
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return false, fmt.Errorf("turn %s: %w: %w", name, api.ErrUnavailable, err)
	}
	s.revisions.observe(resp.Header.Revision)
	if len(resp.Kvs) == 1 {
		kv := resp.Kvs[0]
		if string(kv.Value) != holder {
			return false, nil
		}
		_, err := s.client.KeepAliveOnce(ctx, clientv3.LeaseID(kv.Lease))
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return false, fmt.Errorf("turn %s: %w: %w", name, api.ErrUnavailable, err)
		}
		// Expired just now: take it again below, if no one did.
	}
	lease, err := s.client.Grant(ctx, int64(math.Ceil(ttl.Seconds())))
	if err != nil {
		return false, fmt.Errorf("turn %s: %w: %w", name, api.ErrUnavailable, err)
	}
	put, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, holder, clientv3.WithLease(lease.ID))).
		Commit()
	if err != nil {
		return false, fmt.Errorf("turn %s: %w: %w", name, api.ErrUnavailable, err)
	}
	if !put.Succeeded {
		// Someone else took it first; the unused lease expires on its own.
		return false, nil
	}
	return true, nil
}
