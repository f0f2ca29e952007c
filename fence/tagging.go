package fence

// Fenced writes of an object's tags alone (S3's PutObjectTagging,
// DeleteObjectTagging). Tags that a write of the object carries ride on
// that write (api.ObjectMetadata.Tags, PutFenced, CreateUpload).

import (
	"context"
	"errors"
	"fmt"

	"fencegate/api"
)

// TagRequest is a fenced write of an object's tags alone, as a front door
// parsed it.
type TagRequest struct {
	// Path is the object, from ObjectPath.
	Path api.ObjectPath
	// Token is the writer's fencing token; zero is api.ErrMissingToken.
	Token api.Token
	// Tags replace the object's tags, as the front door validated them;
	// nil or empty removes them all.
	Tags map[string]string
}

// ObjectTags returns the tags of the object at path (none: an empty map)
// once the identity of ctx may read it. A missing object is
// api.ErrNotFound; a store that keeps no tags (GCS) api.ErrInvalidRequest,
// with nothing sent.
func (e *Engine) ObjectTags(ctx context.Context, path api.ObjectPath) (map[string]string, error) {
	if err := e.access.Authorize(ctx, Read, path.Resource()); err != nil {
		return nil, err
	}
	if e.tags == nil {
		return nil, fmt.Errorf("%w: the store keeps no object tags", api.ErrInvalidRequest)
	}
	return e.tags.Tags(ctx, path)
}

// PutTagsFenced replaces the tags of the object at in.Path, fenced like
// any other write of it: the identity of ctx needs the write grant (the
// object's bytes it reads never reach the caller), and the token must not
// be stale.
//
// S3 writes tags alone (PutObjectTagging) with no condition at all, and a
// tag write changes no ETag, so no conditional request of the store can
// order tag writes: a stale holder's tag write, sent after its fence check
// passed and delayed, would land after a newer holder's write, whatever
// the engine checked before. So the tags are never written alone. The
// object is rewritten whole with the new tags by the protocol of a PUT,
// conditional on the version whose bytes were read:
//
//  1. read the object (GET): its bytes, content type, metadata and ETag;
//  2. Put with the client condition If-Match that ETag: observe,
//     refuse a token below the one the object records, fence check, then
//     the store's conditional PUT of the same bytes, content type and
//     metadata with the new tags, recording this token;
//  3. if the object changed since step 1 (the condition failed at the
//     observation, or the store refused the PUT's condition), start again
//     from a fresh read, up to Config.WriteAttempts rounds; then
//     api.ErrConcurrentModification.
//
// The ordering argument is Put's: a newer holder whose write landed
// between this write's observation and its PUT changed the ETag, so the
// PUT fails, and the fresh observation finds the newer token on the object
// (api.StaleTokenError). The condition of step 2 keeps the rewrite from
// putting back bytes that another write replaced after step 1. The limit
// is the ETag ABA of every S3 write: a newer holder's write that keeps the
// bytes (its own tag write, a copy with new metadata) keeps the ETag,
// and a stale rewrite paused after its fence check still lands over it.
//
// The rewrite keeps the bytes, content type, user metadata, server-side
// encryption (SSE-S3, SSE-KMS with its key) and ETag of the object (its S3 ETag is the MD5 of its bytes; an object uploaded in
// parts gets the ETag of one PUT and loses its parts), and gets a new
// Last-Modified. Its bytes pass through the engine within the bounds of
// a PUT's body (Config.MaxBodyBytes: api.ErrBodyTooLarge). An object
// encrypted with a customer key (SSE-C) is not read without its key, so
// its tags cannot be written: the store's refusal of the read is the
// answer, and nothing changes. A missing
// object is api.ErrNotFound, or an *api.StaleTokenError when the token is
// below the resource's mark (a delete's tombstone).
func (e *Engine) PutTagsFenced(ctx context.Context, in TagRequest) (WriteResult, error) {
	fr, err := e.Admit(ctx, Write, in.Path, in.Token)
	if err != nil {
		return WriteResult{}, err
	}
	if e.tags == nil {
		return WriteResult{}, fmt.Errorf("%w: the store keeps no object tags", api.ErrInvalidRequest)
	}
	for attempt := 1; ; attempt++ {
		res, err := e.retag(ctx, fr, in.Tags)
		changed := errors.Is(err, api.ErrPreconditionFailed) || errors.Is(err, api.ErrConcurrentModification)
		if changed && attempt < e.cfg.WriteAttempts {
			e.monitor.Logger(ctx).Debug("tag write found the object changed; reading it again", "resource", fr.Resource, "attempt", attempt)
			continue
		}
		if changed {
			return WriteResult{}, fmt.Errorf("%w: the object changed during each of %d tag writes", api.ErrConcurrentModification, attempt)
		}
		return res, err
	}
}

// retag is one round of PutTagsFenced: read the object, rewrite it with
// tags if it is still the version read. A missing object is checked
// against the mark first (CheckNotStale): a fenced-out writer learns that
// before anything else.
func (e *Engine) retag(ctx context.Context, fr Request, tags map[string]string) (WriteResult, error) {
	obj, err := e.objects.Get(ctx, api.GetObjectInput{Path: fr.Path})
	if errors.Is(err, api.ErrNotFound) {
		if stale := e.fences.CheckNotStale(ctx, fr.Resource, fr.Token); stale != nil {
			return WriteResult{}, stale
		}
	}
	if err != nil {
		return WriteResult{}, err
	}
	defer obj.Body.Close()
	if !(api.ObjectVersion{Exists: true, ETag: obj.ETag}).Named() {
		return WriteResult{}, fmt.Errorf("%w: the object has no ETag to rewrite it on", api.ErrUpstream)
	}
	body, err := e.ReadBody(obj.Body, obj.Size, nil)
	if err != nil {
		return WriteResult{}, err
	}
	defer body.Release()
	meta := obj.Metadata
	meta.Tags = tags
	fr.cond = WriteCondition{IfMatch: obj.ETag}
	// The rewrite asks for the encryption the store answered for the
	// object, so that it stays encrypted as it was (a KMS key of its
	// own, not the bucket's default). An object of a customer key was
	// not read without the key (the store refuses), so none is here.
	fr.encryption = obj.Encryption
	fr.encryption.Customer = api.CustomerKey{}
	return e.Put(ctx, fr, body, obj.ContentType, meta)
}
