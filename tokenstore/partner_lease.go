package tokenstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// leasePool shares etcd leases between keys that must live at least a given
// time and may live a little longer, so that binding a key to a lease
// rarely costs a grant. Leases are never kept alive: each expires on its
// own TTL, and its keys with it, unless they were deleted or moved to
// another lease before.
type leasePool struct {
	client *clientv3.Client
	// timeout bounds each grant, and the wait for another request's
	// grant: with etcd unreachable a grant would otherwise block until
	// the caller's context ends, which may be never.
	timeout time.Duration
	now     func() time.Time

	mu     sync.Mutex
	leases map[int64]pooledLease // by TTL in seconds
	// grant allows one grant at a time; a waiter gives up when its
	// context ends, so a slow etcd does not queue requests for ever.
	grant chan struct{}
}

// pooledLease is a granted lease and when it expires at the earliest.
type pooledLease struct {
	id      clientv3.LeaseID
	expires time.Time
}

func newLeasePool(client *clientv3.Client, timeout time.Duration) *leasePool {
	return &leasePool{client: client, timeout: timeout, now: time.Now, leases: make(map[int64]pooledLease), grant: make(chan struct{}, 1)}
}

// lease returns a lease that expires no sooner than need from now, and no
// later than need + reuse + 1 s from now. Waiting for the grant and the
// grant itself take at most the pool's timeout.
func (p *leasePool) lease(ctx context.Context, need, reuse time.Duration) (clientv3.LeaseID, error) {
	ttl := ttlSeconds(need + reuse)
	if id, ok := p.reusable(ttl, need); ok {
		return id, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	select {
	case p.grant <- struct{}{}:
	case <-ctx.Done():
		return 0, fmt.Errorf("wait for a lease grant: %w", ctx.Err())
	}
	defer func() { <-p.grant }()
	if id, ok := p.reusable(ttl, need); ok { // granted while we waited
		return id, nil
	}
	// The TTL starts when etcd's leader applies the grant, after this
	// instant: expires is a lower bound.
	start := p.now()
	resp, err := p.client.Grant(ctx, ttl)
	if err != nil {
		return 0, fmt.Errorf("grant lease of %ds: %w", ttl, err)
	}
	p.mu.Lock()
	p.leases[ttl] = pooledLease{id: resp.ID, expires: start.Add(time.Duration(resp.TTL) * time.Second)}
	p.mu.Unlock()
	return resp.ID, nil
}

// reusable returns the pooled lease of ttl if it lives at least need more.
func (p *leasePool) reusable(ttl int64, need time.Duration) (clientv3.LeaseID, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.leases[ttl]
	if !ok || l.expires.Sub(p.now()) < need {
		return 0, false
	}
	return l.id, true
}

// forget drops a lease that etcd no longer knows.
func (p *leasePool) forget(id clientv3.LeaseID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ttl, l := range p.leases {
		if l.id == id {
			delete(p.leases, ttl)
		}
	}
}

// ttlSeconds rounds d up to whole seconds, as etcd counts TTLs.
func ttlSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
