package tokenstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
)

// DefaultUploadTTL is how long an upload binding lives when nothing
// unbinds it: a day, past which S3 users commonly let a lifecycle rule
// abort incomplete uploads too.
const DefaultUploadTTL = 24 * time.Hour

// Uploads binds the gateway's multipart uploads to the resource and token
// that created them, under <prefix>uploads/<upload id>, so that any gateway
// can fence an upload's parts and its completion with the creator's token.
//
// A binding is bound to an etcd lease of the upload TTL, shared by the
// bindings made within a few minutes of each other (leasePool): an upload
// abandoned without a completion or an abort loses its binding on its
// own, and nothing accumulates in etcd. Its parts then cannot be sent or
// completed through the gateway (an unknown upload); the store's own
// lifecycle rules free them.
type Uploads struct {
	store  *Store
	leases *leasePool
	ttl    time.Duration
}

// NewUploads returns the upload bindings of store, each living ttl (zero:
// DefaultUploadTTL) unless unbound before.
func NewUploads(store *Store, ttl time.Duration) (*Uploads, error) {
	if store == nil {
		return nil, errors.New("tokenstore: nil store")
	}
	if ttl == 0 {
		ttl = DefaultUploadTTL
	}
	if ttl < time.Second {
		return nil, fmt.Errorf("tokenstore: upload TTL %v is under a second", ttl)
	}
	return &Uploads{store: store, leases: newLeasePool(store.client, store.timeout), ttl: ttl}, nil
}

func (u *Uploads) key(uploadID string) string { return u.store.prefix + "uploads/" + uploadID }

// leaseReuse is how much longer than the TTL a binding may live, so that
// bindings made close together share a lease: a tenth of the TTL, at most
// ten minutes.
func (u *Uploads) leaseReuse() time.Duration { return min(u.ttl/10, 10*time.Minute) }

// uploadRecord is a binding's value.
type uploadRecord struct {
	Resource api.Resource `json:"resource"`
	Token    api.Token    `json:"token"`
}

// BindUpload records b, for the TTL, in one transaction that creates the
// key only if it is absent: an upload id is bound once, and a second bind
// of it is an error that changes nothing. An error wrapping
// api.ErrUnavailable means etcd could not be reached; the binding may or
// may not exist then, and the caller aborts the upload.
func (u *Uploads) BindUpload(ctx context.Context, b api.UploadBinding) error {
	value, err := json.Marshal(uploadRecord{Resource: b.Resource, Token: b.Token})
	if err != nil {
		return fmt.Errorf("bind upload: %w", err)
	}
	for attempt := 1; ; attempt++ {
		lease, err := u.leases.lease(ctx, u.ttl, u.leaseReuse())
		if err != nil {
			return fmt.Errorf("bind upload %s: %w: %w", b.Resource, api.ErrUnavailable, err)
		}
		err = u.put(ctx, b.UploadID, string(value), lease)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 1 {
			// The pooled lease is gone (revoked, or etcd restored from
			// an older snapshot): grant another, once.
			u.leases.forget(lease)
			continue
		}
		if err != nil {
			return fmt.Errorf("bind upload %s: %w", b.Resource, err)
		}
		return nil
	}
}

func (u *Uploads) put(ctx context.Context, uploadID, value string, lease clientv3.LeaseID) error {
	ctx, cancel := context.WithTimeout(ctx, u.store.timeout)
	defer cancel()
	key := u.key(uploadID)
	resp, err := u.store.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, value, clientv3.WithLease(lease))).
		Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: %w", api.ErrUnavailable, err)
	}
	u.store.revisions.observe(resp.Header.Revision)
	if !resp.Succeeded {
		return fmt.Errorf("upload id %q is already bound", uploadID)
	}
	return nil
}

// Upload returns the binding of uploadID, read linearizably, if it binds
// an upload of resource. An upload that is not bound, or bound to another
// resource, is api.ErrNotFound: the id names no upload of this object
// that the gateway fences. An error wrapping api.ErrUnavailable means
// etcd could not be reached.
func (u *Uploads) Upload(ctx context.Context, resource api.Resource, uploadID string) (api.UploadBinding, error) {
	ctx, cancel := context.WithTimeout(ctx, u.store.timeout)
	defer cancel()
	resp, err := u.store.client.Get(ctx, u.key(uploadID))
	if err != nil {
		return api.UploadBinding{}, fmt.Errorf("read upload of %s: %w: %w", resource, api.ErrUnavailable, err)
	}
	u.store.revisions.observe(resp.Header.Revision)
	if len(resp.Kvs) == 0 {
		return api.UploadBinding{}, fmt.Errorf("upload of %s: %w: no such upload (completed, aborted, expired, or never created through the gateway)", resource, api.ErrNotFound)
	}
	var rec uploadRecord
	if err := json.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
		return api.UploadBinding{}, fmt.Errorf("read upload of %s: %w", resource, err)
	}
	if rec.Resource != resource {
		return api.UploadBinding{}, fmt.Errorf("upload of %s: %w: no such upload of this object", resource, api.ErrNotFound)
	}
	return api.UploadBinding{UploadID: uploadID, Resource: rec.Resource, Token: rec.Token}, nil
}

// UnbindUpload deletes the binding of uploadID, if there is one: after a
// completion or an abort. An error wrapping api.ErrUnavailable means etcd
// could not be reached; the binding then expires with its lease.
func (u *Uploads) UnbindUpload(ctx context.Context, uploadID string) error {
	ctx, cancel := context.WithTimeout(ctx, u.store.timeout)
	defer cancel()
	if _, err := u.store.client.Delete(ctx, u.key(uploadID)); err != nil {
		return fmt.Errorf("unbind upload: %w: %w", api.ErrUnavailable, err)
	}
	return nil
}
