package fence

import (
	"context"

	"fencegate/api"
)

// FenceStore decides fence checks. tokenstore.Store implements it.
type FenceStore interface {
	// CachedHighWaterMark returns a lower bound of resource's high-water
	// mark known without a round trip.
	CachedHighWaterMark(resource api.Resource) (api.Token, bool)
	// FenceCheck accepts token (raising the mark) or refuses it with an
	// *api.StaleTokenError; any other error means the outcome is unknown.
	FenceCheck(ctx context.Context, resource api.Resource, token api.Token) error
	// FenceCheckRenew is FenceCheck, except that an accepted token
	// always rewrites the mark (a new etcd mod revision), even when it
	// equals the mark. Deletes use it: a mark evictor that saw the object
	// record the mark must see that a delete came since (see the token
	// store's FenceCheckRenew).
	FenceCheckRenew(ctx context.Context, resource api.Resource, token api.Token) error
	// CheckNotStale decides token as FenceCheck does, with the same
	// errors, but never raises (or creates) the mark: for a write that
	// changes nothing, such as a delete of an absent object.
	CheckNotStale(ctx context.Context, resource api.Resource, token api.Token) error
	// HighWaterMark reads resource's mark linearizably (zero: none).
	HighWaterMark(ctx context.Context, resource api.Resource) (api.Token, error)
}

// ObjectWriter observes and conditionally changes objects. The S3 backend
// implements it.
type ObjectWriter interface {
	// Observe returns the object's current version, which is always
	// api.ObjectVersion.Named: an object that exists without an ETag is
	// an error (api.ErrUpstream), since no conditional write could name
	// it.
	Observe(ctx context.Context, path api.ObjectPath) (api.ObjectVersion, error)
	// Put writes if in.Replaces is still current and returns the new ETag;
	// otherwise it fails with api.ErrConcurrentModification. It never
	// sends a write whose condition is empty: a Replaces that is not
	// Named is an error, with nothing sent.
	Put(ctx context.Context, in api.PutObjectInput) (etag string, err error)
	// Delete deletes if the object's ETag is still etag; otherwise it
	// fails with api.ErrConcurrentModification. An empty etag is an
	// error, with nothing sent.
	Delete(ctx context.Context, path api.ObjectPath, etag string) error
}

// KeyedObserver is implemented by an ObjectWriter whose store keeps
// objects encrypted with a key of the client's own (S3's SSE-C), which it
// answers a HEAD of only with that key. The S3 backend implements it.
type KeyedObserver interface {
	// ObserveWithKey is Observe, sending key with the HEAD. A store that
	// refuses the HEAD (the object is encrypted with another key, or
	// none was sent) is an error, never an absent object.
	ObserveWithKey(ctx context.Context, path api.ObjectPath, key api.CustomerKey) (api.ObjectVersion, error)
}

// ObjectReader reads objects. The S3 backend implements it.
type ObjectReader interface {
	// Get reads in.Path, or the byte range in.Range, if in's
	// preconditions hold. A failed If-None-Match or If-Modified-Since is
	// a result, api.Object.NotModified; a failed If-Match or
	// If-Unmodified-Since is api.ErrPreconditionFailed, a range past the
	// end api.ErrRangeNotSatisfiable.
	Get(ctx context.Context, in api.GetObjectInput) (*api.Object, error)
	// Head is Get without the body; it ignores in.Range.
	Head(ctx context.Context, in api.GetObjectInput) (*api.Object, error)
}

// TagReader reads objects' tags (S3's object tagging). The S3 backend
// implements it; a store without one keeps no tags.
type TagReader interface {
	// Tags returns the tags of the object's current version, key to
	// value (none: empty). A missing object is api.ErrNotFound. They are
	// read apart from the object's bytes, so a write in between makes
	// them another version's.
	Tags(ctx context.Context, path api.ObjectPath) (map[string]string, error)
}

// ObjectStore is what the object routes need of a backend.
type ObjectStore interface {
	ObjectWriter
	ObjectReader
}

// BucketStores is implemented by an ObjectStore that holds buckets in
// more than one store (S3 and GCS). The gateway does not talk to stores
// differently; it only names resources after them ("gcs/<bucket>/<key>"),
// so that each store's objects have marks of their own. An ObjectStore
// without it holds every bucket in S3.
type BucketStores interface {
	// StoreOf names the store that holds bucket, such as api.StoreGCS.
	StoreOf(bucket string) string
}
