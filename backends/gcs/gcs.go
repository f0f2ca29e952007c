// Package gcs is fencegate's Google Cloud Storage backend: it observes
// objects, writes and deletes them conditionally on their generation
// (ifGenerationMatch), reads them back, and maps GCS's failures to
// fencegate's error classes in package api.
//
// Every write of a GCS object gets a new generation number, never reused
// for that object name, and ifGenerationMatch compares it. A conditional
// write therefore names one write, not a content: unlike S3's If-Match on
// an ETag (a hash of the bytes), it cannot be satisfied by an object that
// went back to the bytes it had when the writer observed it (the ETag ABA
// case). The version the gateway carries in api.ObjectVersion.ETag is the
// generation, as a quoted decimal entity tag ("1700000000000000"): the
// gateway compares and passes it on without knowing what it means, and
// clients see it as the object's ETag.
//
// It talks to GCS through the official client, cloud.google.com/go/storage,
// with the standard Google credentials chain, or to an emulator (such as
// fake-gcs-server) at Config.Endpoint or STORAGE_EMULATOR_HOST.
//
// It signs no upload tickets: a ticket for a GCS bucket is
// api.ErrNotImplemented (ticket.go says why).
package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"fencegate/api"
	"fencegate/backends/upstream"
)

// Config configures a Client.
type Config struct {
	// Endpoint is the JSON API's base URL, such as
	// "http://127.0.0.1:4443/storage/v1/" for an emulator. Empty means
	// Google's, or the emulator that STORAGE_EMULATOR_HOST names (the
	// client library reads it).
	Endpoint string
	// WithoutAuthentication sends no credentials, as emulators need.
	// False means the standard Google chain (GOOGLE_APPLICATION_CREDENTIALS,
	// gcloud's application-default credentials, the metadata server).
	WithoutAuthentication bool
	// HTTPClient sends the requests. Nil means the client library's own
	// (authenticated unless WithoutAuthentication).
	HTTPClient *http.Client
}

// Client is a GCS backend. It is safe for concurrent use.
type Client struct {
	gcs *storage.Client
}

// New returns a Client for cfg.
func New(ctx context.Context, cfg Config) (*Client, error) {
	// Reads use the JSON API, as writes do, so that one endpoint serves
	// both (and an emulator needs no XML host).
	opts := []option.ClientOption{storage.WithJSONReads()}
	if cfg.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(cfg.Endpoint))
	}
	if cfg.WithoutAuthentication {
		opts = append(opts, option.WithoutAuthentication())
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	client, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("gcs: new client: %w", err)
	}
	// The gateway does its own bounded retries, and only where a retry is
	// safe. The library would retry a conditional write (it counts them
	// idempotent), and a retry of one that landed but whose answer was
	// lost fails its precondition: a write that happened, reported as a
	// lost race.
	client.SetRetry(storage.WithPolicy(storage.RetryNever))
	return &Client{gcs: client}, nil
}

// Close releases the client's connections.
func (c *Client) Close() error { return c.gcs.Close() }

// Ping checks that GCS answers and the credentials may list the objects
// of bucket, by listing at most one. It needs storage.objects.list only,
// which fencegate's role has (not storage.buckets.get).
func (c *Client) Ping(ctx context.Context, bucket string) error {
	it := c.gcs.Bucket(bucket).Objects(ctx, &storage.Query{Prefix: "", Projection: storage.ProjectionNoACL})
	it.PageInfo().MaxSize = 1
	if _, err := it.Next(); err != nil && !errors.Is(err, iterator.Done) {
		return fmt.Errorf("gcs ping %s: %w", bucket, mapReadError(err))
	}
	return nil
}

// versionTag is the entity tag that names generation gen: its decimal
// digits, quoted.
func versionTag(gen int64) string { return `"` + strconv.FormatInt(gen, 10) + `"` }

// errNoGeneration refuses a version that names no generation: nothing is
// sent, since a write or delete without its condition would be blind.
var errNoGeneration = errors.New("the version names no GCS generation, so no conditional request can name it")

// generationOf returns the generation that tag (a versionTag) names.
func generationOf(tag string) (int64, error) {
	gen, err := strconv.ParseInt(strings.Trim(tag, `"`), 10, 64)
	if err != nil || gen <= 0 {
		return 0, fmt.Errorf("%w: entity tag %q", errNoGeneration, tag)
	}
	return gen, nil
}

// Observe returns the object's current version: its generation (as
// versionTag) and recorded token, or Exists false when there is no
// object.
func (c *Client) Observe(ctx context.Context, p api.ObjectPath) (api.ObjectVersion, error) {
	attrs, err := c.gcs.Bucket(p.Bucket).Object(p.Key).Attrs(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return api.ObjectVersion{}, nil
	}
	if err != nil {
		return api.ObjectVersion{}, fmt.Errorf("gcs attrs %s/%s: %w", p.Bucket, p.Key, mapReadError(err))
	}
	return api.ObjectVersion{Exists: true, ETag: versionTag(attrs.Generation), Token: recordedToken(attrs.Metadata)}, nil
}

// ConfirmAbsent reports whether GCS says that the bucket exists and holds
// no object named p.Key. Observe cannot tell: GCS answers an object of a
// missing bucket 404 as it answers a missing object (the client library
// makes both storage.ErrObjectNotExist, and emulators give both the same
// message), and so would a proxy's bare 404. ConfirmAbsent lists the
// bucket's objects whose names start with p.Key, at most one (the
// storage.objects.list permission that Ping needs too): a list of a
// missing bucket fails, and an object named p.Key would sort first among
// them. It reports false with no error when the object exists (it was
// created since it was observed), and an error when the list fails.
func (c *Client) ConfirmAbsent(ctx context.Context, p api.ObjectPath) (bool, error) {
	it := c.gcs.Bucket(p.Bucket).Objects(ctx, &storage.Query{Prefix: p.Key, Projection: storage.ProjectionNoACL})
	it.PageInfo().MaxSize = 1
	attrs, err := it.Next()
	switch {
	case errors.Is(err, iterator.Done):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("gcs list %s/%s, to confirm it absent: %w", p.Bucket, p.Key, mapReadError(err))
	}
	return attrs.Name != p.Key, nil
}

// writeConditions builds the precondition of in, the one place where it
// is built: ifGenerationMatch the generation of the version in replaces,
// ifGenerationMatch=0 ("does not exist") when it did not exist, none only
// when the write is UnsafeUnconditional. A version that names no
// generation is refused (errNoGeneration).
func writeConditions(in api.PutObjectInput) (storage.Conditions, bool, error) {
	switch {
	case in.UnsafeUnconditional:
		return storage.Conditions{}, false, nil
	case !in.Replaces.Exists:
		return storage.Conditions{DoesNotExist: true}, true, nil
	}
	gen, err := generationOf(in.Replaces.ETag)
	if err != nil {
		return storage.Conditions{}, false, err
	}
	return storage.Conditions{GenerationMatch: gen}, true, nil
}

// Put writes the object if in.Replaces is still its current version
// (ifGenerationMatch), in one request (a multipart upload), and returns
// the new generation as its entity tag. A lost race is
// api.ErrConcurrentModification; a Replaces that names no generation is an
// api.ErrUpstream, and nothing is sent. in.Metadata is the object's
// Metadata, CacheControl, ContentDisposition and ContentLanguage; what
// refuses names is api.ErrInvalidRequest, with nothing sent, rather than
// dropped.
func (c *Client) Put(ctx context.Context, in api.PutObjectInput) (string, error) {
	p := in.Path
	cond, conditional, err := writeConditions(in)
	if err != nil {
		return "", fmt.Errorf("gcs put %s/%s: %w: %w", p.Bucket, p.Key, api.ErrUpstream, err)
	}
	if err := refuses(in.Metadata); err != nil {
		return "", fmt.Errorf("gcs put %s/%s: %w: %w", p.Bucket, p.Key, api.ErrInvalidRequest, err)
	}
	obj := c.gcs.Bucket(p.Bucket).Object(p.Key)
	if conditional {
		obj = obj.If(cond)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // abandons the upload if the copy fails
	w := obj.NewWriter(ctx)
	// One request: the upload is applied whole, under its condition, or
	// not at all. A resumable session would apply the condition only at
	// its last chunk.
	w.ChunkSize = 0
	w.ContentType = in.ContentType
	w.CacheControl = in.Metadata.CacheControl
	w.ContentDisposition = in.Metadata.ContentDisposition
	w.ContentLanguage = in.Metadata.ContentLanguage
	w.Metadata = make(map[string]string, len(in.Metadata.User)+1)
	for name, value := range in.Metadata.User {
		w.Metadata[name] = value
	}
	w.Metadata[api.MetadataFenceToken] = in.Token.String() // the token's entry is the token's
	if _, err := io.Copy(w, in.Body); err != nil {
		cancel()
		_ = w.Close()
		return "", fmt.Errorf("gcs put %s/%s: %w", p.Bucket, p.Key, mapWriteError(err))
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("gcs put %s/%s: %w", p.Bucket, p.Key, mapWriteError(err))
	}
	return versionTag(w.Attrs().Generation), nil
}

// Delete deletes the object if its generation is still the one etag names
// (ifGenerationMatch). A lost race, including an object already gone, is
// api.ErrConcurrentModification. An etag that names no generation is an
// api.ErrUpstream, and nothing is sent: no delete goes out unconditional.
//
// fake-gcs-server v1.56.1 ignores ifGenerationMatch on deletes (see
// docs/gcs.md); GCS itself answers 412.
func (c *Client) Delete(ctx context.Context, p api.ObjectPath, etag string) error {
	gen, err := generationOf(etag)
	if err != nil {
		return fmt.Errorf("gcs delete %s/%s: %w: %w", p.Bucket, p.Key, api.ErrUpstream, err)
	}
	err = c.gcs.Bucket(p.Bucket).Object(p.Key).If(storage.Conditions{GenerationMatch: gen}).Delete(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return fmt.Errorf("gcs delete %s/%s: %w: %w", p.Bucket, p.Key, api.ErrConcurrentModification, err)
	}
	if err != nil {
		return fmt.Errorf("gcs delete %s/%s: %w", p.Bucket, p.Key, mapWriteError(err))
	}
	return nil
}

// readAttempts bounds the reads of Get that find the generation they
// decided on overwritten before its bytes were read.
const readAttempts = 3

// Get reads the object, or the range of it that in.Range names, if in's
// preconditions hold. It reads the object's attributes, decides the
// preconditions on them (see decide), then reads the bytes of that
// generation only, so that the answer's body, ETag and token are of one
// version; if it was overwritten in between, it starts again, at most
// readAttempts times. The caller closes the Body.
func (c *Client) Get(ctx context.Context, in api.GetObjectInput) (*api.Object, error) {
	p := in.Path
	for attempt := 1; ; attempt++ {
		attrs, current, err := c.decided(ctx, in)
		if err != nil || current.NotModified {
			return current, err
		}
		offset, length, err := byteRange(in.Range, attrs.Size)
		if err != nil {
			return nil, fmt.Errorf("gcs get %s/%s: %w", p.Bucket, p.Key, err)
		}
		r, err := c.gcs.Bucket(p.Bucket).Object(p.Key).Generation(attrs.Generation).NewRangeReader(ctx, offset, length)
		if errors.Is(err, storage.ErrObjectNotExist) && attempt < readAttempts {
			continue // overwritten or deleted since: decide again
		}
		if err != nil {
			return nil, fmt.Errorf("gcs get %s/%s: %w", p.Bucket, p.Key, mapReadError(err))
		}
		current.Body, current.Size = r, r.Remain()
		if in.Range != "" {
			start := offset
			if offset < 0 {
				start = attrs.Size + offset
			}
			current.ContentRange = fmt.Sprintf("bytes %d-%d/%d", start, start+current.Size-1, attrs.Size)
		}
		return current, nil
	}
}

// Head reads the object's metadata, if in's preconditions hold (in.Range
// is ignored). Its answers are Get's, without a Body.
func (c *Client) Head(ctx context.Context, in api.GetObjectInput) (*api.Object, error) {
	_, obj, err := c.decided(ctx, in)
	return obj, err
}

// decided reads the object's attributes and decides in's preconditions on
// them, as RFC 9110 section 13.2.2 orders them: a failed If-Match (or,
// without one, If-Unmodified-Since) is api.ErrPreconditionFailed; then a
// matching If-None-Match (or, without one, an If-Modified-Since the object
// was not modified after) is a result, Object.NotModified. Entity tags are
// generations (versionTag). GCS's JSON API takes no entity tags in its
// preconditions, only generation numbers, hence the decision here.
func (c *Client) decided(ctx context.Context, in api.GetObjectInput) (*storage.ObjectAttrs, *api.Object, error) {
	p := in.Path
	attrs, err := c.gcs.Bucket(p.Bucket).Object(p.Key).Attrs(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("gcs attrs %s/%s: %w", p.Bucket, p.Key, mapReadError(err))
	}
	obj := &api.Object{
		Size:         attrs.Size,
		ContentType:  attrs.ContentType,
		ETag:         versionTag(attrs.Generation),
		LastModified: attrs.Updated,
		Metadata:     metadataOf(attrs),
		Token:        recordedToken(attrs.Metadata),
	}
	modified := func(since time.Time) bool { return obj.LastModified.Truncate(time.Second).After(since) }
	switch {
	case in.IfMatch != "" && !matchesEntityTag(in.IfMatch, obj.ETag, false),
		in.IfMatch == "" && !in.IfUnmodifiedSince.IsZero() && modified(in.IfUnmodifiedSince):
		return nil, nil, fmt.Errorf("gcs get %s/%s: %w", p.Bucket, p.Key, api.ErrPreconditionFailed)
	case in.IfNoneMatch != "" && matchesEntityTag(in.IfNoneMatch, obj.ETag, true),
		in.IfNoneMatch == "" && !in.IfModifiedSince.IsZero() && !modified(in.IfModifiedSince):
		obj.NotModified, obj.Size, obj.ContentType = true, 0, ""
	}
	return attrs, obj, nil
}

// byteRange turns a canonical range ("bytes=2-5", "bytes=7-", "bytes=-3")
// of an object of size bytes into NewRangeReader's offset and length (a
// negative offset counts from the end, length -1 means to the end). A
// range that starts past the end is api.ErrRangeNotSatisfiable; an empty
// range is the whole object.
func byteRange(r string, size int64) (offset, length int64, err error) {
	if r == "" {
		return 0, -1, nil
	}
	spec, ok := strings.CutPrefix(r, "bytes=")
	first, last, dash := strings.Cut(spec, "-")
	if !ok || !dash {
		return 0, 0, fmt.Errorf("%w: range %q", api.ErrUpstream, r)
	}
	unsatisfiable := fmt.Errorf("%w: range %q of %d bytes", api.ErrRangeNotSatisfiable, r, size)
	if first == "" { // suffix: the last n bytes
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n <= 0 || size == 0 {
			return 0, 0, unsatisfiable
		}
		return -min(n, size), -1, nil
	}
	start, err := strconv.ParseInt(first, 10, 64)
	if err != nil || start >= size {
		return 0, 0, unsatisfiable
	}
	if last == "" {
		return start, -1, nil
	}
	end, err := strconv.ParseInt(last, 10, 64)
	if err != nil || end < start {
		return 0, 0, unsatisfiable
	}
	return start, min(end, size-1) - start + 1, nil
}

// matchesEntityTag reports whether list ("*" or comma-separated entity
// tags) matches etag, by weak or strong comparison (RFC 9110 section
// 8.8.3.2). Generations are strong tags.
func matchesEntityTag(list, etag string, weak bool) bool {
	if strings.TrimSpace(list) == "*" {
		return true
	}
	for _, tag := range strings.Split(list, ",") {
		tag = strings.TrimSpace(tag)
		if strings.HasPrefix(tag, "W/") {
			if !weak {
				continue
			}
			tag = tag[2:]
		}
		if tag == etag {
			return true
		}
	}
	return false
}

// recordedToken returns the token a fenced write recorded on an object, or
// zero when there is none or it is not a valid token.
func recordedToken(meta map[string]string) api.Token {
	if t, err := api.ParseToken(meta[api.MetadataFenceToken]); err == nil {
		return t
	}
	return 0
}

// refuses says why a GCS object cannot keep m, or nil: GCS has no
// Expires and no object tags, and serves an object with a Content-Encoding decoded
// (decompressive transcoding; the JSON API reads of this package cannot
// ask for the stored bytes), which would answer a Content-Encoding with
// bytes not in it. Put refuses such a write before sending it; the S3
// front door refuses it before the fence check (package s3api, which
// knows the bucket's store but not this package).
func refuses(m api.ObjectMetadata) error {
	switch {
	case m.Expires != "":
		return errors.New("GCS keeps no Expires")
	case m.ContentEncoding != "":
		return errors.New("the gateway stores no Content-Encoding in GCS, which would serve the object decoded")
	case len(m.Tags) != 0:
		return errors.New("GCS objects have no tags")
	}
	return nil
}

// metadataOf is an object's metadata but its token and Content-Encoding
// (see refuses).
func metadataOf(attrs *storage.ObjectAttrs) api.ObjectMetadata {
	m := api.ObjectMetadata{
		CacheControl:       attrs.CacheControl,
		ContentDisposition: attrs.ContentDisposition,
		ContentLanguage:    attrs.ContentLanguage,
	}
	for name, value := range attrs.Metadata {
		if name == api.MetadataFenceToken {
			continue
		}
		if m.User == nil {
			m.User = make(map[string]string, len(attrs.Metadata))
		}
		m.User[name] = value
	}
	return m
}

// mapWriteError maps the failure of a conditional write: GCS's 412
// (conditionNotMet: the generation changed) and 409 (a concurrent change
// of the same object) mean "someone else wrote first"; 404 is a bucket
// that does not exist.
func mapWriteError(err error) error {
	switch statusCode(err) {
	case http.StatusPreconditionFailed, http.StatusConflict:
		return fmt.Errorf("%w: %w", api.ErrConcurrentModification, err)
	case http.StatusNotFound:
		return fmt.Errorf("%w: %w", api.ErrNotFound, err)
	}
	if errors.Is(err, storage.ErrBucketNotExist) {
		return fmt.Errorf("%w: %w", api.ErrNotFound, err)
	}
	return upstream.Transport(err)
}

// mapReadError maps the failure of a read: 404 (object or bucket),
// and 412 and 416, which the client library may answer with.
func mapReadError(err error) error {
	if errors.Is(err, storage.ErrObjectNotExist) || errors.Is(err, storage.ErrBucketNotExist) {
		return fmt.Errorf("%w: %w", api.ErrNotFound, err)
	}
	return upstream.ReadStatus(statusCode(err), err)
}

// statusCode is the HTTP status of GCS's answer; 0 if none.
func statusCode(err error) int {
	var gerr *googleapi.Error
	if errors.As(err, &gerr) {
		return gerr.Code
	}
	return 0
}
