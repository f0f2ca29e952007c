package s3api

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/fence"
)

// Fenced multipart uploads through the door: each operation is the
// gateway's (fence.Engine.CreateUpload and the rest, see gateway/multipart.go),
// which binds an upload to the token its CreateMultipartUpload carried,
// refuses the parts of an upload whose token went stale, and completes
// with the protocol of a PUT (observe, fence check, conditional
// completion), aborting a stale upload.
//
// CreateMultipartUpload answers the creator the upload's capability (the
// store's id and a secret), with which its parts, its completion and its
// abort need no token, as S3 clients send the token on the create only;
// by the store's id, as ListMultipartUploads shows it, they need
// X-Fence-Token (gateway.Gateway.boundUpload says why).

// errNoSuchUpload answers an upload id that names no upload the gateway
// fences for the object: completed, aborted, expired, or never created
// through the gateway.
var errNoSuchUpload = errors.New("no such upload")

// maxCompleteBody bounds CompleteMultipartUpload's XML: 10,000 parts of
// about 150 bytes each, with room for checksums.
const maxCompleteBody = 4 << 20

// multipartRoute picks the multipart operation of a request that has an
// uploads or uploadId parameter, as S3 does; anything else with those
// parameters is NotImplemented.
func (s *server) multipartRoute(r *http.Request, rq *request) (handlerFunc, string) {
	q := rq.query
	has := func(name string) bool { _, ok := q[name]; return ok }
	switch {
	case rq.bucket == "":
	case rq.key == "":
		if r.Method == http.MethodGet && has("uploads") && onlyParams(q, "uploads", "prefix", "delimiter", "key-marker", "upload-id-marker", "max-uploads", "encoding-type") {
			return s.listMultipartUploads, "ListMultipartUploads"
		}
	case has("uploads"):
		if r.Method == http.MethodPost && onlyParams(q, "uploads") {
			return s.createMultipartUpload, "CreateMultipartUpload"
		}
	case has("uploadId"):
		switch r.Method {
		case http.MethodPut:
			if has("partNumber") && onlyParams(q, "uploadId", "partNumber") {
				if isCopy(r, q) {
					return s.uploadPartCopy, "UploadPartCopy"
				}
				return s.uploadPart, "UploadPart"
			}
		case http.MethodPost:
			if onlyParams(q, "uploadId") {
				return s.completeMultipartUpload, "CompleteMultipartUpload"
			}
		case http.MethodDelete:
			if onlyParams(q, "uploadId") {
				return s.abortMultipartUpload, "AbortMultipartUpload"
			}
		case http.MethodGet:
			if onlyParams(q, "uploadId", "max-parts", "part-number-marker") {
				return s.listParts, "ListParts"
			}
		}
	}
	return s.notImplemented, "NotImplemented"
}

// uploadError makes an unknown upload S3's NoSuchUpload, not NoSuchKey,
// unless the store said what it did not find (NoSuchBucket, say).
func uploadError(err error) error {
	var store *api.StoreError
	if errors.As(err, &store) && store.Refused {
		return err
	}
	if errors.Is(err, api.ErrNotFound) {
		return fmt.Errorf("%w: %w", errNoSuchUpload, err)
	}
	return err
}

// orNoSuchBucket returns err, the refusal of a request that names an
// upload (UploadPart, UploadPartCopy, CompleteMultipartUpload,
// AbortMultipartUpload), or NoSuchBucket when its bucket does not exist,
// as S3 answers: the gateway knows uploads by the bindings it keeps, so
// an upload id in a bucket that does not exist is just unknown to it
// (NoSuchUpload), and a copy source that does not parse is refused
// before the store is asked (InvalidArgument). Only those two refusals
// are checked, and only for an identity that may write the key (others
// learn nothing of the bucket), with a HEAD of the bucket: a request that
// succeeds costs nothing more, and no fence is decided here.
func (s *server) orNoSuchBucket(ctx context.Context, rq *request, err error) error {
	if s.buckets == nil || !errors.Is(err, errNoSuchUpload) && !errors.Is(err, errInvalidArgument) {
		return err
	}
	path, pathErr := s.objectPath(rq.bucket, rq.key)
	if pathErr != nil || path.Store != "" && path.Store != api.StoreS3 || s.edge.Authorize(ctx, edge.OpWrite, path.Resource()) != nil {
		return err
	}
	resp, headErr := s.bucketRequest(ctx, "HeadBucket", http.MethodHead, rq.bucket, url.Values{})
	if headErr != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		return err
	}
	// Not %w: err's class would answer first (s3Codes).
	return fmt.Errorf("%w: %s (%v)", errNoSuchBucket, rq.bucket, err)
}

// createMultipartUpload is CreateMultipartUpload, with the request's
// token and metadata (validated as PutObject's, see objectMetadata): the
// gateway refuses it if stale, raises the mark, creates the upload and
// binds it to the token.
func (s *server) createMultipartUpload(w http.ResponseWriter, r *http.Request, rq *request) {
	discardBody(r.Body)
	ctx := r.Context()
	path, token, err := s.fencedTarget(ctx, r, rq, edge.OpWrite)
	if err == nil {
		err = refuseWriteConditions(r.Header)
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
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	b, err := s.engine.CreateUploadWith(ctx, api.CreateUploadInput{
		Path: path, Token: token, ContentType: r.Header.Get("Content-Type"), Metadata: meta, Encryption: encryption,
		// The store validates them, as S3 does, and answers its refusal.
		ChecksumAlgorithm: r.Header.Get("X-Amz-Checksum-Algorithm"), ChecksumType: r.Header.Get("X-Amz-Checksum-Type"),
	})
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	w.Header().Set(api.HeaderFenceToken, token.String())
	writeXML(w, http.StatusOK, initiateResult{Xmlns: s3Namespace, Bucket: path.Bucket, Key: path.Key, UploadID: b.Capability()})
}

// uploadToken reads the token a request that names an upload sends, in
// any place fenceToken reads (X-Fence-Token, signed, is the one to send),
// and notes it for the audit; zero when it sends none, which the gateway
// takes for the creator's when the upload id is the creator's capability.
func uploadToken(r *http.Request, rq *request) (api.Token, error) {
	token, err := fenceToken(r, rq.query, rq.auth.SignedHeaders)
	if errors.Is(err, api.ErrMissingToken) {
		return 0, nil
	}
	rq.token = token
	return token, err
}

// partTarget reads the object, upload id, part number and token of a
// part.
func (s *server) partTarget(r *http.Request, rq *request) (api.ObjectPath, string, int32, api.Token, error) {
	path, err := s.objectPath(rq.bucket, rq.key)
	if err != nil {
		return api.ObjectPath{}, "", 0, 0, err
	}
	q := rq.query
	n, err := strconv.ParseInt(q.Get("partNumber"), 10, 32)
	if err != nil || n < 1 || n > api.MaxParts {
		return api.ObjectPath{}, "", 0, 0, fmt.Errorf("%w: partNumber must be 1 to %d", errInvalidArgument, api.MaxParts)
	}
	token, err := uploadToken(r, rq)
	if err != nil {
		return api.ObjectPath{}, "", 0, 0, err
	}
	return path, q.Get("uploadId"), int32(n), token, nil
}

// uploadPart is UploadPart: the verified body streamed to S3, unless the
// upload's token is stale (StaleFenceToken, the part not stored, the
// upload aborted) or the request may not write into it (by the store's
// id without the upload's token; with a token not the upload's).
func (s *server) uploadPart(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	path, id, number, token, err := s.partTarget(r, rq)
	var body io.Reader = rq.auth.Body
	if err == nil {
		body, err = contentMD5(r.Header, body)
	}
	var customer api.CustomerKey
	if err == nil {
		customer, err = readCustomerKey(r.Header, path.Store) // sse.go
	}
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	// The part's checksum, verified by rq.auth.Body, goes to the store
	// with it: the store keeps it and combines it at completion.
	etag, err := s.engine.UploadPart(ctx, api.UploadPartInput{
		Path: path, UploadID: id, Number: number, Body: body, Size: rq.auth.DecodedContentLength, Customer: customer,
		ChecksumAlgorithm: rq.auth.ChecksumAlgorithm,
	}, token)
	if err != nil {
		drainRefusedPart(r.Body)
		s.writeError(w, r, rq, s.orNoSuchBucket(ctx, rq, uploadError(err)))
		return
	}
	w.Header().Set("ETag", etag)
	if v := rq.auth.Checksum(); v != "" {
		// As S3 answers it: the SDKs' upload managers name it in the
		// completion, which the store checks against the part.
		w.Header().Set("X-Amz-Checksum-"+rq.auth.ChecksumAlgorithm, v)
	}
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// maxDrainedPart bounds what drainRefusedPart reads of a refused part.
const maxDrainedPart = 64 << 20

// drainRefusedPart reads what is left of a refused part's body, at most
// maxDrainedPart, and throws it away: the part was decided before its
// bytes were read (a stale upload, an unknown one), and a client still
// sending a body that the server stopped reading sees a reset connection
// rather than the answer (the AWS SDKs report "connection reset", not
// StaleFenceToken). Nothing of it reaches S3. A larger rest is left, and
// the connection closed after the answer.
func drainRefusedPart(body io.Reader) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxDrainedPart))
}

// uploadPartCopy is UploadPartCopy: a part copied from another object,
// which the identity must be allowed to read, refused as UploadPart is.
func (s *server) uploadPartCopy(w http.ResponseWriter, r *http.Request, rq *request) {
	discardBody(r.Body)
	ctx := r.Context()
	path, id, number, token, err := s.partTarget(r, rq)
	var source api.GetObjectInput
	if err == nil {
		source, err = s.copySource(r) // objects.go, as CopyObject's
	}
	if err == nil && (source.IfMatch != "" || source.IfNoneMatch != "" || !source.IfModifiedSince.IsZero() || !source.IfUnmodifiedSince.IsZero()) {
		err = fmt.Errorf("%w: the gateway does not honour x-amz-copy-source-if-* on UploadPartCopy", errNotImplemented)
	}
	for _, prefix := range []string{headerCustomerPrefix, headerCopySourcePrefix} { // sse.go
		if _, ok := r.Header[prefix+"Algorithm"]; ok && err == nil {
			err = fmt.Errorf("%w: the gateway does not pass customer keys (SSE-C) on UploadPartCopy", errNotImplemented)
		}
	}
	if err != nil {
		s.writeError(w, r, rq, s.orNoSuchBucket(ctx, rq, err))
		return
	}
	etag, err := s.engine.CopyPart(ctx, api.CopyPartInput{Path: path, UploadID: id, Number: number, Source: source.Path, SourceRange: r.Header.Get("X-Amz-Copy-Source-Range")}, token)
	if err != nil {
		s.writeError(w, r, rq, s.orNoSuchBucket(ctx, rq, uploadError(err)))
		return
	}
	writeXML(w, http.StatusOK, copyPartResult{ETag: etag, LastModified: time.Now().UTC().Format(time.RFC3339)})
}

// completeMultipartUpload is CompleteMultipartUpload: the gateway's fenced
// completion of the parts the body names, by the upload's creator (its
// capability, or the upload's token). A stale upload is refused
// (StaleFenceToken) and aborted.
func (s *server) completeMultipartUpload(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	path, err := s.objectPath(rq.bucket, rq.key)
	if err == nil {
		err = refuseWriteHeaders(r.Header)
	}
	if err == nil {
		err = refuseTagging(r.Header)
	}
	var cond fence.WriteCondition
	if err == nil {
		cond, err = writeCondition(r)
	}
	var token api.Token
	if err == nil {
		token, err = uploadToken(r, rq)
	}
	var req completeRequest
	if err == nil {
		var held *fence.Buffered
		held, err = s.readWhole(r, rq.auth.Body, maxCompleteBody)
		switch {
		case err != nil:
		case held.Size() > maxCompleteBody:
			err = fmt.Errorf("%w: the body is over %d bytes", errMalformedXML, maxCompleteBody)
		case xml.Unmarshal(held.Bytes(), &req) != nil:
			err = fmt.Errorf("%w: the body is not a CompleteMultipartUpload document", errMalformedXML)
		default:
			err = req.wellFormed()
		}
		held.Release()
	}
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	parts := make([]api.Part, len(req.Parts))
	for i, p := range req.Parts {
		parts[i] = api.Part{Number: p.PartNumber, ETag: p.ETag, Checksums: api.ObjectChecksums(p.partChecksums)}
	}
	res, err := s.engine.CompleteUploadIf(ctx, path, rq.query.Get("uploadId"), token, parts, cond)
	if err != nil {
		s.writeError(w, r, rq, s.orNoSuchBucket(ctx, rq, uploadError(err)))
		return
	}
	w.Header().Set(api.HeaderFenceToken, res.Token.String())
	writeXML(w, http.StatusOK, completeResult{Xmlns: s3Namespace, Location: objectLocation(r, rq), Bucket: path.Bucket, Key: path.Key, ETag: res.ETag})
}

// objectLocation is the absolute URL of the object rq names, as S3 answers
// it in a completion's Location: the request's scheme and Host, the
// bucket (unless Host names it: virtual-hosted style) and the key escaped
// as one path segment ("dir/a b" is dir%2Fa%20b). The scheme is the
// connection's, https over TLS: behind a proxy that ends TLS it is http.
func objectLocation(r *http.Request, rq *request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	bucket := "/" + rq.bucket
	if rq.hosted {
		bucket = ""
	}
	return scheme + "://" + r.Host + bucket + "/" + url.PathEscape(rq.key)
}

// abortMultipartUpload is AbortMultipartUpload, with the identity's write
// grant: by the creator's capability no token is needed, by the store's
// id the upload's token or a larger one.
func (s *server) abortMultipartUpload(w http.ResponseWriter, r *http.Request, rq *request) {
	discardBody(r.Body)
	path, err := s.objectPath(rq.bucket, rq.key)
	var token api.Token
	if err == nil {
		token, err = uploadToken(r, rq)
	}
	if err == nil {
		err = s.engine.AbortUpload(r.Context(), path, rq.query.Get("uploadId"), token)
	}
	if err != nil {
		s.writeError(w, r, rq, s.orNoSuchBucket(r.Context(), rq, uploadError(err)))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// listParts is ListParts, passed through with the identity's read grant.
func (s *server) listParts(w http.ResponseWriter, r *http.Request, rq *request) {
	q := rq.query
	path, err := s.objectPath(rq.bucket, rq.key)
	maxParts, marker := int32(0), int32(0)
	if err == nil {
		maxParts, err = int32Param(q, "max-parts", 1000)
	}
	if err == nil {
		marker, err = int32Param(q, "part-number-marker", api.MaxParts)
	}
	var list api.PartList
	if err == nil {
		list, err = s.engine.ListParts(r.Context(), path, q.Get("uploadId"), marker, maxParts)
	}
	if err != nil {
		s.writeError(w, r, rq, uploadError(err))
		return
	}
	out := listPartsResult{Xmlns: s3Namespace, Bucket: path.Bucket, Key: path.Key, UploadID: q.Get("uploadId"),
		PartNumberMarker: marker, NextPartNumberMarker: list.NextMarker, MaxParts: cmpOr(maxParts, 1000), IsTruncated: list.Truncated, StorageClass: list.StorageClass}
	for _, p := range list.Parts {
		c := p.Checksums
		c.Type = "" // an upload's, not a part's
		out.Parts = append(out.Parts, listedPart{PartNumber: p.Number, ETag: p.ETag, Size: p.Size, LastModified: p.LastModified.UTC().Format(time.RFC3339),
			partChecksums: partChecksums(c)})
	}
	writeXML(w, http.StatusOK, out)
}

// listMultipartUploads is ListMultipartUploads, passed through with a
// read grant on the prefix's resource, the prefix checked as a listing's
// (checkPrefix), the delimiter as sent (minio-go sends an empty one, which
// is none). It shows the store's upload ids, never the capabilities
// their creators were answered.
func (s *server) listMultipartUploads(w http.ResponseWriter, r *http.Request, rq *request) {
	q := rq.query
	maxUploads, err := int32Param(q, "max-uploads", 1000)
	var list api.UploadList
	in := api.ListUploadsInput{Bucket: rq.bucket, Prefix: q.Get("prefix"), Delimiter: q.Get("delimiter"), KeyMarker: q.Get("key-marker"), UploadIDMarker: q.Get("upload-id-marker"), MaxUploads: maxUploads}
	if err == nil {
		err = checkPrefix(in.Prefix)
	}
	if err == nil {
		list, err = s.engine.ListUploads(r.Context(), in)
	}
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	out := listUploadsResult{Xmlns: s3Namespace, Bucket: in.Bucket, Prefix: in.Prefix, Delimiter: in.Delimiter, KeyMarker: in.KeyMarker, UploadIDMarker: in.UploadIDMarker,
		NextKeyMarker: list.NextKeyMarker, NextUploadIDMarker: list.NextUploadIDMarker, MaxUploads: cmpOr(maxUploads, 1000), IsTruncated: list.Truncated}
	for _, u := range list.Uploads {
		out.Uploads = append(out.Uploads, listedUpload{Key: u.Key, UploadID: u.UploadID, Initiated: u.Initiated.UTC().Format(time.RFC3339)})
	}
	for _, p := range list.CommonPrefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, commonPrefix{Prefix: p})
	}
	writeXML(w, http.StatusOK, out)
}

// int32Param reads the count parameter name (max-uploads, max-parts) as
// S3 does: absent is 0, the store's default; a number above most is most,
// as S3 caps it; anything but digits of an integer up to 2^31-1 is
// InvalidArgument, with S3's message.
func int32Param(q url.Values, name string, most int32) (int32, error) {
	if !q.Has(name) {
		return 0, nil
	}
	v := q.Get(name)
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 || strings.TrimLeft(v, "0123456789") != "" {
		return 0, fmt.Errorf("%w: Argument %s must be an integer between 0 and 2147483647", errInvalidArgument, name)
	}
	return min(int32(n), most), nil
}

// wellFormed refuses, as S3 does (MalformedXML), a completion document
// without parts or with a part that lacks its number or its ETag: what
// the parts say is the gateway's to check, that they say it is S3's
// document's.
func (c completeRequest) wellFormed() error {
	if len(c.Parts) == 0 {
		return fmt.Errorf("%w: the CompleteMultipartUpload document names no part", errMalformedXML)
	}
	for i, p := range c.Parts {
		if p.PartNumber == 0 || p.ETag == "" {
			return fmt.Errorf("%w: part %d of the CompleteMultipartUpload document lacks its PartNumber or ETag", errMalformedXML, i+1)
		}
	}
	return nil
}

func cmpOr(n, otherwise int32) int32 {
	if n == 0 {
		return otherwise
	}
	return n
}

// The multipart operations' documents.
type (
	initiateResult struct {
		XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
		Xmlns    string   `xml:"xmlns,attr"`
		Bucket   string   `xml:"Bucket"`
		Key      string   `xml:"Key"`
		UploadID string   `xml:"UploadId"`
	}
	copyPartResult struct {
		XMLName      xml.Name `xml:"CopyPartResult"`
		ETag         string   `xml:"ETag"`
		LastModified string   `xml:"LastModified"`
	}
	completeRequest struct {
		XMLName xml.Name `xml:"CompleteMultipartUpload"`
		Parts   []struct {
			PartNumber int32  `xml:"PartNumber"`
			ETag       string `xml:"ETag"`
			// The part's checksum, when the upload has an algorithm:
			// passed to the store, which checks it.
			partChecksums
		} `xml:"Part"`
	}
	completeResult struct {
		XMLName  xml.Name `xml:"CompleteMultipartUploadResult"`
		Xmlns    string   `xml:"xmlns,attr"`
		Location string   `xml:"Location"`
		Bucket   string   `xml:"Bucket"`
		Key      string   `xml:"Key"`
		ETag     string   `xml:"ETag"`
	}
	listPartsResult struct {
		XMLName              xml.Name     `xml:"ListPartsResult"`
		Xmlns                string       `xml:"xmlns,attr"`
		Bucket               string       `xml:"Bucket"`
		Key                  string       `xml:"Key"`
		UploadID             string       `xml:"UploadId"`
		PartNumberMarker     int32        `xml:"PartNumberMarker"`
		NextPartNumberMarker int32        `xml:"NextPartNumberMarker"`
		MaxParts             int32        `xml:"MaxParts"`
		IsTruncated          bool         `xml:"IsTruncated"`
		Parts                []listedPart `xml:"Part"`
		StorageClass         string       `xml:"StorageClass,omitempty"`
	}
	listedPart struct {
		PartNumber   int32  `xml:"PartNumber"`
		LastModified string `xml:"LastModified"`
		ETag         string `xml:"ETag"`
		Size         int64  `xml:"Size"`
		// The part's checksum the store keeps (an upload created with
		// an algorithm), as S3 lists it.
		partChecksums
	}
	// partChecksums are a part's checksums in S3's XML (a completion's
	// part, a listed part): api.ObjectChecksums, field for field, with
	// S3's element names.
	partChecksums struct {
		CRC32     string `xml:"ChecksumCRC32,omitempty"`
		CRC32C    string `xml:"ChecksumCRC32C,omitempty"`
		CRC64NVME string `xml:"ChecksumCRC64NVME,omitempty"`
		SHA1      string `xml:"ChecksumSHA1,omitempty"`
		SHA256    string `xml:"ChecksumSHA256,omitempty"`
		SHA512    string `xml:"ChecksumSHA512,omitempty"`
		MD5       string `xml:"ChecksumMD5,omitempty"`
		XXHASH64  string `xml:"ChecksumXXHASH64,omitempty"`
		XXHASH3   string `xml:"ChecksumXXHASH3,omitempty"`
		XXHASH128 string `xml:"ChecksumXXHASH128,omitempty"`
		Type      string `xml:"-"`
	}
	listUploadsResult struct {
		XMLName            xml.Name       `xml:"ListMultipartUploadsResult"`
		Xmlns              string         `xml:"xmlns,attr"`
		Bucket             string         `xml:"Bucket"`
		KeyMarker          string         `xml:"KeyMarker"`
		UploadIDMarker     string         `xml:"UploadIdMarker"`
		NextKeyMarker      string         `xml:"NextKeyMarker"`
		NextUploadIDMarker string         `xml:"NextUploadIdMarker"`
		Prefix             string         `xml:"Prefix"`
		Delimiter          string         `xml:"Delimiter,omitempty"`
		MaxUploads         int32          `xml:"MaxUploads"`
		IsTruncated        bool           `xml:"IsTruncated"`
		Uploads            []listedUpload `xml:"Upload"`
		CommonPrefixes     []commonPrefix `xml:"CommonPrefixes"`
	}
	listedUpload struct {
		Key       string `xml:"Key"`
		UploadID  string `xml:"UploadId"`
		Initiated string `xml:"Initiated"`
	}
	commonPrefix struct {
		Prefix string `xml:"Prefix"`
	}
)
