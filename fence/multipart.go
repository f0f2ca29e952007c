package fence

// Fenced multipart uploads.
//
// An upload is fenced with the token of the writer that created it: the
// engine binds the upload id to (resource, token) in the token store
// (UploadStore), so that every gateway fences its parts and its
// completion alike. The completion is the write: it runs the protocol of
// a PUT (observe, fence check, then a completion conditional on the
// observed version: If-Match its ETag or If-None-Match: *), and an upload
// whose token has gone stale is refused and aborted. Parts are refused
// at once, and the upload aborted, once the token is below the
// resource's high-water mark: such an upload can never complete, since
// marks only grow. Every request on an upload must be its creator's:
// by the capability id the creator was answered, or by the store's id
// with the upload's token (boundUpload says why and how).
//
// Front doors serve multipart operations with the exported methods
// (CreateUpload, UploadPart, CopyPart, CompleteUpload, AbortUpload,
// ListParts, ListUploads): the S3 API's, and the REST API's PUT of a
// large body in parts.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"fencegate/api"
)

// MultipartStore is a store's multipart uploads. The S3 backend
// implements it.
type MultipartStore interface {
	// CreateUpload starts an upload whose object records in.Token, and
	// returns its id.
	CreateUpload(ctx context.Context, in api.CreateUploadInput) (string, error)
	// UploadPart stores a part, streaming in.Body, and returns its ETag.
	// An unknown upload is api.ErrNotFound.
	UploadPart(ctx context.Context, in api.UploadPartInput) (string, error)
	// CopyPart stores a part copied from another object.
	CopyPart(ctx context.Context, in api.CopyPartInput) (string, error)
	// CompleteUpload completes the upload if in.Replaces is still the
	// object's current version and returns the new ETag; otherwise it
	// fails with api.ErrConcurrentModification and the upload stays. It
	// never sends a completion without a condition.
	CompleteUpload(ctx context.Context, in api.CompleteUploadInput) (string, error)
	// AbortUpload aborts the upload; an unknown upload is
	// api.ErrNotFound.
	AbortUpload(ctx context.Context, path api.ObjectPath, uploadID string) error
	// ListParts lists the upload's parts after marker, at most max
	// (zero: the store's default).
	ListParts(ctx context.Context, path api.ObjectPath, uploadID string, marker, max int32) (api.PartList, error)
	// ListUploads lists a bucket's uploads in progress.
	ListUploads(ctx context.Context, in api.ListUploadsInput) (api.UploadList, error)
}

// UploadStore binds upload ids to the resource and token that created
// them. tokenstore.Uploads implements it.
type UploadStore interface {
	// BindUpload records b until it is unbound or ttl passes. Any
	// error means the binding may not exist.
	BindUpload(ctx context.Context, b api.UploadBinding, ttl time.Duration) error
	// Upload returns the binding of uploadID, read linearizably, with its
	// secret and revision, if it binds an upload of resource; otherwise
	// api.ErrNotFound. Any other error means the store could not answer
	// (api.ErrUnavailable).
	Upload(ctx context.Context, resource api.Resource, uploadID string) (api.UploadBinding, error)
	// UnbindUpload deletes the binding b if it is still bound as b says
	// (its revision, when b was read by Upload; otherwise its value), in
	// the transaction that deletes it; any other binding of its id stays.
	UnbindUpload(ctx context.Context, b api.UploadBinding) error
	// FinishUpload replaces the binding b, if it is still bound as b says
	// (as UnbindUpload compares it), with b as given, marked with its
	// State (completed, aborted as stale), until ttl passes.
	FinishUpload(ctx context.Context, b api.UploadBinding, ttl time.Duration) error
}

// cleanupTimeout bounds an abort and an unbind that run after the
// request that decided them ended (context.WithoutCancel).
const cleanupTimeout = 30 * time.Second

// finishedTTL is how long the binding of an upload the gateway completed,
// or aborted as stale, is kept (at most Config.UploadTTL), so that a
// client's repeated completion, its own abort, or a part sent late is
// answered as S3 answers it (CompleteUpload, AbortUpload, partBinding).
const finishedTTL = 15 * time.Minute

// partsDigest is the digest of a completion's part list, by which a
// repeated completion is told from another: each part's number and ETag
// (without its quotes, which clients send or leave out alike).
func partsDigest(parts []api.Part) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d %s\n", p.Number, strings.Trim(p.ETag, `"`))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// errUploadCompleted refuses a part, an abort, or a completion naming
// other parts, of an upload the gateway completed: S3 no longer knows it.
var errUploadCompleted = errors.New("the upload was completed")

// finishedPart refuses a part sent to an upload that b says the gateway
// finished: api.ErrNotFound once completed; once aborted as stale, the
// *api.StaleTokenError of its token (the mark only grows), or
// api.ErrNotFound should the mark no longer be above it.
func (e *Engine) finishedPart(ctx context.Context, b api.UploadBinding) error {
	if b.State == api.UploadAbortedStale {
		if err := e.refuseStale(ctx, b.Resource, b.Token, true); err != nil {
			return err
		}
	}
	return fmt.Errorf("upload of %s: %w: %w", b.Resource, api.ErrNotFound, errUploadCompleted)
}

// finish marks the binding b finished (b.State) for finishedTTL (at most
// Config.UploadTTL), even after the request's context ended; a failure is
// logged, and the binding stays in progress until its TTL.
func (e *Engine) finish(ctx context.Context, b api.UploadBinding) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := e.uploads.FinishUpload(ctx, b, min(finishedTTL, e.cfg.UploadTTL)); err != nil {
		e.monitor.Logger(ctx).Warn("marking an upload finished failed; it expires with its TTL", "state", b.State, "err", err)
	}
}

// errNoMultipart refuses multipart uploads on a gateway without them, or
// for a bucket of a store without them.
var errNoMultipart = errors.New("multipart uploads are not available for this bucket: the gateway fences multipart uploads in S3 buckets only, with multipart turned on")

// multipartPath returns p named after its bucket's store, or
// errNoMultipart when the gateway has no multipart uploads or the bucket
// is not in S3.
func (e *Engine) multipartPath(p api.ObjectPath) (api.ObjectPath, error) {
	if e.stores != nil {
		p.Store = e.stores.StoreOf(p.Bucket)
	}
	if e.multipart == nil || (p.Store != "" && p.Store != api.StoreS3) {
		return api.ObjectPath{}, fmt.Errorf("%w: %w", api.ErrInvalidRequest, errNoMultipart)
	}
	return p, nil
}

// CreateUpload starts a fenced multipart upload of path for token and
// binds it to (resource, token): it refuses a token that the cache knows
// to be stale, observes the object and checks the fence as a PUT does
// (observeAndFence: a token below the one the object records, or below
// the mark, is refused, 409, with nothing raised or created), then
// creates the upload in S3, binds it, and last writes the mark at token
// again (FenceStore.FenceCheckRenew).
//
// Why observe: once a mark that its object records is evicted (package
// retention), the object's token is what refuses a stale writer. Without
// the observation, a stale token would pass the fence check and raise a
// mark below the object's token, which the completion then refuses but
// which never matches the object, and so is never evicted again.
//
// Why the create raises the mark rather than only checking it: a token
// presented with a write is one the resource has seen, and the raise is
// what makes a newer holder's upload refuse an older holder's parts at
// once (UploadPart), instead of letting both upload gigabytes until one
// loses at completion. The raise is the one a PUT's fence check makes
// before its write, with the same cost when the write never comes (a
// mark that stays, refusing only tokens below one that was granted). It
// decides nothing about the object: the completion observes the object
// and checks the fence again, in that order, and only its conditional
// completion writes (CompleteUpload).
//
// Why the mark is written again after the binding: while the upload is in
// progress its object does not exist, so the mark is a tombstone, and
// the mark evictor keeps a tombstone only while an upload of it is bound
// (it reads the bindings after the mark). The first fence check may
// confirm a mark equal to token without writing it, so an eviction that
// read the mark before could still land after the binding. The last
// write comes after the binding and gives the mark a new mod revision:
// an evictor that read the mark before it fails its compare, and one
// that reads the mark after it finds the binding. If the mark was evicted
// between the two checks, the write raises it again before the upload is
// answered. A token that has gone stale in between abandons the upload.
//
// A binding that cannot be recorded aborts the upload (an unbound upload
// could never be completed through the gateway). The binding holds a
// random secret: the caller answers the creator b.Capability(), the id
// that lets it act on the upload without a token (boundUpload). The
// caller needs Write access to the resource.
func (e *Engine) CreateUpload(ctx context.Context, path api.ObjectPath, token api.Token, contentType string, meta api.ObjectMetadata) (api.UploadBinding, error) {
	return e.CreateUploadWith(ctx, api.CreateUploadInput{Path: path, Token: token, ContentType: contentType, Metadata: meta})
}

// CreateUploadWith is CreateUpload of in, with its server-side encryption
// (in.Encryption) asked of the store; a customer key (SSE-C) is also sent
// with the observation of the object.
func (e *Engine) CreateUploadWith(ctx context.Context, in api.CreateUploadInput) (api.UploadBinding, error) {
	return e.createUpload(ctx, in, 0, 0)
}

// createUpload is CreateUploadWith, binding the upload with the object's
// size and part size when a multipart ticket creates it (zero
// otherwise), by which PartTickets signs its parts.
func (e *Engine) createUpload(ctx context.Context, in api.CreateUploadInput, size, partSize int64) (api.UploadBinding, error) {
	path, token := in.Path, in.Token
	path, err := e.multipartPath(path)
	if err != nil {
		return api.UploadBinding{}, err
	}
	resource := path.Resource()
	if err := e.access.Authorize(ctx, Write, resource); err != nil {
		return api.UploadBinding{}, err
	}
	fr, err := e.FastReject(ctx, path, token)
	if err != nil {
		return api.UploadBinding{}, err
	}
	// A HEAD: next to an upload it costs little, and the version is not
	// used beyond its token (the completion observes again).
	fr.noWrite, fr.encryption = true, in.Encryption
	if _, _, err := e.observeAndFence(ctx, fr, observeHead, raiseOnAbsent); err != nil {
		return api.UploadBinding{}, err
	}
	in.Path = path
	id, err := e.multipart.CreateUpload(ctx, in)
	if err != nil {
		return api.UploadBinding{}, err
	}
	e.monitor.UploadCreated()
	b := api.UploadBinding{UploadID: id, Resource: resource, Token: token, Secret: rand.Text(), ChecksumAlgorithm: in.ChecksumAlgorithm,
		Size: size, PartSize: partSize}
	if err := e.uploads.BindUpload(ctx, b, e.cfg.UploadTTL); err != nil {
		e.Abandon(ctx, path, b, AbortFailed, "the binding was not recorded")
		return api.UploadBinding{}, fmt.Errorf("create upload: %w", err)
	}
	if err := e.fences.FenceCheckRenew(ctx, resource, token); err != nil {
		reason := AbortFailed
		if errors.Is(err, api.ErrStaleToken) {
			reason = AbortStale
		}
		e.Abandon(ctx, path, b, reason, "the mark was not written after the binding")
		return api.UploadBinding{}, err
	}
	return b, nil
}

// refuseStale refuses token when it is below resource's high-water mark
// as the cache knows it, and, when linearizable is set, as etcd knows it
// (a linearizable read, after the cache let it pass).
func (e *Engine) refuseStale(ctx context.Context, resource api.Resource, token api.Token, linearizable bool) error {
	if hwm, ok := e.fences.CachedHighWaterMark(resource); ok && hwm > token {
		e.monitor.StaleFound(ctx, StaleFromCache)
		return &api.StaleTokenError{Resource: resource, Token: token, HighWaterMark: hwm}
	}
	if !linearizable {
		return nil
	}
	hwm, err := e.fences.HighWaterMark(ctx, resource)
	if err != nil {
		return err
	}
	if hwm > token {
		e.monitor.StaleFound(ctx, StaleFromEtcd)
		return &api.StaleTokenError{Resource: resource, Token: token, HighWaterMark: hwm}
	}
	return nil
}

// uploadUse is what a request does to an upload that it names: it
// decides which token the request must show when the id it names the
// upload by is not the creator's capability (boundUpload).
type uploadUse int

const (
	// useWrite is a part (UploadPart, UploadPartCopy) or the completion:
	// they write into the upload, so they need the upload's own token.
	useWrite uploadUse = iota
	// useAbort is an abort: the upload's token or a larger one, so that
	// a newer holder may clear an older holder's upload.
	useAbort
)

// errUploadTokenMissing and errUploadTokenDiffers say why boundUpload
// refused a request's token.
var (
	errUploadTokenMissing = errors.New("this upload id is the store's, as ListMultipartUploads shows it to anyone who may read the bucket: " +
		"send X-Fence-Token with the upload's token, or name the upload by the id CreateMultipartUpload answered")
	errUploadTokenDiffers = errors.New("the upload was created with another token: its parts and its completion carry that token or none")
	errUploadTokenBelow   = errors.New("an abort carries the upload's token, a larger one, or (by the id CreateMultipartUpload answered) none")
)

// boundUpload returns the binding of the upload that a request names by
// id, once the request may do use to it with token (zero: it sent none).
// Two ids name an upload:
//
//   - The capability CreateUpload answered its creator: the store's id,
//     ".", and the binding's secret (api.UploadBinding.Capability). It
//     acts as the creator: its token is the bound one, and a part or a
//     completion that sends none is fenced with it, as S3 clients, which
//     send the token on CreateMultipartUpload only, need. The secret has
//     130 random bits, is compared in constant time, and is told to
//     nobody else: ListMultipartUploads and ListParts show the store's
//     id, and no log line or error names it. So a request that has it was
//     sent by the writer the bound token was granted to, or by one it
//     gave the id to, as it could give its token.
//   - The store's id, which ListMultipartUploads shows to anyone who may
//     read the prefix: it proves nothing, so the request must show the
//     token it acts with. A part or the completion needs the bound token
//     itself, an abort the bound token or a larger one: a newer holder
//     may clear an older holder's upload, an older one may not touch a
//     newer one's. No token is api.ErrMissingToken (428).
//
// A token that the use does not allow is refused with either id, and the
// upload left as it is: *api.StaleTokenError (409) when it is below the
// mark (its sender is a stale holder), otherwise api.ErrInvalidRequest
// (400). Without these rules, a stale holder with write on the key could
// complete a newer holder's upload early with a subset of its parts
// (ListParts gives their ETags), recording a truncated object under the
// newer holder's token, upload parts into it, or abort it; the fence of
// the completion cannot see this, since it checks the bound token, and
// the bound token is the newer holder's. With them, a stale holder needs
// the capability, which only the newer holder was answered, or the newer
// holder's token, which it was never granted. (The fence guards against
// holders acting on an old grant, not against an identity that claims a
// token it was not granted: that one could as well PUT with it.)
//
// An id of the capability's form is looked up as a capability first: a
// store's id may itself contain ".", so an id whose secret does not match
// is then looked up whole, as a store's id. Both lookups are of resource
// only: an id of another object's upload is api.ErrNotFound, whichever
// form it has.
//
// A binding recorded by a gateway before bindings had a secret (a rolling
// upgrade) has no capability: its upload takes the token on every
// request, and a client of the older gateway that sends none is refused
// 428, saying what to send: it fails closed. The older gateway answers
// such a client only the store's id, so nothing else could name it.
func (e *Engine) boundUpload(ctx context.Context, resource api.Resource, id string, token api.Token, use uploadUse) (api.UploadBinding, error) {
	b, capability, err := e.lookUpUpload(ctx, resource, id)
	if err != nil {
		return api.UploadBinding{}, err
	}
	refuse := func(why error) (api.UploadBinding, error) {
		if err := e.refuseStale(ctx, resource, token, true); err != nil {
			return api.UploadBinding{}, err // 409 (or etcd unavailable)
		}
		return api.UploadBinding{}, fmt.Errorf("%w: %s %s: %w", api.ErrInvalidRequest, api.HeaderFenceToken, token, why)
	}
	switch {
	case token == 0 && capability:
		return b, nil
	case token == 0:
		return api.UploadBinding{}, fmt.Errorf("%w: %w", api.ErrMissingToken, errUploadTokenMissing)
	case use == useWrite && token != b.Token:
		return refuse(errUploadTokenDiffers)
	case use == useAbort && token < b.Token:
		return refuse(errUploadTokenBelow)
	}
	return b, nil
}

// lookUpUpload returns the binding of resource's upload that id names,
// and whether id is its capability (boundUpload); api.ErrNotFound when
// neither form of id names one.
func (e *Engine) lookUpUpload(ctx context.Context, resource api.Resource, id string) (api.UploadBinding, bool, error) {
	if storeID, secret, ok := api.SplitCapability(id); ok {
		b, err := e.uploads.Upload(ctx, resource, storeID)
		if err != nil && !errors.Is(err, api.ErrNotFound) {
			return api.UploadBinding{}, false, err
		}
		if err == nil && b.Secret != "" && subtle.ConstantTimeCompare([]byte(secret), []byte(b.Secret)) == 1 {
			return b, true, nil
		}
	}
	b, err := e.uploads.Upload(ctx, resource, id)
	return b, false, err
}

// partBinding returns the binding of the upload that a part is sent to,
// once the part may be stored: the part's number is valid, the caller
// may write the object, the upload is bound to it and the request may
// write into it with token (boundUpload), and its token is not below the
// mark (the cache first, then a linearizable read). A stale upload is
// aborted, and the answer is the *api.StaleTokenError.
func (e *Engine) partBinding(ctx context.Context, path api.ObjectPath, uploadID string, token api.Token, number int32) (api.ObjectPath, api.UploadBinding, error) {
	path, err := e.multipartPath(path)
	if err != nil {
		return path, api.UploadBinding{}, err
	}
	if number < 1 || number > api.MaxParts {
		return path, api.UploadBinding{}, fmt.Errorf("%w: part number %d: must be 1 to %d", api.ErrInvalidRequest, number, api.MaxParts)
	}
	if err := e.access.Authorize(ctx, Write, path.Resource()); err != nil {
		return path, api.UploadBinding{}, err
	}
	b, err := e.boundUpload(ctx, path.Resource(), uploadID, token, useWrite)
	if err != nil {
		return path, api.UploadBinding{}, err
	}
	if b.State != api.UploadInProgress {
		return path, api.UploadBinding{}, e.finishedPart(ctx, b)
	}
	if err := e.refuseStale(ctx, b.Resource, b.Token, true); err != nil {
		if errors.Is(err, api.ErrStaleToken) {
			e.monitor.PartRefusedStale()
			e.Abandon(ctx, path, b, AbortStale, "its token is stale")
		}
		return path, api.UploadBinding{}, err
	}
	return path, b, nil
}

// UploadPart stores one part of a bound upload, streaming in.Body to S3
// (memory stays bounded whatever the part's size), and returns its ETag.
// in.UploadID is the id the client sent, and token the token it sent
// (zero: none), which boundUpload checks. It is refused, with nothing
// stored, when the upload's token is below the resource's high-water
// mark: *api.StaleTokenError (409), and the upload is aborted; so is a
// part sent later to an upload aborted so (finishedPart). An upload that
// the gateway did not create, or that was completed, aborted by its
// client or expired, is api.ErrNotFound. The caller needs Write access to the
// resource.
//
// The check is not the fence: a mark raised while the part streams does
// not stop it. The completion fences the object; refusing parts early
// only spares a stale writer's bandwidth and S3's space.
func (e *Engine) UploadPart(ctx context.Context, in api.UploadPartInput, token api.Token) (string, error) {
	path, b, err := e.partBinding(ctx, in.Path, in.UploadID, token, in.Number)
	if err != nil {
		return "", err
	}
	if in.Size < 0 || in.Size > api.MaxPartSize {
		return "", fmt.Errorf("%w: a part of %d bytes: must be 0 to 5GiB", api.ErrInvalidRequest, in.Size)
	}
	in.Path, in.UploadID = path, b.UploadID
	etag, err := e.multipart.UploadPart(ctx, in)
	return etag, e.partGone(ctx, path, b, err)
}

// partGone is err, the store's answer to a part, unless the gateway
// aborted the upload as stale while the part was on its way (another part
// found it stale): then the stale refusal, as a part sent after it gets
// (finishedPart), and the upload is aborted in the store once more.
// Whatever the store answers a part whose upload it removes under it
// (NoSuchUpload, a dropped connection, a refusal of a body cut short) is
// explained by the abort, and the SDKs report an upload's first failure:
// it must say "fenced". A part the store took is no better: its upload is
// gone, and a store may take a part that arrives under the abort and keep
// the upload for it (versitygw can), so the abort is sent again after the
// part's answer. Abandon marks the binding before it aborts, so a part
// whose answer comes after the abort finds the mark. Every part pays one
// read of its binding for this, small beside a part's bytes.
func (e *Engine) partGone(ctx context.Context, path api.ObjectPath, b api.UploadBinding, err error) error {
	now, lookErr := e.uploads.Upload(ctx, b.Resource, b.UploadID)
	if lookErr != nil || now.State != api.UploadAbortedStale {
		return err
	}
	e.abortInStore(ctx, path, b.UploadID, "a part reached the store while its upload was aborted as stale")
	return e.finishedPart(ctx, now)
}

// CopyPart stores one part of a bound upload copied from in.Source
// (UploadPartCopy), refused as UploadPart is. The caller needs Write access to
// the upload's resource and Read access to the source's.
func (e *Engine) CopyPart(ctx context.Context, in api.CopyPartInput, token api.Token) (string, error) {
	if e.stores != nil {
		in.Source.Store = e.stores.StoreOf(in.Source.Bucket)
	}
	if in.Source.Store != "" && in.Source.Store != api.StoreS3 {
		return "", fmt.Errorf("%w: %w", api.ErrInvalidRequest, errNoMultipart)
	}
	if err := e.access.Authorize(ctx, Read, in.Source.Resource()); err != nil {
		return "", err
	}
	path, b, err := e.partBinding(ctx, in.Path, in.UploadID, token, in.Number)
	if err != nil {
		return "", err
	}
	in.Path, in.UploadID = path, b.UploadID
	etag, err := e.multipart.CopyPart(ctx, in)
	return etag, e.partGone(ctx, path, b, err)
}

// CompleteUpload completes a bound upload from parts, fenced as a PUT is:
// it observes the object (a HEAD), refuses the upload's token if the
// object records a larger one, runs the fence check, and completes with
// If-Match the observed ETag (If-None-Match: * when it was absent). The
// order is observeAndFence's argument: the version observed was written
// by a writer whose fence check finished before this one began, so if
// this check passes, the upload's token is at least that writer's, and
// the conditional completion lands only if that version is still
// current. A completion that loses a race (412) is observed and fenced
// again, at most Config.WriteAttempts times in all: the parts stay in S3,
// so it can be sent again.
//
// uploadID is the id the client sent and token the token it sent (zero:
// none): the request must be the creator's (boundUpload), since a
// completion decides which parts make the object that the bound token
// records. A stale upload is refused (*api.StaleTokenError, 409) and
// aborted, so its parts do not linger. On success the binding is kept
// for finishedTTL marked completed, with the ETag and the parts' digest,
// and the answer is the write's result, as a PUT's; a completion sent
// again is answered from it (completedBefore). The caller needs Write access
// on the resource.
func (e *Engine) CompleteUpload(ctx context.Context, path api.ObjectPath, uploadID string, token api.Token, parts []api.Part) (WriteResult, error) {
	return e.CompleteUploadIf(ctx, path, uploadID, token, parts, WriteCondition{})
}

// CompleteUploadIf is CompleteUpload with the client's own precondition
// cond, composed with the gateway's as a PUT's is (see WriteCondition):
// one that fails is api.ErrPreconditionFailed, and the upload stays,
// bound, for the client to complete again or abort, as S3 keeps it. The
// zero value is none.
func (e *Engine) CompleteUploadIf(ctx context.Context, path api.ObjectPath, uploadID string, token api.Token, parts []api.Part, cond WriteCondition) (WriteResult, error) {
	path, err := e.multipartPath(path)
	if err != nil {
		return WriteResult{}, err
	}
	if len(parts) == 0 || len(parts) > api.MaxParts {
		return WriteResult{}, fmt.Errorf("%w: a completion names 1 to %d parts, not %d", api.ErrInvalidRequest, api.MaxParts, len(parts))
	}
	resource := path.Resource()
	if err := e.access.Authorize(ctx, Write, resource); err != nil {
		return WriteResult{}, err
	}
	b, err := e.boundUpload(ctx, resource, uploadID, token, useWrite)
	if err != nil {
		return WriteResult{}, err
	}
	digest := partsDigest(parts)
	if b.State != api.UploadInProgress {
		return e.completedBefore(ctx, b, digest)
	}
	fr := Request{Path: path, Resource: resource, Token: b.Token, cond: cond}
	stale := func(err error) (WriteResult, error) {
		if errors.Is(err, api.ErrStaleToken) {
			e.Abandon(ctx, path, b, AbortStale, "its token is stale")
		}
		return WriteResult{}, err
	}
	if err := e.refuseStale(ctx, resource, b.Token, false); err != nil {
		return stale(err)
	}
	for attempt := 1; ; attempt++ {
		seen, _, err := e.observeAndFence(ctx, fr, observeHead, raiseOnAbsent)
		if err != nil {
			return stale(err)
		}
		etag, err := e.multipart.CompleteUpload(ctx, api.CompleteUploadInput{Path: path, UploadID: b.UploadID, Parts: parts, Replaces: seen, ChecksumAlgorithm: b.ChecksumAlgorithm})
		if errors.Is(err, api.ErrConcurrentModification) && attempt < e.cfg.WriteAttempts {
			e.monitor.Logger(ctx).Debug("completion lost a race; observing again", "resource", resource, "attempt", attempt)
			continue
		}
		if errors.Is(err, api.ErrNotFound) {
			// A completion of the same upload that was in flight may
			// have landed first: answer as it was answered.
			if now, lookErr := e.uploads.Upload(ctx, resource, b.UploadID); lookErr == nil && now.State != api.UploadInProgress {
				return e.completedBefore(ctx, now, digest)
			}
		}
		if err != nil {
			return WriteResult{}, err
		}
		e.monitor.UploadCompleted()
		e.etags.learn(resource, api.ObjectVersion{Exists: true, ETag: etag, Token: b.Token})
		done := b
		done.State, done.ETag, done.PartsDigest = api.UploadCompleted, etag, digest
		e.finish(ctx, done)
		return e.accepted(ctx, WriteResult{Resource: resource, Token: b.Token, ETag: etag, Created: !seen.Exists, ReplacedETag: seen.ETag}), nil
	}
}

// completedBefore answers a completion of an upload that the binding b
// says the gateway finished. Completed with the same parts (digest), the
// answer is the one the completion had, as S3 answers a repeated
// CompleteMultipartUpload: the object's ETag, with nothing sent to S3 and
// no fence checked, since nothing is written. That holds for a stale
// retry too, one sent after a newer holder wrote the object: its
// completion was fenced and landed before, and answering it is not
// writing it again. Completed with other parts, it is api.ErrNotFound (S3
// no longer knows the upload). Aborted as stale, it is the stale refusal
// (finishedPart).
func (e *Engine) completedBefore(ctx context.Context, b api.UploadBinding, digest string) (WriteResult, error) {
	if b.State == api.UploadCompleted && b.PartsDigest == digest {
		return WriteResult{Resource: b.Resource, Token: b.Token, ETag: b.ETag}, nil
	}
	if b.State == api.UploadCompleted {
		return WriteResult{}, fmt.Errorf("upload of %s: %w: %w with other parts", b.Resource, api.ErrNotFound, errUploadCompleted)
	}
	return WriteResult{}, e.finishedPart(ctx, b)
}

// AbortUpload aborts a bound upload and deletes its binding; an upload
// the gateway aborted as stale is nil (204) with nothing sent, one it
// completed api.ErrNotFound, as S3 answers them. uploadID is
// the id the client sent and token the token it sent (zero: none): by the
// creator's capability it needs none; by the store's id, the upload's
// token or a larger one (boundUpload). An abort writes no object, so it
// is not fenced further: the upload's creator may abort it even once its
// token is stale. The caller needs Write access to the resource.
//
// An id that binds no upload of this resource is api.ErrNotFound, and
// nothing reaches S3 or the binding: the gateway aborts only the uploads
// it fences, and a request that names one object never touches another's
// upload (the store checks that an upload is of the key it is sent with,
// but the binding is the gateway's to keep). When S3 no longer knows a
// bound upload, its binding goes all the same; the binding deleted is the
// one read, in the transaction that deletes it (UploadStore.UnbindUpload).
func (e *Engine) AbortUpload(ctx context.Context, path api.ObjectPath, uploadID string, token api.Token) error {
	path, err := e.multipartPath(path)
	if err != nil {
		return err
	}
	if err := e.access.Authorize(ctx, Write, path.Resource()); err != nil {
		return err
	}
	b, err := e.boundUpload(ctx, path.Resource(), uploadID, token, useAbort)
	if err != nil {
		return err
	}
	switch b.State {
	case api.UploadAbortedStale:
		// The gateway aborted it when its token went stale: the client's
		// own abort (the AWS SDK for JavaScript's Upload sends one
		// before it reports the 409) succeeds, as the upload is gone.
		return nil
	case api.UploadCompleted:
		return fmt.Errorf("upload of %s: %w: %w", b.Resource, api.ErrNotFound, errUploadCompleted)
	}
	err = e.multipart.AbortUpload(ctx, path, b.UploadID)
	if err == nil {
		e.monitor.UploadAborted(AbortByClient)
	}
	if errors.Is(err, api.ErrNotFound) {
		// The gateway may have aborted it as stale since it was read.
		if now, lookErr := e.uploads.Upload(ctx, b.Resource, b.UploadID); lookErr == nil && now.State == api.UploadAbortedStale {
			return nil
		}
	}
	if err == nil || errors.Is(err, api.ErrNotFound) {
		e.unbind(ctx, b)
	}
	return err
}

// ListParts lists an upload's parts, after part number marker, at most
// max (zero: the store's default). The caller needs Read access to the
// resource, and no token: a listing writes nothing, and what it shows
// (part numbers, sizes, ETags) completes nothing without the creator's
// capability or token. uploadID may be either id (boundUpload); a
// capability is listed as the store's id it names, anything else is sent
// to the store as it is.
func (e *Engine) ListParts(ctx context.Context, path api.ObjectPath, uploadID string, marker, max int32) (api.PartList, error) {
	path, err := e.multipartPath(path)
	if err != nil {
		return api.PartList{}, err
	}
	if err := e.access.Authorize(ctx, Read, path.Resource()); err != nil {
		return api.PartList{}, err
	}
	if _, _, ok := api.SplitCapability(uploadID); ok {
		b, capability, err := e.lookUpUpload(ctx, path.Resource(), uploadID)
		if err != nil && !errors.Is(err, api.ErrNotFound) {
			return api.PartList{}, err
		}
		if capability {
			uploadID = b.UploadID
		}
	}
	return e.multipart.ListParts(ctx, path, uploadID, marker, max)
}

// ListUploads lists a bucket's uploads in progress under in.Prefix. The
// caller needs Read access to the prefix's resource ("s3/<bucket>/<prefix>").
func (e *Engine) ListUploads(ctx context.Context, in api.ListUploadsInput) (api.UploadList, error) {
	path, err := e.multipartPath(api.ObjectPath{Bucket: in.Bucket, Key: in.Prefix})
	if err != nil {
		return api.UploadList{}, err
	}
	if err := e.access.Authorize(ctx, Read, path.Resource()); err != nil {
		return api.UploadList{}, err
	}
	return e.multipart.ListUploads(ctx, in)
}

// Abandon aborts an upload that can never complete and deletes its
// binding b (only if it is still b: UploadStore.UnbindUpload), even after
// the request's context ended, within cleanupTimeout, then counts it
// aborted for reason (AbortStale, AbortFailed); why says more, in the
// log. Failures are logged: S3's lifecycle rules and the binding's TTL
// free what is left.
func (e *Engine) Abandon(ctx context.Context, path api.ObjectPath, b api.UploadBinding, reason, why string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if reason == AbortStale {
		// Kept a while, so that the client's own abort is answered 204
		// and its late parts 409 rather than 404 (AbortUpload); marked
		// before the abort, so that a request that finds the upload
		// gone in S3 finds the mark too (partGone).
		done := b
		done.State = api.UploadAbortedStale
		e.finish(ctx, done)
	}
	e.abortInStore(ctx, path, b.UploadID, why)
	if reason != AbortStale {
		e.unbind(ctx, b)
	}
	e.monitor.UploadAborted(reason)
}

// abortInStore aborts the upload uploadID of path in the store, even
// after the request's context ended, within cleanupTimeout; a failure
// is logged with why, and an upload the store no longer knows is not one.
func (e *Engine) abortInStore(ctx context.Context, path api.ObjectPath, uploadID, why string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := e.multipart.AbortUpload(ctx, path, uploadID); err != nil && !errors.Is(err, api.ErrNotFound) {
		e.monitor.Logger(ctx).Warn("abort of an upload failed", "bucket", path.Bucket, "key", path.Key, "why", why, "err", err)
	}
}

// unbind deletes the binding b if it is still b (UploadStore.UnbindUpload),
// even after the request's context ended; a failure is logged, and the
// binding expires with its TTL.
func (e *Engine) unbind(ctx context.Context, b api.UploadBinding) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := e.uploads.UnbindUpload(ctx, b); err != nil {
		e.monitor.Logger(ctx).Warn("unbind of an upload failed; it expires with its TTL", "err", err)
	}
}
