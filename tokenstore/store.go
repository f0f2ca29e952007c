package tokenstore

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	// CacheEntries bounds the high-water mark cache. Zero means 1<<20.
	CacheEntries int
}

// Store keeps high-water marks in etcd. It is safe for concurrent use.
type Store struct {
	client  *clientv3.Client
	prefix  string
	timeout time.Duration
	cache   *hwmCache
}

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
	if cfg.CacheEntries == 0 {
		cfg.CacheEntries = 1 << 20
	}
	if cfg.CacheEntries < 0 {
		return nil, fmt.Errorf("tokenstore: negative cache size %d", cfg.CacheEntries)
	}
	return &Store{
		client:  client,
		prefix:  cfg.Prefix,
		timeout: cfg.RequestTimeout,
		cache:   newHWMCache(cfg.CacheEntries),
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
// one lock holder may write many times.
//
// It returns nil when accepted, a *api.StaleTokenError (errors.Is
// api.ErrStaleToken) when refused, and an error wrapping api.ErrUnavailable
// when the outcome is unknown: etcd unreachable, timed out, or the request
// cancelled. In that last case the mark may or may not have been raised,
// and the caller must forward nothing.
func (s *Store) FenceCheck(ctx context.Context, resource api.Resource, token api.Token) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	key, value := s.hwmKey(resource), encodeToken(token)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(key), ">", value)).
		Then(clientv3.OpGet(key)).
		Else(clientv3.OpPut(key, value)).
		Commit()
	if err != nil {
		return fmt.Errorf("fence check %s: %w: %w", resource, api.ErrUnavailable, err)
	}
	if !resp.Succeeded {
		s.cache.raise(resource, token)
		return nil
	}
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

// Ping makes a linearizable read, which needs an etcd leader and a quorum.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err := s.client.Get(ctx, s.prefix+"ping", clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("etcd: %w: %w", api.ErrUnavailable, err)
	}
	return nil
}
