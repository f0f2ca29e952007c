package s3api

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"fencegate/api"
	"fencegate/edge"
)

// The bucket reads pass through to the store (Deps.Buckets), re-signed
// with the gateway's credentials, with only the parameters of their
// operation: nothing of the client's request but those reaches the store.
// Each is authorized first, by the identity's read grants:
//
//   - ListObjectsV2 and ListObjects need read on every key the listing
//     can show: a grant whose prefix is a prefix of s3/BUCKET/PREFIX.
//   - HeadBucket and GetBucketLocation need read on some key of the
//     bucket.
//   - ListBuckets shows only the buckets the identity may read some key
//     of.

// maxListBucketsBytes bounds the ListBuckets answer read to filter it.
const maxListBucketsBytes = 16 << 20

// maxUpstreamErrorBytes bounds the store's error body read to relay its
// code.
const maxUpstreamErrorBytes = 64 << 10

// bucketStore refuses the bucket reads of a bucket that is not in S3
// (a GCS bucket of the gateway), or without a BucketLister.
func (s *server) bucketStore(bucket string) error {
	if s.buckets == nil {
		return fmt.Errorf("%w: this gateway lists no buckets", errNotImplemented)
	}
	if bucket != "" && s.engine.StoreOf(bucket) != api.StoreS3 {
		return fmt.Errorf("%w: bucket %q is not in S3: the S3 API lists S3 buckets only", errNotImplemented, bucket)
	}
	return nil
}

// passQuery returns the parameters of q that the operation takes (names),
// each of which must appear once.
func passQuery(q url.Values, names ...string) (url.Values, error) {
	out := url.Values{}
	for _, name := range names {
		values, ok := q[name]
		if !ok {
			continue
		}
		if len(values) != 1 {
			return nil, fmt.Errorf("%w: %d values of %s", errInvalidArgument, len(values), name)
		}
		out[name] = values
	}
	return out, nil
}

// listObjects is ListObjectsV2 (list-type=2) and ListObjects.
func (s *server) listObjects(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	err := s.bucketStore(rq.bucket)
	var query url.Values
	if err == nil {
		query, err = passQuery(rq.query, "list-type", "continuation-token", "delimiter", "encoding-type",
			"fetch-owner", "max-keys", "prefix", "start-after", "marker")
	}
	if err == nil {
		err = checkPrefix(query.Get("prefix"))
	}
	if err == nil {
		// Every key the listing can show starts with the prefix.
		err = s.edge.Authorize(ctx, edge.OpRead, api.Resource(api.StoreS3+"/"+rq.bucket+"/"+query.Get("prefix")))
	}
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	s.passThrough(w, r, rq, http.MethodGet, rq.bucket, query)
}

// checkPrefix refuses a listing prefix with a "." or ".." segment: the
// grant check compares the prefix as written, and a store that keeps
// objects in files could resolve it to another directory. (S3 keys may
// have such segments; the gateway's keys may not, see api.ParseObjectPath.)
func checkPrefix(prefix string) error {
	for _, seg := range strings.Split(prefix, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("%w: a listing prefix may not contain %q segments", errInvalidArgument, seg)
		}
	}
	return nil
}

// headBucket is HeadBucket.
func (s *server) headBucket(w http.ResponseWriter, r *http.Request, rq *request) {
	if err := s.bucketRead(r.Context(), rq.bucket); err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	s.passThrough(w, r, rq, http.MethodHead, rq.bucket, url.Values{})
}

// getBucketLocation is GetBucketLocation.
func (s *server) getBucketLocation(w http.ResponseWriter, r *http.Request, rq *request) {
	if err := s.bucketRead(r.Context(), rq.bucket); err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	s.passThrough(w, r, rq, http.MethodGet, rq.bucket, url.Values{"location": {""}})
}

// bucketRead authorizes a read of the bucket itself: read on some key of
// it.
func (s *server) bucketRead(ctx context.Context, bucket string) error {
	if err := s.bucketStore(bucket); err != nil {
		return err
	}
	return s.edge.AuthorizeAny(ctx, edge.OpRead, api.StoreS3+"/"+bucket+"/")
}

// passThrough sends the bucket read and relays the store's answer: a
// success as it is (its XML document, Content-Type, and a bucket's
// region), a refusal as the door's own XML error with the store's code
// and status.
func (s *server) passThrough(w http.ResponseWriter, r *http.Request, rq *request, method, bucket string, query url.Values) {
	resp, err := s.bucketRequest(r.Context(), rq.op, method, bucket, query)
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		s.relayError(w, r, rq, resp)
		return
	}
	for _, name := range []string{"Content-Type", "X-Amz-Bucket-Region"} {
		if v := resp.Header.Get(name); v != "" {
			w.Header().Set(name, v)
		}
	}
	if resp.ContentLength >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(resp.StatusCode)
	if method != http.MethodHead {
		if _, err := s.edge.CopyToClient(w, resp.Body); err != nil {
			s.log.WarnContext(r.Context(), "s3 listing interrupted", "request_id", rq.id, "bucket", bucket, "err", err)
		}
	}
}

// bucketSpans name the span of each operation's request to the store
// (edge.TraceS3).
var bucketSpans = map[string]string{
	"ListObjectsV2": "list_objects", "ListObjects": "list_objects", "ListBuckets": "list_buckets",
	"HeadBucket": "head_bucket", "GetBucketLocation": "get_bucket_location",
}

// bucketRequest is Deps.Buckets' BucketRequest for the operation op,
// traced as the gateway traces its own S3 requests.
func (s *server) bucketRequest(ctx context.Context, op, method, bucket string, query url.Values) (*http.Response, error) {
	ctx, end := edge.TraceS3(ctx, bucketSpans[op], bucket)
	resp, err := s.buckets.BucketRequest(ctx, method, bucket, query)
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	end(status, err)
	return resp, err
}

// relayError answers the store's refusal of a bucket read with its code
// and status (NoSuchBucket 404, AccessDenied 403...), in the door's own
// error document.
func (s *server) relayError(w http.ResponseWriter, r *http.Request, rq *request, resp *http.Response) {
	var body struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamErrorBytes))
	_ = xml.Unmarshal(data, &body)
	if body.Code == "" {
		body.Code = "NoSuchBucket"
		if resp.StatusCode != http.StatusNotFound {
			body.Code = "UpstreamError"
		}
	}
	if body.Message == "" {
		body.Message = http.StatusText(resp.StatusCode)
	}
	e := errorBody{Code: api.Truncate(body.Code, 64), Message: api.Truncate(body.Message, maxMessageBytes), Resource: api.Truncate(r.URL.Path, api.MaxEchoBytes), RequestID: rq.id}
	if r.Method == http.MethodHead {
		w.WriteHeader(resp.StatusCode)
		return
	}
	writeXML(w, resp.StatusCode, e)
}

// listBuckets is ListBuckets: the store's list, less the buckets that the
// identity may read nothing of, and those not in S3.
func (s *server) listBuckets(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	err := s.bucketStore("")
	var query url.Values
	if err == nil {
		query, err = passQuery(rq.query, "max-buckets", "continuation-token", "prefix", "bucket-region")
	}
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	resp, err := s.bucketRequest(ctx, rq.op, http.MethodGet, "", query)
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		s.relayError(w, r, rq, resp)
		return
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxListBucketsBytes+1))
	if err == nil && len(data) > maxListBucketsBytes {
		err = fmt.Errorf("%w: the store's bucket list is over %d bytes", api.ErrUpstream, maxListBucketsBytes)
	}
	var list listAllMyBucketsResult
	if err == nil {
		if xerr := xml.Unmarshal(data, &list); xerr != nil {
			err = fmt.Errorf("%w: the store's bucket list: %v", api.ErrUpstream, xerr)
		}
	}
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	kept := list.Buckets.Bucket[:0]
	for _, b := range list.Buckets.Bucket {
		if s.engine.StoreOf(b.Name) == api.StoreS3 && s.edge.AuthorizeAny(ctx, edge.OpRead, api.StoreS3+"/"+b.Name+"/") == nil {
			kept = append(kept, b)
		}
	}
	list.Buckets.Bucket = kept
	list.XMLName = xml.Name{Local: "ListAllMyBucketsResult"}
	list.Xmlns = s3Namespace
	writeXML(w, http.StatusOK, list)
}
