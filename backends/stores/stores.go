// Package stores routes object requests to the store that holds each
// bucket (S3 or GCS), so that one gateway fences buckets of several stores
// side by side. A Router implements the gateway's object interfaces by
// dispatching on the path's bucket, and names each bucket's store
// (StoreOf), which the gateway puts first in the resource name
// ("gcs/<bucket>/<key>"). The protocol (observe, fence check, conditional
// write) stays in the gateway, once for every store; a store only has to
// keep its conditional writes' contract.
package stores

import (
	"context"
	"errors"
	"fmt"

	"fencegate/api"
)

// Store is one backend, such as *s3.Client or *gcs.Client: the methods
// the gateway's ObjectWriter and ObjectReader declare, and ConfirmAbsent,
// which the mark evictor (package retention) asks before it takes an
// object for absent.
type Store interface {
	Observe(ctx context.Context, path api.ObjectPath) (api.ObjectVersion, error)
	ConfirmAbsent(ctx context.Context, path api.ObjectPath) (bool, error)
	Put(ctx context.Context, in api.PutObjectInput) (etag string, err error)
	Delete(ctx context.Context, path api.ObjectPath, etag string) error
	Get(ctx context.Context, in api.GetObjectInput) (*api.Object, error)
	Head(ctx context.Context, in api.GetObjectInput) (*api.Object, error)
}

// Named is a store and its name in resource names (api.StoreS3,
// api.StoreGCS).
type Named struct {
	Name  string
	Store Store
}

// Router sends each request to the store of its bucket. It is safe for
// concurrent use; its mapping does not change after New.
type Router struct {
	fallback Named
	buckets  map[string]Named
}

// New returns a Router that sends requests for the buckets in buckets to
// their store and every other bucket to fallback. Every store must have a
// name and a backend.
func New(fallback Named, buckets map[string]Named) (*Router, error) {
	if fallback.Name == "" || fallback.Store == nil {
		return nil, errors.New("stores: the fallback store needs a name and a backend")
	}
	r := &Router{fallback: fallback, buckets: make(map[string]Named, len(buckets))}
	for bucket, s := range buckets {
		if s.Name == "" || s.Store == nil {
			return nil, fmt.Errorf("stores: bucket %q: the store needs a name and a backend", bucket)
		}
		r.buckets[bucket] = s
	}
	return r, nil
}

// of returns the store of bucket.
func (r *Router) of(bucket string) Named {
	if s, ok := r.buckets[bucket]; ok {
		return s
	}
	return r.fallback
}

// StoreOf names the store that holds bucket.
func (r *Router) StoreOf(bucket string) string { return r.of(bucket).Name }

// Observe is the bucket's store's Observe.
func (r *Router) Observe(ctx context.Context, p api.ObjectPath) (api.ObjectVersion, error) {
	return r.of(p.Bucket).Store.Observe(ctx, p)
}

// ObserveWithKey is the bucket's store's ObserveWithKey, for an object
// encrypted with the client's own key (SSE-C); a store without customer
// keys (GCS) refuses it with api.ErrInvalidRequest, asking nothing.
func (r *Router) ObserveWithKey(ctx context.Context, p api.ObjectPath, key api.CustomerKey) (api.ObjectVersion, error) {
	s := r.of(p.Bucket)
	keyed, ok := s.Store.(interface {
		ObserveWithKey(context.Context, api.ObjectPath, api.CustomerKey) (api.ObjectVersion, error)
	})
	if !ok {
		return api.ObjectVersion{}, fmt.Errorf("%w: objects of %s buckets have no customer keys (SSE-C)", api.ErrInvalidRequest, s.Name)
	}
	return keyed.ObserveWithKey(ctx, p, key)
}

// ConfirmAbsent is the bucket's store's ConfirmAbsent.
func (r *Router) ConfirmAbsent(ctx context.Context, p api.ObjectPath) (bool, error) {
	return r.of(p.Bucket).Store.ConfirmAbsent(ctx, p)
}

// Put is the bucket's store's Put.
func (r *Router) Put(ctx context.Context, in api.PutObjectInput) (string, error) {
	return r.of(in.Path.Bucket).Store.Put(ctx, in)
}

// Delete is the bucket's store's Delete.
func (r *Router) Delete(ctx context.Context, p api.ObjectPath, etag string) error {
	return r.of(p.Bucket).Store.Delete(ctx, p, etag)
}

// Get is the bucket's store's Get.
func (r *Router) Get(ctx context.Context, in api.GetObjectInput) (*api.Object, error) {
	return r.of(in.Path.Bucket).Store.Get(ctx, in)
}

// Head is the bucket's store's Head.
func (r *Router) Head(ctx context.Context, in api.GetObjectInput) (*api.Object, error) {
	return r.of(in.Path.Bucket).Store.Head(ctx, in)
}

// Tagged is a Store whose objects have tags (S3's object tagging), such
// as *s3.Client.
type Tagged interface {
	Tags(ctx context.Context, path api.ObjectPath) (map[string]string, error)
}

// Tags is the bucket's store's Tags. A store without tags (GCS) answers
// api.ErrInvalidRequest, and nothing is sent.
func (r *Router) Tags(ctx context.Context, p api.ObjectPath) (map[string]string, error) {
	s := r.of(p.Bucket)
	tagged, ok := s.Store.(Tagged)
	if !ok {
		return nil, fmt.Errorf("%w: objects in %s buckets have no tags", api.ErrInvalidRequest, s.Name)
	}
	return tagged.Tags(ctx, p)
}
