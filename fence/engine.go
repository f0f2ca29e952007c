package fence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"fencegate/api"
)

// Config holds the engine's limits. The caller gives every field its
// value: the gateway's Config documents them and their defaults, and New
// refuses what no default gives.
type Config struct {
	// BufferBytes is the largest body held in memory so that a write
	// that loses a race can be retried; larger bodies stream to the
	// store, and a lost race on them is api.ErrConcurrentModification.
	BufferBytes int64
	// BufferBudgetBytes bounds the memory of the bodies being buffered
	// and of the answers built whole (a multipart ticket's parts,
	// reserveAnswer), all requests' together (see bodyBudget).
	BufferBudgetBytes int64
	// MaxBodyBytes is the largest body accepted at all
	// (api.ErrBodyTooLarge beyond).
	MaxBodyBytes int64
	// WriteAttempts bounds observe-fence-write rounds per request when
	// the write loses a race to another writer.
	WriteAttempts int
	// ETagCacheEntries bounds the cache of the versions this engine's own
	// writes left (see etagCache); not positive turns the cache off.
	ETagCacheEntries int
	// ETagCacheMaxAge bounds the age of the versions the ETag cache
	// serves; negative means no bound.
	ETagCacheMaxAge time.Duration
	// TombstonesForAbsent makes a delete of an absent object raise the
	// resource's mark to its token (see Engine.Delete).
	TombstonesForAbsent bool
	// UploadTTL is how long the binding of a multipart upload lives in
	// the upload store when the upload is neither completed nor aborted.
	UploadTTL time.Duration
	// TicketExpiry is how long a ticket may be used (see Engine.Ticket):
	// whole seconds from 1 s to api.MaxTicketExpiry. Zero means
	// api.DefaultTicketExpiry.
	TicketExpiry time.Duration
	// Now is the clock of the ETag cache's ages. Nil means time.Now.
	Now func() time.Time
	// Hooks stop a write between protocol steps, or change the protocol
	// on purpose, in tests. The zero value is none.
	Hooks Hooks
}

// Hooks are points in the write path where tests can pause a request or
// change the protocol on purpose, to show that the order matters.
type Hooks struct {
	// AfterObserve runs after the object's version is observed, before
	// the fence check.
	AfterObserve func(ctx context.Context, resource api.Resource, token api.Token)
	// AfterFenceCheck runs after the fence check accepted the token,
	// before the conditional write.
	AfterFenceCheck func(ctx context.Context, resource api.Resource, token api.Token)
	// UnsafeFenceBeforeObserve swaps the protocol's steps 3 and 4 (fence
	// check first, then observe). It is wrong, and exists so that tests
	// can show that it is: never set it outside a test.
	UnsafeFenceBeforeObserve bool
	// UnsafeUnconditionalWrite drops the conditional write of step 5
	// (api.PutObjectInput.UnsafeUnconditional). It is wrong, and exists
	// so that tests can show that it is: never set it outside a test.
	UnsafeUnconditionalWrite bool
	// UnsafeUnconditionalTicket drops the condition a ticket signs
	// (api.TicketRequest.UnsafeUnconditional). It is wrong, and exists so
	// that tests can show that it is: never set it outside a test.
	UnsafeUnconditionalTicket bool
}

// Access is what a request does to a resource, as the engine asks the
// Authorizer about it. Its values are the names of the edge's grants.
type Access string

// The accesses the engine asks about.
const (
	Read   Access = "read"
	Write  Access = "write"
	Delete Access = "delete"
)

// Authorizer decides whether the caller of ctx may do access to
// resource: nil, or an error of class api.ErrForbidden (api.ErrUnauthorized
// for a caller not authenticated). The edge implements it with its
// identities and their grants. The engine asks it before anything of the
// request reaches the fence store or an object store, and before a stale
// answer could tell a caller that may not write an object its mark.
type Authorizer interface {
	Authorize(ctx context.Context, access Access, resource api.Resource) error
}

// Where a stale token was found, as Monitor.StaleFound is told.
const (
	StaleFromCache  = "cache"  // the fast reject: the cached mark is larger
	StaleFromObject = "object" // the object already records a larger token
	StaleFromEtcd   = "etcd"   // the fence check, or a linearizable read of the mark
)

// Reasons an upload was aborted, as Monitor.UploadAborted is told.
const (
	AbortByClient = "client" // AbortUpload: the client's own abort
	AbortStale    = "stale"  // its token went below the mark: it can never complete
	AbortFailed   = "failed" // a door's upload failed, or its binding was not recorded
)

// Monitor is told what the engine decided, for the edge's logs, metrics
// and event feed. Its methods run on the request's goroutine (ctx is the
// request's) and must not block.
type Monitor interface {
	// Logger returns the logger of ctx's request.
	Logger(ctx context.Context) *slog.Logger
	// StaleFound notes where the request's stale token was found
	// (StaleFrom...), before the refusal is returned.
	StaleFound(ctx context.Context, source string)
	// WriteAccepted notes a write that the store applied (a PUT, a tag
	// rewrite, a completed upload).
	WriteAccepted(ctx context.Context, res WriteResult)
	// DeleteAccepted notes a delete that succeeded, of resource by token.
	DeleteAccepted(ctx context.Context, resource api.Resource, token api.Token)
	// BodyRefused notes a body refused because the budget of buffered
	// bodies had no room.
	BodyRefused()
	// UploadCreated, UploadCompleted and UploadAborted note a multipart
	// upload's life; PartRefusedStale a part refused because its
	// upload's token is below the mark.
	UploadCreated()
	UploadCompleted()
	UploadAborted(reason string)
	PartRefusedStale()
	// TicketIssued notes a ticket the engine issued: a write that may
	// land in the store, or never, without the engine seeing it.
	TicketIssued(ctx context.Context, t IssuedTicket)
}

// Stores are the stores the engine runs the protocol over. Objects and
// Fences are required; the others are optional.
type Stores struct {
	// Fences decides fence checks.
	Fences FenceStore
	// Objects observes, writes and reads objects; when it is also a
	// KeyedObserver it observes objects encrypted with a customer key.
	Objects ObjectStore
	// Buckets names each bucket's store; nil means every bucket is in S3.
	Buckets BucketStores
	// Tags reads objects' tags; nil means the store keeps none, and tag
	// writes are api.ErrInvalidRequest.
	Tags TagReader
	// Multipart and Uploads serve fenced multipart uploads (S3 buckets
	// only). Nil (either) means none: multipart requests are
	// api.ErrInvalidRequest.
	Multipart MultipartStore
	Uploads   UploadStore
	// Tickets signs tickets (Engine.Ticket) for S3 buckets. Nil means
	// none: tickets are api.ErrNotImplemented.
	Tickets TicketSigner
}

// Engine runs the fencing protocol (see the package doc) for every front
// door. Create it with New; it is safe for concurrent use.
type Engine struct {
	cfg     Config
	fences  FenceStore
	objects ObjectStore
	// stores names the store of each bucket; nil when objects is not a
	// BucketStores (every bucket is in S3).
	stores BucketStores
	// tags reads objects' tags; nil when objects is not a TagReader.
	tags TagReader
	// multipart and uploads are nil without multipart uploads.
	multipart MultipartStore
	uploads   UploadStore
	tickets   TicketSigner // nil without tickets
	access    Authorizer
	monitor   Monitor
	etags     *etagCache // nil when Config.ETagCacheEntries is not positive
	bodies    *bodyBudget
}

// New returns an engine over stores that asks access about every
// request's resources and tells monitor what it decided.
func New(cfg Config, stores Stores, access Authorizer, monitor Monitor) (*Engine, error) {
	switch {
	case stores.Fences == nil || stores.Objects == nil:
		return nil, errors.New("fence: nil fence store or object store")
	case access == nil || monitor == nil:
		return nil, errors.New("fence: nil authorizer or monitor")
	case cfg.BufferBytes <= 0 || cfg.BufferBudgetBytes < cfg.BufferBytes || cfg.MaxBodyBytes <= 0:
		return nil, errors.New("fence: body limits must be positive, with a budget of at least one buffer")
	case cfg.WriteAttempts < 1:
		return nil, errors.New("fence: write attempts must be at least 1")
	case cfg.TicketExpiry != 0 && (cfg.TicketExpiry < time.Second || cfg.TicketExpiry > api.MaxTicketExpiry || cfg.TicketExpiry%time.Second != 0):
		return nil, fmt.Errorf("fence: ticket expiry %v: want whole seconds from 1s to %v", cfg.TicketExpiry, api.MaxTicketExpiry)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	e := &Engine{cfg: cfg, fences: stores.Fences, objects: stores.Objects, access: access, monitor: monitor,
		etags: newETagCache(cfg.ETagCacheEntries, cfg.ETagCacheMaxAge, cfg.Now), bodies: &bodyBudget{limit: cfg.BufferBudgetBytes}}
	e.stores, e.tags, e.tickets = stores.Buckets, stores.Tags, stores.Tickets
	if stores.Multipart != nil && stores.Uploads != nil {
		e.multipart, e.uploads = stores.Multipart, stores.Uploads
	}
	return e, nil
}

// BufferedBytes is the memory that buffered bodies hold now, of
// Config.BufferBudgetBytes.
func (e *Engine) BufferedBytes() int64 { return e.bodies.used.Load() }

// HasMultipart reports whether the engine serves multipart uploads.
func (e *Engine) HasMultipart() bool { return e.multipart != nil }

// StoreOf names the store that holds bucket: api.StoreS3, or what the
// object store's BucketStores says (api.StoreGCS).
func (e *Engine) StoreOf(bucket string) string {
	if e.stores == nil {
		return api.StoreS3
	}
	if s := e.stores.StoreOf(bucket); s != "" {
		return s
	}
	return api.StoreS3
}

// HighWaterMark reads resource's mark linearizably (zero: none).
func (e *Engine) HighWaterMark(ctx context.Context, resource api.Resource) (api.Token, error) {
	return e.fences.HighWaterMark(ctx, resource)
}
