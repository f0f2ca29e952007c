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

// Uploads binds the gateway's multipart uploads to the resource and token
// that created them, under <prefix>uploads/<upload id>, so that any gateway
// can fence an upload's parts and its completion with the creator's token.
//
// A binding is bound to an etcd lease of the TTL its caller gives, shared
// by the bindings of that TTL made close together (leasePool): an upload
// abandoned without a completion or an abort loses its binding on its
// own, and nothing accumulates in etcd. Its parts then cannot be sent or
// completed through the gateway (an unknown upload); the store's own
// lifecycle rules free them.
type Uploads struct {
	store  *Store
	leases *leasePool
}

// NewUploads returns the upload bindings of store.
func NewUploads(store *Store) (*Uploads, error) {
	if store == nil {
		return nil, errors.New("tokenstore: nil store")
	}
	return &Uploads{store: store, leases: newLeasePool(store.client, store.timeout)}, nil
}

func (u *Uploads) key(uploadID string) string { return u.store.prefix + "uploads/" + uploadID }

// leaseReuse is how much longer than its TTL a binding may live, so that
// bindings made close together share a lease: a tenth of the TTL, at most
// ten minutes.
func leaseReuse(ttl time.Duration) time.Duration { return min(ttl/10, 10*time.Minute) }

// uploadRecord is a binding's value. Secret was added after resource
// and token, which keep their names: a binding without it (recorded by an
// older gateway) reads as one without a capability.
type uploadRecord struct {
	Resource api.Resource `json:"resource"`
	Token    api.Token    `json:"token"`
	// Secret is api.UploadBinding.Secret; empty in a binding recorded
	// before gateways kept one.
	Secret string `json:"secret,omitempty"`
	// State, ETag and Parts are api.UploadBinding's State, ETag and
	// PartsDigest: empty while the upload is in progress (FinishUpload).
	State api.UploadState `json:"state,omitempty"`
	ETag  string          `json:"etag,omitempty"`
	Parts string          `json:"parts,omitempty"`
	// Checksum is api.UploadBinding.ChecksumAlgorithm; empty in a
	// binding recorded before gateways kept it.
	Checksum string `json:"checksum_algorithm,omitempty"`
	// Size and PartSize are api.UploadBinding's: zero in a binding of an
	// upload no multipart ticket created, or recorded before gateways
	// kept them.
	Size     int64 `json:"size,omitempty"`
	PartSize int64 `json:"part_size,omitempty"`
}

// uploadValue returns the value that binds b.
func uploadValue(b api.UploadBinding) (string, error) {
	value, err := json.Marshal(uploadRecord{Resource: b.Resource, Token: b.Token, Secret: b.Secret, State: b.State, ETag: b.ETag, Parts: b.PartsDigest, Checksum: b.ChecksumAlgorithm,
		Size: b.Size, PartSize: b.PartSize})
	return string(value), err
}

// BindUpload records b for ttl (at least a second; it may live up to a
// tenth longer, so that bindings share leases), in one transaction that creates the
// key only if it is absent: an upload id is bound once, and a second bind
// of it is an error that changes nothing. An error wrapping
// api.ErrUnavailable means etcd could not be reached; the binding may or
// may not exist then, and the caller aborts the upload.
func (u *Uploads) BindUpload(ctx context.Context, b api.UploadBinding, ttl time.Duration) error {
	if ttl < time.Second {
		return fmt.Errorf("bind upload: TTL %v is under a second", ttl)
	}
	value, err := uploadValue(b)
	if err != nil {
		return fmt.Errorf("bind upload: %w", err)
	}
	for attempt := 1; ; attempt++ {
		lease, err := u.leases.lease(ctx, ttl, leaseReuse(ttl))
		if err != nil {
			return fmt.Errorf("bind upload %s: %w: %w", b.Resource, api.ErrUnavailable, err)
		}
		err = u.put(ctx, b.UploadID, value, lease, nil)
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

// put writes value under uploadID's key with lease if the key is as
// same says (nil: absent).
func (u *Uploads) put(ctx context.Context, uploadID, value string, lease clientv3.LeaseID, same *clientv3.Cmp) error {
	ctx, cancel := context.WithTimeout(ctx, u.store.timeout)
	defer cancel()
	key := u.key(uploadID)
	cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	if same != nil {
		cmp = *same
	}
	resp, err := u.store.client.Txn(ctx).
		If(cmp).
		Then(clientv3.OpPut(key, value, clientv3.WithLease(lease))).
		Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: %w", api.ErrUnavailable, err)
	}
	u.store.revisions.observe(resp.Header.Revision)
	if !resp.Succeeded && same == nil {
		return fmt.Errorf("upload id %q is already bound", uploadID)
	}
	return nil
}

// FinishUpload replaces the binding b, if it is still bound as b says (as
// UnbindUpload compares it: its revision, or its value with b's State,
// ETag and PartsDigest taken for in progress), with b as given: marked
// completed or aborted, on a lease of ttl, so that a repeated request is
// answered as S3 answers it (the gateway's CompleteUpload says how) until
// ttl passes. A binding that is absent or changed stays as it is, and that
// is no error. An error wrapping api.ErrUnavailable means etcd could not
// be reached; the binding then stays in progress until its own TTL.
func (u *Uploads) FinishUpload(ctx context.Context, b api.UploadBinding, ttl time.Duration) error {
	if ttl < time.Second {
		return fmt.Errorf("finish upload: TTL %v is under a second", ttl)
	}
	key := u.key(b.UploadID)
	same := clientv3.Compare(clientv3.ModRevision(key), "=", b.Revision)
	if b.Revision == 0 {
		bound := b
		bound.State, bound.ETag, bound.PartsDigest = api.UploadInProgress, "", ""
		value, err := uploadValue(bound)
		if err != nil {
			return fmt.Errorf("finish upload: %w", err)
		}
		same = clientv3.Compare(clientv3.Value(key), "=", value)
	}
	value, err := uploadValue(b)
	if err != nil {
		return fmt.Errorf("finish upload: %w", err)
	}
	for attempt := 1; ; attempt++ {
		lease, err := u.leases.lease(ctx, ttl, leaseReuse(ttl))
		if err != nil {
			return fmt.Errorf("finish upload %s: %w: %w", b.Resource, api.ErrUnavailable, err)
		}
		err = u.put(ctx, b.UploadID, value, lease, &same)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 1 {
			u.leases.forget(lease)
			continue
		}
		if err != nil {
			return fmt.Errorf("finish upload %s: %w", b.Resource, err)
		}
		return nil
	}
}

// Upload returns the binding of uploadID, read linearizably, if it binds
// an upload of resource, with its secret and its revision (for
// UnbindUpload). An upload that is not bound, or bound to another
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
	return api.UploadBinding{UploadID: uploadID, Resource: rec.Resource, Token: rec.Token, Secret: rec.Secret, Revision: resp.Kvs[0].ModRevision,
		State: rec.State, ETag: rec.ETag, PartsDigest: rec.Parts, ChecksumAlgorithm: rec.Checksum,
		Size: rec.Size, PartSize: rec.PartSize}, nil
}

// UnbindUpload deletes the binding b, after a completion or an abort, if
// it is still bound as b says, in one transaction that compares and
// deletes: the binding's revision when b was read from the store (Upload),
// otherwise its value. A binding that is absent, binds another resource,
// or changed since it was read stays as it is, and that is no error: the
// caller decided to unbind b, not whatever now holds its id, and a
// request that named one object never unbinds another's upload. An error
// wrapping api.ErrUnavailable means etcd could not be reached; the
// binding then expires with its lease.
func (u *Uploads) UnbindUpload(ctx context.Context, b api.UploadBinding) error {
	key := u.key(b.UploadID)
	same := clientv3.Compare(clientv3.ModRevision(key), "=", b.Revision)
	if b.Revision == 0 {
		value, err := uploadValue(b)
		if err != nil {
			return fmt.Errorf("unbind upload: %w", err)
		}
		same = clientv3.Compare(clientv3.Value(key), "=", value)
	}
	ctx, cancel := context.WithTimeout(ctx, u.store.timeout)
	defer cancel()
	resp, err := u.store.client.Txn(ctx).If(same).Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return fmt.Errorf("unbind upload: %w: %w", api.ErrUnavailable, err)
	}
	u.store.revisions.observe(resp.Header.Revision)
	return nil
}
