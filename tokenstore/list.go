package tokenstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
)

// Listings for the console: lock queues and in-flight markers, read-only,
// one linearizable range read of at most a bounded number of keys per
// page. (High-water marks are listed by Marks, marks.go.)

// maxQueueKeysRead bounds the queue keys that one page of Locks reads: a
// page of queues that hold more keys than this together ends early.
const maxQueueKeysRead = 1000

// Locks reads up to limit lock queues whose names start with prefix and
// sort after after (an empty after starts at the first): for each, the
// holder's token (the oldest place's create revision, the token Acquire
// granted it), the queue's length, and the waiters' tokens in queue
// order. It is one range read of the queue keys, keys only, of at most
// maxQueueKeysRead keys. When that read ends inside a queue, the page
// ends before that queue (More), unless it is the page's only queue:
// then it is listed with the waiters read and its length counted by a
// second read.
func (s *Store) Locks(ctx context.Context, prefix, after string, limit int) (api.LockPage, error) {
	if limit <= 0 {
		return api.LockPage{}, errors.New("read locks: limit must be positive")
	}
	if after != "" && !strings.HasPrefix(after, prefix) {
		return api.LockPage{}, fmt.Errorf("read locks: %q does not start with %q", after, prefix)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	queues := s.prefix + "locks/"
	from := queues + prefix
	if after != "" {
		// Names never hold '/', and '/'+1 is '0': the first key after
		// every key of after's queue.
		from = queues + after + "0"
	}
	resp, err := s.client.Get(ctx, from,
		clientv3.WithRange(clientv3.GetPrefixRangeEnd(queues+prefix)),
		clientv3.WithKeysOnly(), clientv3.WithLimit(maxQueueKeysRead))
	if err != nil {
		return api.LockPage{}, fmt.Errorf("read locks %s: %w: %w", prefix, api.ErrUnavailable, err)
	}
	s.revisions.observe(resp.Header.Revision)
	page := api.LockPage{More: resp.More}
	var places [][]int64 // create revisions of each queue's places, in key order
	full := false        // the page ended at a new queue, after limit whole ones
	for _, kv := range resp.Kvs {
		name, _, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), queues), "/")
		if !ok {
			continue
		}
		if n := len(page.Locks); n == 0 || page.Locks[n-1].Name != name {
			if n == limit {
				page.More, full = true, true
				break
			}
			page.Locks = append(page.Locks, api.LockQueue{Name: name})
			places = append(places, nil)
		}
		places[len(places)-1] = append(places[len(places)-1], kv.CreateRevision)
	}
	// Unless the page ended at a new queue, a read that stopped at its
	// key limit may have ended inside the last queue.
	partial := resp.More && !full && len(page.Locks) > 0
	if partial && len(page.Locks) > 1 {
		page.Locks, places = page.Locks[:len(page.Locks)-1], places[:len(places)-1]
	}
	for i := range page.Locks {
		revs := places[i]
		slices.Sort(revs)
		q := &page.Locks[i]
		q.Holder = api.Token(revs[0])
		q.QueueLength = int64(len(revs))
		for _, rev := range revs[1:] {
			q.Waiters = append(q.Waiters, api.Token(rev))
		}
	}
	if partial && len(page.Locks) == 1 {
		count, err := s.client.Get(ctx, s.lockQueue(page.Locks[0].Name), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return api.LockPage{}, fmt.Errorf("read locks %s: %w: %w", prefix, api.ErrUnavailable, err)
		}
		page.Locks[0].QueueLength = count.Count
	}
	return page, nil
}

// InFlight reads up to limit in-flight markers of partner requests whose
// resources start with prefix and sort after after: one linearizable
// range read of at most limit keys.
func (s *Store) InFlight(ctx context.Context, prefix, after api.Resource, limit int) (api.InFlightPage, error) {
	if limit <= 0 {
		return api.InFlightPage{}, errors.New("read in-flight markers: limit must be positive")
	}
	if after != "" && !strings.HasPrefix(string(after), string(prefix)) {
		return api.InFlightPage{}, fmt.Errorf("read in-flight markers: %q does not start with %q", after, prefix)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	keyPrefix := s.markerKey(prefix)
	from := keyPrefix
	if after != "" {
		from = s.markerKey(after) + "\x00"
	}
	resp, err := s.client.Get(ctx, from,
		clientv3.WithRange(clientv3.GetPrefixRangeEnd(keyPrefix)),
		clientv3.WithLimit(int64(limit)))
	if err != nil {
		return api.InFlightPage{}, fmt.Errorf("read in-flight markers %s: %w: %w", prefix, api.ErrUnavailable, err)
	}
	s.revisions.observe(resp.Header.Revision)
	page := api.InFlightPage{Markers: make([]api.InFlightMarker, 0, len(resp.Kvs)), More: resp.More}
	markers := s.prefix + "inflight/"
	for _, kv := range resp.Kvs {
		// The marker's value is the admission's nonce and token (see
		// buildAdmission).
		_, encoded, _ := strings.Cut(string(kv.Value), " ")
		token, err := decodeToken([]byte(encoded))
		if err != nil {
			return api.InFlightPage{}, fmt.Errorf("read in-flight markers: %s: %w", kv.Key, err)
		}
		page.Markers = append(page.Markers, api.InFlightMarker{
			Resource: api.Resource(strings.TrimPrefix(string(kv.Key), markers)),
			Token:    token,
			Revision: kv.CreateRevision,
		})
	}
	return page, nil
}
