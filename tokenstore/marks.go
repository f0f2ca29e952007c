package tokenstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
)

// Marks reads up to limit high-water marks of resources that start with
// prefix and sort after after (byte-wise, as etcd orders keys; an empty
// after starts at the first), with the revision of each one's last raise:
// one linearizable etcd range read of at most limit keys. The page's
// Revision is etcd's revision when it was read.
//
// It filters nothing by revision. etcd's WithMaxModRev would, but etcd
// then ignores the limit while reading (server/etcdserver/txn/range.go:
// rangeLimit sets it to 0 when the request has a revision filter) and
// reads every key from after to the end of the range before filtering and
// truncating: each page would cost a read of all the marks left. The
// caller filters a page of limit keys instead.
func (s *Store) Marks(ctx context.Context, prefix, after api.Resource, limit int) (api.MarkPage, error) {
	if limit <= 0 {
		return api.MarkPage{}, errors.New("read marks: limit must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	keyPrefix := s.hwmKey(prefix)
	from := keyPrefix
	if after != "" {
		if !strings.HasPrefix(string(after), string(prefix)) {
			return api.MarkPage{}, fmt.Errorf("read marks: %q does not start with %q", after, prefix)
		}
		from = s.hwmKey(after) + "\x00" // the first key after it
	}
	resp, err := s.client.Get(ctx, from,
		clientv3.WithRange(clientv3.GetPrefixRangeEnd(keyPrefix)),
		clientv3.WithLimit(int64(limit)))
	if err != nil {
		return api.MarkPage{}, fmt.Errorf("read marks %s: %w: %w", prefix, api.ErrUnavailable, err)
	}
	s.revisions.observe(resp.Header.Revision)
	page := api.MarkPage{Marks: make([]api.Mark, 0, len(resp.Kvs)), More: resp.More, Revision: resp.Header.Revision}
	hwmPrefix := s.prefix + "hwm/"
	for _, kv := range resp.Kvs {
		token, err := decodeToken(kv.Value)
		if err != nil {
			return api.MarkPage{}, fmt.Errorf("read marks: %s: %w", kv.Key, err)
		}
		resource := api.Resource(strings.TrimPrefix(string(kv.Key), hwmPrefix))
		page.Marks = append(page.Marks, api.Mark{Resource: resource, Token: token, Revision: kv.ModRevision})
	}
	return page, nil
}

// EvictMark deletes mark's key from etcd if the mark was not raised since
// it was read, in one transaction:
//
//	If(ModRevision(key) == mark.Revision) Then(Delete(key))
//
// Every raise writes the key and gives it a new mod revision, and a key
// deleted and created again has a new one too, so a mark raised (or
// re-created) between the read and the delete fails the compare and stays:
// no raise is ever lost, whatever else runs at the same time, including
// other evictors. It reports whether the key was deleted.
//
// Whether evicting a mark is safe is the caller's decision (package
// retention says when). The in-memory cache of marks keeps what it knows:
// it only refuses tokens below a mark that was once accepted, and such a
// token is stale whether or not etcd still holds the mark.
func (s *Store) EvictMark(ctx context.Context, mark api.Mark) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	key := s.hwmKey(mark.Resource)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", mark.Revision)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil {
		return false, fmt.Errorf("evict mark %s: %w: %w", mark.Resource, api.ErrUnavailable, err)
	}
	s.revisions.observe(resp.Header.Revision)
	return resp.Succeeded, nil
}
