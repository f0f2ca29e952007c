package s3api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/fence"
	"fencegate/s3api/sigv4"
)

// Config configures the front door.
type Config struct {
	// Region is the region clients sign for; the credential scope of
	// every request must name it. Empty means "us-east-1".
	Region string
	// Domain is the base domain of virtual-hosted-style requests: a
	// request whose Host is BUCKET.Domain addresses BUCKET. Empty means
	// path-style only: the Host header never names a bucket.
	Domain string
	// Logger receives the door's error lines. Nil means slog.Default().
	Logger *slog.Logger
}

// Deps are what the front door is built on.
type Deps struct {
	// Edge tracks, authenticates (by the identity a signature names),
	// limits, logs, counts, traces and publishes the door's requests, as
	// it does every door's. Required.
	Edge *edge.Edge
	// Engine runs the fencing protocol and the reads, as for every door.
	// Required.
	Engine *fence.Engine
	// Keys resolves access key ids to secrets and identity names; the
	// identity's grants are the gateway's for that name. Required.
	Keys sigv4.KeyStore
	// Buckets lists buckets and objects (ListObjectsV2, ListObjects,
	// ListBuckets, HeadBucket, GetBucketLocation). Nil answers those
	// NotImplemented.
	Buckets BucketLister
	// Admin creates and deletes buckets (CreateBucket, DeleteBucket) for
	// identities with an admin grant on the bucket. Nil answers those
	// NotImplemented.
	Admin BucketAdmin
}

// BucketLister sends the store the bucket reads that the door passes
// through, signed with the gateway's own credentials. backends/s3
// implements it.
type BucketLister interface {
	// BucketRequest sends method (GET or HEAD) for bucket ("" for the
	// service: ListBuckets) with query, which the door has restricted to
	// the parameters of the operation, and returns the store's answer as
	// it is, whatever its status; the caller closes its body. An error
	// means no answer (api.ErrUpstream, api.ErrUpstreamTimeout).
	BucketRequest(ctx context.Context, method, bucket string, query url.Values) (*http.Response, error)
}

// BucketAdmin creates and deletes the store's buckets, with the gateway's
// own credentials. backends/s3 implements it.
type BucketAdmin interface {
	// CreateBucket creates in.Bucket. The store's refusals are
	// *api.StoreError with its code (BucketAlreadyOwnedByYou,
	// BucketAlreadyExists); no answer is api.ErrUpstream
	// (api.ErrUpstreamTimeout).
	CreateBucket(ctx context.Context, in api.CreateBucketInput) error
	// DeleteBucket deletes bucket, which the store does only when it
	// holds no object. Its refusals are CreateBucket's (BucketNotEmpty,
	// NoSuchBucket).
	DeleteBucket(ctx context.Context, bucket string) error
}

// New returns the S3 front door for cfg, on deps.
func New(cfg Config, deps Deps) (http.Handler, error) {
	if deps.Edge == nil || deps.Engine == nil || deps.Keys == nil {
		return nil, errors.New("s3api: Deps.Edge, Deps.Engine and Deps.Keys are required")
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Domain = strings.ToLower(strings.TrimSuffix(cfg.Domain, "."))
	verifier, err := sigv4.New(sigv4.Config{Keys: deps.Keys, Region: cfg.Region})
	if err != nil {
		return nil, fmt.Errorf("s3api: %w", err)
	}
	s := &server{cfg: cfg, log: cfg.Logger, edge: deps.Edge, engine: deps.Engine, buckets: deps.Buckets, admin: deps.Admin, verifier: verifier}
	// The edge counts, times, logs and traces each request as a REST one
	// (route label and span name "s3:<operation>").
	return deps.Edge.Track(edge.Door{Name: "s3"})(s), nil
}

// server is the front door.
type server struct {
	cfg      Config
	log      *slog.Logger
	edge     *edge.Edge
	engine   *fence.Engine
	buckets  BucketLister
	admin    BucketAdmin
	verifier *sigv4.Verifier
}

// request is what the door learned of one request before its operation
// runs.
type request struct {
	id     string
	op     string // the S3 operation's name, "" until known
	bucket string // "" for the service
	key    string // "" for a bucket or the service
	// hosted says the bucket is named by Host (virtual-hosted style),
	// not by the path.
	hosted bool
	auth   *sigv4.Result
	// query is the request's query (url.ParseQuery of its raw query,
	// what it parsed of one that does not parse), parsed once for every
	// reader of the door's and the verifier.
	query url.Values
	// token is the fencing token the request carries, once read.
	token api.Token
}

// writeOps are the operations that write: their refusals are audited
// (edge.Edge.NoteRefusal). A bucket's creation and deletion are audited as
// writes of s3/BUCKET/.
var writeOps = map[string]bool{"PutObject": true, "DeleteObject": true, "DeleteObjects": true, "CopyObject": true,
	"PutObjectTagging": true, "DeleteObjectTagging": true, "CreateBucket": true, "DeleteBucket": true}

// headerRequestID is S3's request id header; X-Request-Id carries the
// same id, as on the REST API.
const headerRequestID = "X-Amz-Request-Id"

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ServeHTTP authenticates the request (Signature Version 4), picks its
// operation, and runs it as the request's identity.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// r.URL.Query() would drop the error, which Verify refuses; the
	// query is parsed once, here, for the door and the verifier.
	query, queryErr := url.ParseQuery(r.URL.RawQuery)
	rq := &request{id: edge.RequestID(r.Context()), query: query}
	if rq.id == "" { // not under the edge's Track (tests of the server alone)
		rq.id = newRequestID()
	}
	// One slice for both names: an Add to either copies it (it is
	// full), and nothing writes into it.
	ids := []string{rq.id}
	w.Header()[headerRequestID] = ids
	w.Header()["X-Request-Id"] = ids
	if err := s.edge.CheckRequestSize(r); err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	if err := checkHeaderFields(r.Header); err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	if err := s.address(r, rq); err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	handler, op := s.route(r, rq)
	rq.op = op
	edge.NoteOperation(r.Context(), op)
	if op == "NotImplemented" && isFormUpload(r, rq) {
		// A browser's POST upload is signed by the policy in its form,
		// never by SigV4: answered as S3 answers what it does not serve,
		// not as an anonymous request (403).
		handler(w, r, rq)
		return
	}
	// No temporary credentials: the gateway has no STS, so a session
	// token could only be a client's AWS credentials sent to the wrong
	// place (and sigv4 would not check it).
	if r.Header.Get("X-Amz-Security-Token") != "" || rq.query.Has("X-Amz-Security-Token") {
		s.writeError(w, r, rq, fmt.Errorf("%w: temporary credentials (X-Amz-Security-Token) are not accepted; use an access key of the gateway's auth config", errInvalidToken))
		return
	}
	// A client's check of the bucket's owner: the buckets belong to the
	// store account of the gateway's own credentials, which a client
	// neither knows nor can be told; the check is refused rather than
	// skipped, so that no client believes it was made.
	for _, name := range []string{"X-Amz-Expected-Bucket-Owner", "X-Amz-Source-Expected-Bucket-Owner"} {
		if _, ok := r.Header[name]; ok {
			discardBody(r.Body)
			s.writeError(w, r, rq, fmt.Errorf("%w: the gateway does not check %s: its buckets belong to the store account of its own credentials", errNotImplemented, name))
			return
		}
	}
	if r.Method == http.MethodPut || r.Method == http.MethodPost {
		s.edge.WatchBody(w, r)
	}
	var res *sigv4.Result
	var err error
	if queryErr == nil {
		res, err = s.verifier.VerifyQuery(r.Context(), r, rq.query)
	} else {
		res, err = s.verifier.Verify(r.Context(), r) // which refuses the query
	}
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	rq.auth = res
	ctx, err := s.edge.WithIdentity(r.Context(), res.Identity, rq.id)
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	r = r.WithContext(ctx)
	// The per-client limit (Config.MaxRequestsPerClient) counts verified
	// identities only: a request that merely names an access key was
	// refused above, and takes nothing from that identity's budget.
	release, err := s.edge.LimitClient(res.Identity)
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	defer release()
	handler(w, r, rq)
}

// maxHeaderFieldBytes is the largest header field (name and value) the
// door reads: S3's limit on a request's header section, 8 KiB. The whole
// section is held to the gateway's own limit (Config.MaxHeaderBytes,
// checked before): the door's signed token and checksums take room S3's
// clients do not count on.
const maxHeaderFieldBytes = 8 << 10

// checkHeaderFields refuses a header field above maxHeaderFieldBytes, as
// S3 refuses a header section above it (RequestHeaderSectionTooLarge),
// before the request is routed or authenticated.
func checkHeaderFields(h http.Header) error {
	for name, values := range h {
		for _, v := range values {
			if size := len(name) + len(v); size > maxHeaderFieldBytes {
				return &sizeError{class: errHeaderFieldTooLarge, what: "header " + api.Truncate(name, 80), size: size, limit: maxHeaderFieldBytes}
			}
		}
	}
	return nil
}

// address finds the bucket and key the request names: from Host when it
// is BUCKET.Domain (virtual-hosted style), else from the path's first
// segment (path-style). Without Config.Domain the Host header is never
// read, so that no client can pick a bucket by what it puts there beside
// the path.
func (s *server) address(r *http.Request, rq *request) error {
	path := r.URL.Path
	if !strings.HasPrefix(path, "/") {
		return fmt.Errorf("%w: the path must start with '/'", errInvalidArgument)
	}
	path = path[1:]
	if s.cfg.Domain != "" {
		host := strings.ToLower(r.Host)
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if bucket, ok := strings.CutSuffix(host, "."+s.cfg.Domain); ok {
			if bucket == "" {
				return fmt.Errorf("%w: empty bucket name in Host", errInvalidBucketName)
			}
			rq.bucket, rq.key, rq.hosted = bucket, path, true
			return checkAddress(rq)
		}
	}
	rq.bucket, rq.key, _ = strings.Cut(path, "/")
	return checkAddress(rq)
}

// checkAddress refuses a bucket name S3 would not create and a key longer
// than S3's limit; the rest of a key's rules are the gateway's
// (objectPath), checked by each operation.
func checkAddress(rq *request) error {
	if rq.bucket != "" {
		if _, err := api.ParseObjectPath(rq.bucket, "k"); err != nil {
			return fmt.Errorf("%w: %q", errInvalidBucketName, api.Truncate(rq.bucket, 80))
		}
	}
	if len(rq.key) > api.MaxKeyBytes {
		return fmt.Errorf("%w: the key is %d bytes, limit %d", errKeyTooLong, len(rq.key), api.MaxKeyBytes)
	}
	return nil
}

// handlerFunc runs one operation for an authenticated request.
type handlerFunc func(w http.ResponseWriter, r *http.Request, rq *request)

// Query parameters every operation accepts: the presigned URL's, and the
// operation name the AWS SDKs add (x-id). The headers a presigned URL
// may carry in its query are accepted too (sigv4.IsQueryHeader): the
// verifier refuses them anywhere else and sets them as headers.
var commonParams = map[string]bool{
	"x-id": true, "X-Amz-Algorithm": true, "X-Amz-Credential": true, "X-Amz-Date": true,
	"X-Amz-Expires": true, "X-Amz-SignedHeaders": true, "X-Amz-Signature": true,
}

// route picks the operation from the method, the query's subresources and
// headers, as S3 does, and returns its handler and name. Every request
// that is not one of the operations the door implements gets
// notImplemented: nothing unknown is passed to the store.
func (s *server) route(r *http.Request, rq *request) (handlerFunc, string) {
	q := rq.query
	has := func(name string) bool { _, ok := q[name]; return ok }
	if has("uploads") || has("uploadId") {
		return s.multipart(r, rq)
	}
	switch {
	case rq.bucket == "":
		if r.Method == http.MethodGet && onlyParams(q, "max-buckets", "continuation-token", "prefix", "bucket-region") {
			return s.listBuckets, "ListBuckets"
		}
	case rq.key == "":
		switch r.Method {
		case http.MethodGet:
			switch {
			case has("location") && onlyParams(q, "location"):
				return s.getBucketLocation, "GetBucketLocation"
			case q.Get("list-type") == "2" && onlyParams(q, "list-type", "continuation-token", "delimiter", "encoding-type", "fetch-owner", "max-keys", "prefix", "start-after"):
				return s.listObjects, "ListObjectsV2"
			case !has("list-type") && onlyParams(q, "delimiter", "encoding-type", "marker", "max-keys", "prefix"):
				return s.listObjects, "ListObjects"
			}
		case http.MethodHead:
			if onlyParams(q) {
				return s.headBucket, "HeadBucket"
			}
		case http.MethodPost:
			if has("delete") && onlyParams(q, "delete") {
				return s.deleteObjects, "DeleteObjects"
			}
		case http.MethodPut:
			if onlyParams(q) {
				return s.createBucket, "CreateBucket" // bucketadmin.go
			}
		case http.MethodDelete:
			if onlyParams(q) {
				return s.deleteBucket, "DeleteBucket"
			}
		}
	default:
		if has("tagging") && onlyParams(q, "tagging") {
			switch r.Method { // tagging.go
			case http.MethodGet:
				return s.getObjectTagging, "GetObjectTagging"
			case http.MethodPut:
				return s.putObjectTagging, "PutObjectTagging"
			case http.MethodDelete:
				return s.deleteObjectTagging, "DeleteObjectTagging"
			}
		}
		switch r.Method {
		case http.MethodPut:
			if !onlyParams(q) {
				break // PutObjectAcl, retention, legal hold...
			}
			if isCopy(r, q) {
				return s.copyObject, "CopyObject"
			}
			return s.putObject, "PutObject"
		case http.MethodGet, http.MethodHead:
			if onlyParams(q, readParams...) {
				if r.Method == http.MethodHead {
					return s.getObject, "HeadObject"
				}
				return s.getObject, "GetObject"
			}
		case http.MethodDelete:
			if onlyParams(q) {
				return s.deleteObject, "DeleteObject"
			}
		}
	}
	return s.notImplemented, "NotImplemented"
}

// isCopy reports whether a PUT names a source to copy: x-amz-copy-source
// as a header or, as presigners move it, in the query, in any spelling
// (the verifier reads it from there as the header, once the signature
// over the query holds).
func isCopy(r *http.Request, q url.Values) bool {
	if _, copy := r.Header["X-Amz-Copy-Source"]; copy {
		return true
	}
	for name := range q {
		if strings.EqualFold(name, "x-amz-copy-source") {
			return true
		}
	}
	return false
}

// readParams are the query parameters that GetObject and HeadObject
// accept to refuse them with a reason (see getObject).
var readParams = []string{"partNumber", "versionId", "response-cache-control", "response-content-disposition",
	"response-content-encoding", "response-content-language", "response-content-type", "response-expires"}

// onlyParams reports whether q holds no parameter but commonParams and
// names.
func onlyParams(q url.Values, names ...string) bool {
	for name := range q {
		if commonParams[name] || isMetadataParam(name) || sigv4.IsQueryHeader(name) {
			continue
		}
		found := false
		for _, n := range names {
			if n == name {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// isMetadataParam reports whether a query parameter is user metadata
// (x-amz-meta-*), which a presigned URL may carry in its query rather
// than as a header. Other headers hoisted into the query are not read,
// so their requests are refused (NotImplemented) rather than half served.
func isMetadataParam(name string) bool {
	return len(name) > len("x-amz-meta-") && strings.EqualFold(name[:len("x-amz-meta-")], "x-amz-meta-")
}

// isFormUpload reports whether r is a browser's POST upload (POST
// Object): a POST to a bucket with a multipart/form-data body.
func isFormUpload(r *http.Request, rq *request) bool {
	if r.Method != http.MethodPost || rq.bucket == "" || rq.key != "" {
		return false
	}
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mediaType == "multipart/form-data"
}

// notImplemented answers every operation the door does not implement:
// ACLs, policies, bucket tagging, versioning, object lock, bucket configuration,
// and anything unknown. None reaches the store.
func (s *server) notImplemented(w http.ResponseWriter, r *http.Request, rq *request) {
	discardBody(r.Body)
	s.writeError(w, r, rq, fmt.Errorf("%w: %s %s with these parameters is not an operation this gateway implements", errNotImplemented, r.Method, api.Truncate(r.URL.Path, 200)))
}

// ---- Multipart uploads -------------------------------------------------
//
// multipart routes the multipart operations (CreateMultipartUpload,
// UploadPart, UploadPartCopy, CompleteMultipartUpload,
// AbortMultipartUpload, ListParts, ListMultipartUploads): every request
// with an uploads or uploadId parameter, served by s3api/multipart.go.
func (s *server) multipart(r *http.Request, rq *request) (handlerFunc, string) {
	return s.multipartRoute(r, rq) // multipart.go
}

// ------------------------------------------------------------------------

// discardBody reads what is left of a body the operation does not use,
// up to a bound, so that the connection can be reused.
func discardBody(body io.Reader) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
}
