package s3api

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/fence"
)

// The token's spellings: the object's user metadata (what S3 clients send
// with --metadata fence-token=N and the like), and the REST API's header.
const (
	headerMetaFenceToken = "X-Amz-Meta-Fence-Token"
	queryMetaFenceToken  = "x-amz-meta-fence-token" // compared without case
)

// fenceToken reads the request's fencing token from every place it may
// be: the X-Amz-Meta-Fence-Token and X-Fence-Token headers, and
// X-Amz-Meta-Fence-Token in the query (a presigned URL carries the
// metadata it signed there). Each place holds at most one value, with the
// REST API's grammar (api.ParseToken); places that hold different tokens
// are refused (InvalidArgument), so that no reader of the request can
// take another token than the fence checked. X-Fence-Token must be signed
// (x-amz-* headers, and the query, always are). No token anywhere is
// api.ErrMissingToken.
func fenceToken(r *http.Request, query url.Values, signedHeaders []string) (api.Token, error) {
	var (
		token api.Token
		from  string
	)
	take := func(place string, values []string) error {
		if len(values) == 0 {
			return nil
		}
		if len(values) > 1 {
			return fmt.Errorf("%w: %d values of %s, want exactly one", api.ErrMalformedToken, len(values), place)
		}
		t, err := api.ParseToken(values[0])
		if err != nil {
			return fmt.Errorf("%s: %w", place, err)
		}
		if token != 0 && t != token {
			return fmt.Errorf("%w: %s says %s and %s says %s: send one token", errInvalidArgument, from, token, place, t)
		}
		token, from = t, place
		return nil
	}
	if values := r.Header.Values(api.HeaderFenceToken); len(values) > 0 && !slices.Contains(signedHeaders, "x-fence-token") {
		return 0, fmt.Errorf("%w: %s is not signed: add it to the signed headers, or send x-amz-meta-fence-token", api.ErrUnauthorized, api.HeaderFenceToken)
	}
	if err := take(headerMetaFenceToken+" header", r.Header.Values(headerMetaFenceToken)); err != nil {
		return 0, err
	}
	if err := take(api.HeaderFenceToken+" header", r.Header.Values(api.HeaderFenceToken)); err != nil {
		return 0, err
	}
	var queryValues []string
	for name, values := range query {
		if strings.EqualFold(name, queryMetaFenceToken) {
			queryValues = append(queryValues, values...)
		}
	}
	if err := take(headerMetaFenceToken+" query parameter", queryValues); err != nil {
		return 0, err
	}
	if token == 0 {
		return 0, fmt.Errorf("%w: send it as x-amz-meta-fence-token (e.g. aws s3 cp --metadata fence-token=N) or %s", api.ErrMissingToken, api.HeaderFenceToken)
	}
	return token, nil
}

// refuseWriteConditions refuses the headers of a write that the door
// cannot honour rather than drop (refuseWriteHeaders), and a client's own
// If-Match or If-None-Match: PutObject and CompleteMultipartUpload honour
// them (writeCondition), the other writes (DeleteObject, CopyObject,
// CreateMultipartUpload) do not.
func refuseWriteConditions(h http.Header) error {
	for _, name := range []string{"If-Match", "If-None-Match"} {
		if _, ok := h[name]; ok {
			return fmt.Errorf("%w: the gateway does not honour %s on this write", errNotImplemented, name)
		}
	}
	return refuseWriteHeaders(h)
}

// refuseWriteHeaders refuses the headers of a write that the door cannot
// honour rather than drop: object lock, grants, and any canned ACL but
// "private" (server-side encryption is served: sse.go). x-amz-tagging
// is the operations' own: stored by those that store an object
// (writeTags), refused by the others (refuseTagging). Dropping any of them would do
// something else than the client asked for. x-amz-acl: private (rclone
// sends it on every upload) asks for what every object the gateway writes
// gets anyway: its owner is the gateway's own credentials' account, and
// nobody else is granted anything.
func refuseWriteHeaders(h http.Header) error {
	for _, name := range []string{"X-Amz-Object-Lock-Mode", "X-Amz-Object-Lock-Retain-Until-Date",
		"X-Amz-Object-Lock-Legal-Hold", "X-Amz-Website-Redirect-Location", "X-Amz-Grant-Full-Control", "X-Amz-Grant-Read",
		"X-Amz-Grant-Read-Acp", "X-Amz-Grant-Write-Acp"} {
		if _, ok := h[name]; ok {
			return fmt.Errorf("%w: the gateway does not honour %s on a write", errNotImplemented, name)
		}
	}
	for _, v := range h["X-Amz-Acl"] {
		if strings.TrimSpace(v) != "private" {
			return fmt.Errorf("%w: the gateway does not honour X-Amz-Acl %q on a write (only private, what every object it writes gets)", errNotImplemented, v)
		}
	}
	return nil
}

// putObject is PutObject: the gateway's fenced write (fence.Engine.PutFenced)
// of the verified body.
func (s *server) putObject(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	path, token, err := s.fencedTarget(ctx, r, rq, edge.OpWrite)
	if err == nil {
		err = refuseWriteHeaders(r.Header)
	}
	var cond fence.WriteCondition
	if err == nil {
		cond, err = writeCondition(r)
	}
	var meta api.ObjectMetadata
	if err == nil {
		meta, err = objectMetadata(r, rq.query, token, path.Store)
	}
	if err == nil {
		meta.Tags, err = writeTags(r.Header, path.Store) // tagging.go
	}
	var encryption api.Encryption
	if err == nil {
		encryption, err = writeEncryption(r.Header, path.Store) // sse.go
	}
	var body io.Reader = rq.auth.Body
	if err == nil {
		body, err = contentMD5(r.Header, body)
	}
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	res, err := s.engine.PutFenced(ctx, fence.PutRequest{
		Path:        path,
		Token:       token,
		Body:        body,
		Size:        rq.auth.DecodedContentLength,
		ContentType: contentTypeOf(r.Header),
		Metadata:    meta,
		Condition:   cond,
		Encryption:  encryption,
	})
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	setEncryptionAnswer(w.Header(), res.Encryption)
	w.Header().Set("ETag", res.ETag)
	w.Header().Set(api.HeaderFenceToken, res.Token.String())
	if n := rq.auth.DecodedContentLength; n >= 0 {
		// The size written, as versitygw and S3 Express answer it (the
		// SDKs' PutObjectOutput.Size); the verifier held the body to
		// exactly this length.
		w.Header().Set("X-Amz-Object-Size", strconv.FormatInt(n, 10))
	}
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// writeCondition reads the client's own precondition of a PutObject or
// CompleteMultipartUpload, as S3 takes it: If-None-Match: * (create
// only) and If-Match with one entity tag or "*", an ETag without its
// quotes compared as the quoted one (withQuotedEntityTags). The gateway
// composes it with its own condition (fence.WriteCondition): the write
// happens only if both hold, else 412 PreconditionFailed and nothing
// changes. A malformed or empty field, or several tags, is
// InvalidRequest; If-None-Match with an entity tag is NotImplemented, as
// on S3, which takes only "*" on a write. Neither field need be signed:
// a condition can only keep a write from happening, never make one
// happen.
func writeCondition(r *http.Request) (fence.WriteCondition, error) {
	h := withQuotedEntityTags(r).Header
	var cond fence.WriteCondition
	for _, name := range []string{"If-Match", "If-None-Match"} {
		fields, ok := h[name]
		if !ok {
			continue
		}
		tag, err := edge.EntityTag(fields)
		if err == nil && tag == "" {
			err = errors.New("no entity tag")
		}
		if err != nil {
			return cond, fmt.Errorf("%w: %s: %w", api.ErrInvalidRequest, name, err)
		}
		if name == "If-Match" {
			cond.IfMatch = tag
		} else if tag != "*" {
			return cond, fmt.Errorf("%w: If-None-Match on a write takes only *", errNotImplemented)
		} else {
			cond.IfNoneMatch = true
		}
	}
	return cond, nil
}

// fencedTarget validates the object of a fenced write, checks that the
// identity may do op to it, and reads its token: authorization first, so
// that a caller that may not write learns nothing of the object.
func (s *server) fencedTarget(ctx context.Context, r *http.Request, rq *request, op edge.Operation) (api.ObjectPath, api.Token, error) {
	path, err := s.objectPath(rq.bucket, rq.key)
	if err != nil {
		return api.ObjectPath{}, 0, err
	}
	if err := s.edge.Authorize(ctx, op, path.Resource()); err != nil {
		return api.ObjectPath{}, 0, err
	}
	token, err := fenceToken(r, rq.query, rq.auth.SignedHeaders)
	rq.token = token
	return path, token, err
}

// readWhole reads a body that the door parses only once it has all of
// it (a CompleteMultipartUpload's or a DeleteObjects' XML) into memory
// reserved from the budget of buffered bodies, as a PUT's body is
// (fence.Engine.BufferWhole): up to max bytes and one past, which the
// caller refuses. body reads r's, which is under the transfer deadlines
// (edge.Edge.WatchBody), whose stall it then names. Without the budget,
// the requests a client may have at once, each holding most of such a
// body, would be memory that no limit counts. The caller releases what
// it returns once it has parsed it.
func (s *server) readWhole(r *http.Request, body io.Reader, max int64) (*fence.Buffered, error) {
	watch, _ := r.Body.(fence.Watch)
	return s.engine.BufferWhole(body, -1, max, watch)
}

// objectPath validates bucket and key (api.ParseObjectPath, with S3's
// error for a key too long) and names the bucket's store
// (fence.Engine.StoreOf). Other failures are api.ErrInvalidObjectPath.
func (s *server) objectPath(bucket, key string) (api.ObjectPath, error) {
	if len(key) > api.MaxKeyBytes {
		return api.ObjectPath{}, fmt.Errorf("%w: the key is %d bytes, limit %d", errKeyTooLong, len(key), api.MaxKeyBytes)
	}
	p, err := api.ParseObjectPath(bucket, key)
	if err != nil {
		return p, err
	}
	p.Store = s.engine.StoreOf(bucket)
	return p, nil
}

// objectResource names the resource of key in bucket as every door
// names it: "<store>/<bucket>/<key>", in the store that holds the bucket,
// so that an object of a GCS bucket is "gcs/..." whichever API asked.
// Authorization, audit lines and the event feed take an object's
// resource from here (or from objectPath, for a path already validated):
// a refusal named "s3/..." for a GCS bucket would go to the subscribers
// who may read S3 objects, and not to those who may read the bucket.
// bucket and key are not validated: a refusal names what the request
// named; key "" names the bucket's prefix (a DeleteObjects refused
// whole).
func (s *server) objectResource(bucket, key string) api.Resource {
	return api.ObjectPath{Store: s.engine.StoreOf(bucket), Bucket: bucket, Key: key}.Resource()
}

// contentMD5 returns body checked against the request's Content-MD5, when
// it has one: the last byte is held back until the whole body matched,
// so that a store reading a body of fixed length never gets all of one
// that did not (BadDigest), and nothing is stored.
func contentMD5(h http.Header, body io.Reader) (io.Reader, error) {
	values := h.Values("Content-Md5")
	if len(values) == 0 {
		return body, nil
	}
	want, err := base64.StdEncoding.DecodeString(values[0])
	if len(values) > 1 || err != nil || len(want) != md5.Size {
		return nil, fmt.Errorf("%w: Content-MD5 must be one base64 MD5 digest", errInvalidDigest)
	}
	if body == http.NoBody {
		// A verified body of length zero (sigv4.Result.Body) has no last
		// byte to hold back, and a store sent no bytes never reads to
		// the end: check it now.
		if empty := md5.Sum(nil); !bytes.Equal(empty[:], want) {
			return nil, fmt.Errorf("%w: the body does not match its Content-MD5", errBadDigest)
		}
		return body, nil
	}
	return &md5Body{body: body, want: want, hash: md5.New()}, nil
}

// md5Body is a body checked against a Content-MD5 as it is read, holding
// back its last byte until the check passed.
type md5Body struct {
	body     io.Reader
	want     []byte
	hash     hash.Hash
	buf      []byte
	held     byte
	hasHeld  bool
	verified bool  // the body ended and matched: only held is left
	err      error // the body's end or failure, once reached
}

func (m *md5Body) Read(p []byte) (int, error) {
	switch {
	case m.verified && m.hasHeld && len(p) > 0:
		p[0], m.hasHeld = m.held, false
		return 1, io.EOF
	case m.verified:
		return 0, io.EOF
	case m.err != nil:
		return 0, m.err
	case len(p) == 0:
		return 0, nil
	}
	if cap(m.buf) < len(p)+1 {
		m.buf = make([]byte, len(p)+1)
	}
	buf := m.buf[:len(p)+1]
	n := 0
	if m.hasHeld {
		buf[0], n = m.held, 1
	}
	k, err := m.body.Read(buf[n:])
	m.hash.Write(buf[n : n+k])
	n += k
	switch {
	case err == io.EOF:
		if !bytes.Equal(m.hash.Sum(nil), m.want) {
			m.err = fmt.Errorf("%w: the body does not match its Content-MD5", errBadDigest)
			return 0, m.err
		}
		m.verified = true
		if n > len(p) {
			m.held, m.hasHeld = buf[n-1], true
			return copy(p, buf[:n-1]), nil
		}
		m.hasHeld = false
		return copy(p, buf[:n]), io.EOF
	case err != nil:
		m.err = err
		return 0, err
	case n == 0:
		return 0, nil
	}
	m.held, m.hasHeld = buf[n-1], true
	return copy(p, buf[:n-1]), nil
}

// defaultContentType is what S3 stores for an object written without a
// Content-Type (PutObject, CopyObject with REPLACE). The REST API leaves
// it to the store's client (the gateway's S3 client sends
// application/octet-stream).
const defaultContentType = "binary/octet-stream"

// contentTypeOf is the Content-Type a write stores: the request's, or S3's
// default.
func contentTypeOf(h http.Header) string {
	if v := h.Get("Content-Type"); v != "" {
		return v
	}
	return defaultContentType
}

// getObject is GetObject and HeadObject: the gateway's read, with the
// client's Range and conditional headers as the REST API validates them,
// or one part of the object (partNumber; read.go).
func (s *server) getObject(w http.ResponseWriter, r *http.Request, rq *request) {
	head := r.Method == http.MethodHead
	path, err := s.objectPath(rq.bucket, rq.key)
	var in api.GetObjectInput
	if err == nil {
		in, err = s.readInput(r, rq.query, path) // read.go
	}
	var obj *api.Object
	if err == nil {
		obj, err = s.readObject(r.Context(), in, head)
	}
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	if obj.Body != nil {
		defer obj.Body.Close()
	}
	h := w.Header()
	h.Set("ETag", obj.ETag)
	if !obj.LastModified.IsZero() {
		h.Set("Last-Modified", obj.LastModified.UTC().Format(http.TimeFormat))
	}
	if obj.Token != 0 {
		h.Set(api.HeaderFenceToken, obj.Token.String())
	}
	if obj.NotModified {
		// RFC 9110 section 15.4.5: a 304 carries the Cache-Control and
		// Expires that the 200 would (a cache refreshes its entry from
		// them), and none of the object's other metadata. versitygw's
		// 304 carries neither; the store's answer has the current
		// version's (api.Object.Metadata).
		if v := obj.Metadata.CacheControl; v != "" {
			h["Cache-Control"] = []string{v}
		}
		if v := obj.Metadata.Expires; v != "" {
			h["Expires"] = []string{v}
		}
		w.WriteHeader(http.StatusNotModified)
		return
	}
	setMetadataHeaders(h, obj.Metadata, obj.Token)
	setEncryptionAnswer(h, obj.Encryption)
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Length", strconv.FormatInt(obj.Size, 10))
	if obj.ContentType != "" {
		h.Set("Content-Type", obj.ContentType)
	}
	if obj.PartsCount != 0 {
		h.Set("X-Amz-Mp-Parts-Count", strconv.FormatInt(int64(obj.PartsCount), 10))
	}
	if obj.StorageClass != "" {
		h.Set("X-Amz-Storage-Class", obj.StorageClass)
	}
	// The store's checksums, when the client asked for them
	// (x-amz-checksum-mode: ENABLED, see read.go), as S3 answers them: an
	// SDK that asked validates the body against one, and warns on every
	// read that carries none.
	for _, c := range api.ChecksumHeaders {
		if v := *c.Field(&obj.Checksums); v != "" {
			h.Set(c.Name, v)
		}
	}
	status := http.StatusOK
	if obj.ContentRange != "" {
		h.Set("Content-Range", obj.ContentRange)
		status = http.StatusPartialContent
	}
	w.WriteHeader(status)
	if obj.Body != nil && !head {
		if _, err := s.edge.CopyToClient(w, obj.Body); err != nil {
			s.log.WarnContext(r.Context(), "s3 object read interrupted", "request_id", rq.id, "bucket", path.Bucket, "key", path.Key, "err", err)
		}
	}
}

// deleteObject is DeleteObject: the gateway's fenced delete. Deleting an
// absent key succeeds (204), as on S3.
func (s *server) deleteObject(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	path, token, err := s.fencedTarget(ctx, r, rq, edge.OpDelete)
	if err == nil {
		err = refuseWriteConditions(r.Header)
	}
	if err == nil {
		err = refuseTagging(r.Header)
	}
	if err == nil {
		err = s.engine.DeleteFenced(ctx, path, token)
	}
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	w.Header().Set(api.HeaderFenceToken, token.String())
	w.WriteHeader(http.StatusNoContent)
}

// Bounds of DeleteObjects: S3's 1,000 keys, and a body that holds them
// (1,024-byte keys, XML-escaped, in their elements).
const (
	maxDeleteKeys      = 1000
	maxDeleteBodyBytes = 2 << 20
	// deleteWorkers bounds the keys of one DeleteObjects being deleted
	// at once.
	deleteWorkers = 8
)

// deleteObjects is DeleteObjects: each key is deleted by the gateway's
// fenced delete on its own, with the request's token, and gets its own
// <Deleted> or <Error>. The body is read whole (bounded), and parsed only
// once package sigv4 verified it.
func (s *server) deleteObjects(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	if rq.auth.DecodedContentLength > maxDeleteBodyBytes {
		s.writeError(w, r, rq, fmt.Errorf("%w: a DeleteObjects body is at most %d bytes", errEntityTooLarge, maxDeleteBodyBytes))
		return
	}
	token, err := fenceToken(r, rq.query, rq.auth.SignedHeaders)
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	rq.token = token
	body, err := contentMD5(r.Header, rq.auth.Body)
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	held, err := s.readWhole(r, body, maxDeleteBodyBytes)
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	tooLarge := held.Size() > maxDeleteBodyBytes
	var req deleteRequest
	if !tooLarge {
		err = xml.Unmarshal(held.Bytes(), &req)
	}
	held.Release() // now: the deletes may take a while
	if tooLarge {
		s.writeError(w, r, rq, fmt.Errorf("%w: a DeleteObjects body is at most %d bytes", errEntityTooLarge, maxDeleteBodyBytes))
		return
	}
	if err != nil {
		s.writeError(w, r, rq, fmt.Errorf("%w: %v", errMalformedXML, err))
		return
	}
	if len(req.Objects) == 0 || len(req.Objects) > maxDeleteKeys {
		s.writeError(w, r, rq, fmt.Errorf("%w: %d objects; a DeleteObjects names 1 to %d", errMalformedXML, len(req.Objects), maxDeleteKeys))
		return
	}
	results := make([]error, len(req.Objects))
	// Each worker has a request context of its own (edge.Edge.WithIdentity
	// on a context already identified): the gateway notes what a request
	// checked in its context, one goroutine per context. Each key that
	// is deleted is published on the event feed from there.
	workerCtxs := make([]context.Context, min(deleteWorkers, len(req.Objects)))
	for i := range workerCtxs {
		if workerCtxs[i], err = s.edge.WithIdentity(ctx, rq.auth.Identity, rq.id); err != nil {
			s.writeError(w, r, rq, err)
			return
		}
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for _, workerCtx := range workerCtxs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = s.deleteOne(workerCtx, rq.bucket, req.Objects[i].Key, req.Objects[i].VersionID, token)
				if results[i] != nil {
					// Counted and audited with what the worker's own
					// exchange noted (where a stale token was caught).
					s.edge.NoteRefusal(workerCtx, true, s.objectResource(rq.bucket, req.Objects[i].Key), token, results[i])
				}
			}
		}()
	}
	for i := range req.Objects {
		next <- i
	}
	close(next)
	wg.Wait()
	out := deleteResult{Xmlns: s3Namespace}
	for i, o := range req.Objects {
		err := results[i]
		if err == nil {
			if !req.Quiet {
				out.Deleted = append(out.Deleted, deletedObject{Key: o.Key})
			}
			continue
		}
		c, message := s3ErrorOf(err)
		if c.status >= 500 {
			s.log.ErrorContext(ctx, "s3 delete of one key failed", "request_id", rq.id, "key", o.Key, "err", err)
		}
		e := deleteError{Key: o.Key, Code: c.code, Message: message}
		var stale *api.StaleTokenError
		if errors.As(err, &stale) {
			e.HighWaterMark = stale.HighWaterMark.String()
		}
		out.Errors = append(out.Errors, e)
	}
	writeXML(w, http.StatusOK, out)
}

// deleteOne is one key of a DeleteObjects.
func (s *server) deleteOne(ctx context.Context, bucket, key, versionID string, token api.Token) error {
	if versionID != "" {
		return fmt.Errorf("%w: versionId", errNotImplemented)
	}
	path, err := s.objectPath(bucket, key)
	if err != nil {
		return err
	}
	return s.engine.DeleteFenced(ctx, path, token)
}

// copyObject is CopyObject: the source is read with the read grant, and
// its bytes written to the destination by the gateway's fenced write,
// with the request's token. The destination records the request's token,
// and the source's content type and metadata (x-amz-metadata-directive
// COPY, the default) or the request's (REPLACE), as on S3; either is held
// to PutObject's rules (checkStored) before the fence check. With COPY the
// request's own user metadata, which is not stored, is still held to the
// 2 KiB (checkSentMetadataSize): S3 refuses it whatever the directive.
func (s *server) copyObject(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	discardBody(rq.auth.Body)
	dst, token, err := s.fencedTarget(ctx, r, rq, edge.OpWrite)
	if err == nil {
		err = refuseWriteConditions(r.Header)
	}
	var src api.GetObjectInput
	if err == nil {
		src, err = s.copySource(r)
	}
	replace := false
	var meta api.ObjectMetadata
	if err == nil {
		switch d := r.Header.Get("X-Amz-Metadata-Directive"); d {
		case "", "COPY":
			err = checkSentMetadataSize(r, rq.query)
		case "REPLACE":
			replace = true
			meta, err = objectMetadata(r, rq.query, token, dst.Store)
		default:
			err = fmt.Errorf("%w: x-amz-metadata-directive %q", errInvalidArgument, api.Truncate(d, 40))
		}
	}
	replaceTags := false
	var tags map[string]string
	if err == nil {
		replaceTags, err = tagsDirective(r.Header) // tagging.go
	}
	if err == nil && replaceTags {
		tags, err = writeTags(r.Header, dst.Store)
	}
	var encryption api.Encryption
	if err == nil {
		encryption, err = writeEncryption(r.Header, dst.Store) // sse.go
	}
	if err == nil {
		src.Customer, err = copySourceKey(r.Header, src.Path.Store)
	}
	for _, name := range []string{"X-Amz-Copy-Source-Range"} {
		if _, ok := r.Header[name]; ok && err == nil {
			err = fmt.Errorf("%w: the gateway does not honour %s", errNotImplemented, name)
		}
	}
	if err == nil && !replace && src.Path.Bucket == dst.Bucket && src.Path.Key == dst.Key && r.Header.Get("X-Amz-Storage-Class") == "" && encryption == (api.Encryption{}) {
		err = errCopyToItself
	}
	if err == nil {
		// A stale token is refused before the source is read.
		_, err = s.engine.Admit(ctx, edge.OpWrite, dst, token)
	}
	var obj *api.Object
	if err == nil {
		obj, err = s.engine.ReadObject(ctx, src, false)
	}
	if err == nil && obj.NotModified {
		// S3 answers a copy whose x-amz-copy-source-if-none-match or
		// -if-modified-since failed with 412.
		err = fmt.Errorf("%w: the copy source's precondition failed", api.ErrPreconditionFailed)
	}
	if err != nil {
		if obj != nil && obj.Body != nil {
			obj.Body.Close()
		}
		s.writeError(w, r, rq, err)
		return
	}
	defer obj.Body.Close()
	contentType := obj.ContentType
	if replace {
		contentType = contentTypeOf(r.Header)
	} else {
		// Before PutFenced raises the mark: a source that S3 took may
		// still be refused as the copy's metadata.
		meta = obj.Metadata
		if err := checkStored(meta, token, dst.Store); err != nil {
			s.writeError(w, r, rq, err)
			return
		}
	}
	if !replaceTags {
		// The source's tags, read apart from its bytes (S3 answers them
		// to a request of their own): a write of the source in between
		// gives the copy that version's tags.
		if tags, err = s.sourceTags(ctx, src.Path, dst.Store); err != nil {
			s.writeError(w, r, rq, err)
			return
		}
	}
	meta.Tags = tags
	res, err := s.engine.PutFenced(ctx, fence.PutRequest{Path: dst, Token: token, Body: obj.Body, Size: obj.Size, ContentType: contentType, Metadata: meta, Encryption: encryption})
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	setEncryptionAnswer(w.Header(), res.Encryption)
	w.Header().Set(api.HeaderFenceToken, res.Token.String())
	writeXML(w, http.StatusOK, copyObjectResult{ETag: res.ETag, LastModified: time.Now().UTC().Format("2006-01-02T15:04:05.000Z")})
}

// errCopyToItself is S3's refusal of a CopyObject onto its own source that
// changes nothing S3 keeps (x-amz-metadata-directive COPY, no storage
// class; a website redirect and encryption are refused before): 400
// InvalidRequest, with S3's message.
var errCopyToItself = &causeError{class: api.ErrInvalidRequest, message: copyToItselfMessage}

// copyToItselfMessage is S3's message of errCopyToItself.
const copyToItselfMessage = "This copy request is illegal because it is trying to copy an object to itself without changing " +
	"the object's metadata, storage class, website redirect location or encryption attributes."

// copySource parses x-amz-copy-source ("bucket/key" or "/bucket/key",
// URL-encoded, as S3 takes it) and its conditions into the read of the
// source. A versionId is refused: the gateway reads current versions only.
func (s *server) copySource(r *http.Request) (api.GetObjectInput, error) {
	values := r.Header.Values("X-Amz-Copy-Source")
	if len(values) != 1 {
		return api.GetObjectInput{}, fmt.Errorf("%w: want one x-amz-copy-source", errInvalidArgument)
	}
	raw, query, hasQuery := strings.Cut(values[0], "?")
	if hasQuery {
		q, err := url.ParseQuery(query)
		if err != nil || len(q) != 1 || !q.Has("versionId") {
			return api.GetObjectInput{}, fmt.Errorf("%w: x-amz-copy-source takes no query but versionId", errInvalidArgument)
		}
		return api.GetObjectInput{}, fmt.Errorf("%w: copying a version (versionId) of the source", errNotImplemented)
	}
	decoded, err := url.PathUnescape(raw)
	if err != nil {
		return api.GetObjectInput{}, fmt.Errorf("%w: x-amz-copy-source is not URL-encoded: %v", errInvalidArgument, err)
	}
	bucket, key, ok := strings.Cut(strings.TrimPrefix(decoded, "/"), "/")
	if !ok || key == "" {
		return api.GetObjectInput{}, fmt.Errorf("%w: x-amz-copy-source must be bucket/key", errInvalidArgument)
	}
	if _, err := api.ParseObjectPath(bucket, "k"); err != nil {
		return api.GetObjectInput{}, fmt.Errorf("%w: copy source %q", errInvalidBucketName, api.Truncate(bucket, 80))
	}
	path, err := s.objectPath(bucket, key)
	if err != nil {
		return api.GetObjectInput{}, err
	}
	// The source's conditions, read with the REST API's rules from a
	// request that carries them under their plain names.
	cond := &http.Request{Method: http.MethodHead, Header: http.Header{}}
	for from, to := range map[string]string{
		"X-Amz-Copy-Source-If-Match":            "If-Match",
		"X-Amz-Copy-Source-If-None-Match":       "If-None-Match",
		"X-Amz-Copy-Source-If-Modified-Since":   "If-Modified-Since",
		"X-Amz-Copy-Source-If-Unmodified-Since": "If-Unmodified-Since",
	} {
		if v, ok := r.Header[from]; ok {
			cond.Header[to] = v
		}
	}
	in, err := edge.ReadInput(withQuotedEntityTags(cond), path)
	if err != nil {
		return api.GetObjectInput{}, err
	}
	return in, nil
}
