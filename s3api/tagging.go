package s3api

// Object tagging: GetObjectTagging, PutObjectTagging and
// DeleteObjectTagging (the ?tagging subresource of an object), and the
// x-amz-tagging of PutObject, CreateMultipartUpload and CopyObject. Tags
// are held to S3's rules here, before the fence check, so that a refused
// tag set sends nothing to etcd or S3. Tag writes of their own are the
// gateway's fenced rewrites of the object (gateway.PutTagsFenced, which
// says why).

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/fence"
)

// S3's rules for the tags of an object.
const (
	maxObjectTags    = 10
	maxTagKeyChars   = 128
	maxTagValueChars = 256
	// maxTaggingBodyBytes bounds PutObjectTagging's body: ten tags of
	// the longest keys and values, UTF-8 and XML-escaped, fit in it.
	maxTaggingBodyBytes = 64 << 10
)

// The door's refusals of tags, with S3's codes (s3Codes).
var (
	// errInvalidTag is a tag key or value that breaks S3's rules, or a
	// key given twice in a PutObjectTagging body.
	errInvalidTag = errors.New("invalid tag")
	// errTooManyTags is more than maxObjectTags tags; S3 answers it
	// with the code BadRequest.
	errTooManyTags = errors.New("object tags cannot be greater than 10")
)

// tagCharacters are the characters S3 allows in tag keys and values:
// Unicode letters, separators and numbers, and _ . : / = + - @.
var tagCharacters = regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$`)

// checkTags holds tags to S3's rules for an object's tags: at most 10,
// keys of 1 to 128 characters and values of at most 256, each of
// tagCharacters.
func checkTags(keys, values []string) error {
	if len(keys) > maxObjectTags {
		return &causeError{class: errTooManyTags, message: "Object tags cannot be greater than 10", detail: fmt.Sprintf("%d tags", len(keys))}
	}
	for i, key := range keys {
		if n := utf8.RuneCountInString(key); n == 0 || n > maxTagKeyChars || !utf8.ValidString(key) || !tagCharacters.MatchString(key) {
			return &causeError{class: errInvalidTag, message: "The TagKey you have provided is invalid",
				detail: fmt.Sprintf("%q: 1 to %d characters of letters, numbers, spaces and _.:/=+-@", api.Truncate(key, 140), maxTagKeyChars)}
		}
		value := values[i]
		if utf8.RuneCountInString(value) > maxTagValueChars || !utf8.ValidString(value) || !tagCharacters.MatchString(value) {
			return &causeError{class: errInvalidTag, message: "The TagValue you have provided is invalid",
				detail: fmt.Sprintf("%q of key %q: at most %d characters of letters, numbers, spaces and _.:/=+-@", api.Truncate(value, 80), api.Truncate(key, 140), maxTagValueChars)}
		}
	}
	return nil
}

// errTaggingHeader is S3's refusal of an x-amz-tagging that does not parse
// or names a key twice.
var errTaggingHeader = &causeError{class: errInvalidArgument,
	message: "The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters without tag name duplicates."}

// writeTags reads the x-amz-tagging of a write to an object of store
// (PutObject, CreateMultipartUpload, CopyObject with REPLACE): a URL
// query of tags ("a=1&b=2"), as S3 parses it, held to S3's rules. None
// (no header, or an empty one) is nil. Objects in GCS buckets have no
// tags: a write with some is NotImplemented.
func writeTags(h http.Header, store string) (map[string]string, error) {
	values := h.Values("X-Amz-Tagging")
	if len(values) > 1 {
		return nil, fmt.Errorf("%w: x-amz-tagging given %d times", errInvalidArgument, len(values))
	}
	if len(values) == 0 || values[0] == "" {
		return nil, nil
	}
	var keys, vals []string
	for _, pair := range strings.Split(values[0], "&") {
		if pair == "" {
			continue
		}
		rawKey, rawValue, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(rawKey)
		if err != nil || rawKey == "" {
			return nil, errTaggingHeader
		}
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			return nil, errTaggingHeader
		}
		if slices.Contains(keys, key) {
			return nil, errTaggingHeader
		}
		keys, vals = append(keys, key), append(vals, value)
	}
	if err := checkTags(keys, vals); err != nil {
		return nil, err
	}
	if len(keys) > 0 && store != api.StoreS3 {
		return nil, fmt.Errorf("%w: objects in %s buckets have no tags", errNotImplemented, store)
	}
	return tagMap(keys, vals), nil
}

// tagMap is keys and values as a map; nil for none.
func tagMap(keys, values []string) map[string]string {
	if len(keys) == 0 {
		return nil
	}
	tags := make(map[string]string, len(keys))
	for i, k := range keys {
		tags[k] = values[i]
	}
	return tags
}

// tagsDirective reads a CopyObject's x-amz-tagging-directive as S3 reads
// it: COPY (the default) gives the copy the source's tags (see
// copyObject), REPLACE the request's x-amz-tagging (writeTags); with
// COPY an x-amz-tagging is ignored, as on S3. Anything else is
// InvalidArgument.
func tagsDirective(h http.Header) (replace bool, err error) {
	switch d := h.Values("X-Amz-Tagging-Directive"); {
	case len(d) == 0 || (len(d) == 1 && d[0] == "COPY"):
		return false, nil
	case len(d) == 1 && d[0] == "REPLACE":
		return true, nil
	default:
		return false, fmt.Errorf("%w: x-amz-tagging-directive %q, want COPY or REPLACE", errInvalidArgument, api.Truncate(strings.Join(d, ","), 40))
	}
}

// refuseTagging refuses x-amz-tagging on a write that stores no object
// (DeleteObject, CompleteMultipartUpload, a tagging request itself), where
// S3 would not read it.
func refuseTagging(h http.Header) error {
	if _, ok := h["X-Amz-Tagging"]; ok {
		return fmt.Errorf("%w: x-amz-tagging on this operation", errNotImplemented)
	}
	return nil
}

// tagging is the XML of PutObjectTagging's body and GetObjectTagging's
// answer.
type tagging struct {
	XMLName xml.Name `xml:"Tagging"`
	Xmlns   string   `xml:"xmlns,attr,omitempty"`
	TagSet  struct {
		Tags []tag `xml:"Tag"`
	} `xml:"TagSet"`
}

type tag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

// taggingToken reads the fencing token of a tagging write. A tagging
// request stores no user metadata, so the token is taken from one place
// only: X-Fence-Token, which must be signed (fenceToken). An
// x-amz-meta-* header or query parameter is refused (InvalidArgument):
// it would look like metadata that the request sets, and sets nothing.
func taggingToken(r *http.Request, query url.Values, signedHeaders []string) (api.Token, error) {
	for name := range r.Header {
		if isMetadataParam(name) {
			return 0, fmt.Errorf("%w: a tagging request stores no metadata (%s): send the token in %s, signed", errInvalidArgument, name, api.HeaderFenceToken)
		}
	}
	for name := range query {
		if isMetadataParam(name) {
			return 0, fmt.Errorf("%w: a tagging request stores no metadata (%s): send the token in %s, signed", errInvalidArgument, name, api.HeaderFenceToken)
		}
	}
	token, err := fenceToken(r, query, signedHeaders)
	if errors.Is(err, api.ErrMissingToken) {
		return 0, fmt.Errorf("%w: send it in %s, signed", api.ErrMissingToken, api.HeaderFenceToken)
	}
	return token, err
}

// taggingTarget is fencedTarget for a tagging write: the object, the
// write grant, then the token (taggingToken). Objects in GCS buckets have
// no tags: NotImplemented, before the token is read.
func (s *server) taggingTarget(r *http.Request, rq *request) (api.ObjectPath, api.Token, error) {
	path, err := s.objectPath(rq.bucket, rq.key)
	if err != nil {
		return api.ObjectPath{}, 0, err
	}
	if err := s.edge.Authorize(r.Context(), edge.OpWrite, path.Resource()); err != nil {
		return api.ObjectPath{}, 0, err
	}
	if path.Store != api.StoreS3 {
		return api.ObjectPath{}, 0, fmt.Errorf("%w: objects in %s buckets have no tags", errNotImplemented, path.Store)
	}
	if err := refuseWriteConditions(r.Header); err != nil {
		return api.ObjectPath{}, 0, err
	}
	if err := refuseTagging(r.Header); err != nil {
		return api.ObjectPath{}, 0, err
	}
	token, err := taggingToken(r, rq.query, rq.auth.SignedHeaders)
	rq.token = token
	return path, token, err
}

// putObjectTagging is PutObjectTagging: the body's tag set, held to S3's
// rules, replaces the object's tags by the gateway's fenced rewrite
// (gateway.PutTagsFenced).
func (s *server) putObjectTagging(w http.ResponseWriter, r *http.Request, rq *request) {
	path, token, err := s.taggingTarget(r, rq)
	var tags map[string]string
	if err == nil {
		tags, err = taggingBody(r, rq)
	}
	if err == nil {
		err = s.writeTagsFenced(r, path, token, tags)
	}
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	w.Header().Set(api.HeaderFenceToken, token.String())
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// deleteObjectTagging is DeleteObjectTagging: the gateway's fenced
// rewrite of the object without tags. 204, as on S3.
func (s *server) deleteObjectTagging(w http.ResponseWriter, r *http.Request, rq *request) {
	discardBody(rq.auth.Body)
	path, token, err := s.taggingTarget(r, rq)
	if err == nil {
		err = s.writeTagsFenced(r, path, token, nil)
	}
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	w.Header().Set(api.HeaderFenceToken, token.String())
	w.WriteHeader(http.StatusNoContent)
}

// writeTagsFenced is gateway.PutTagsFenced of tags.
func (s *server) writeTagsFenced(r *http.Request, path api.ObjectPath, token api.Token, tags map[string]string) error {
	_, err := s.engine.PutTagsFenced(r.Context(), fence.TagRequest{Path: path, Token: token, Tags: tags})
	return err
}

// taggingBody reads PutObjectTagging's body, verified by package sigv4
// and against its Content-MD5, and holds its tag set to S3's rules: a
// key given twice is InvalidTag, as S3 answers it.
func taggingBody(r *http.Request, rq *request) (map[string]string, error) {
	if rq.auth.DecodedContentLength > maxTaggingBodyBytes {
		return nil, fmt.Errorf("%w: a PutObjectTagging body is at most %d bytes", errEntityTooLarge, maxTaggingBodyBytes)
	}
	body, err := contentMD5(r.Header, rq.auth.Body)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(body, maxTaggingBodyBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxTaggingBodyBytes {
		return nil, fmt.Errorf("%w: a PutObjectTagging body is at most %d bytes", errEntityTooLarge, maxTaggingBodyBytes)
	}
	var in tagging
	if err := xml.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("%w: %v", errMalformedXML, err)
	}
	keys, values := make([]string, 0, len(in.TagSet.Tags)), make([]string, 0, len(in.TagSet.Tags))
	for _, t := range in.TagSet.Tags {
		if slices.Contains(keys, t.Key) {
			return nil, &causeError{class: errInvalidTag, message: "Cannot provide multiple Tags with the same key", detail: fmt.Sprintf("%q", api.Truncate(t.Key, 140))}
		}
		keys, values = append(keys, t.Key), append(values, t.Value)
	}
	if err := checkTags(keys, values); err != nil {
		return nil, err
	}
	return tagMap(keys, values), nil
}

// getObjectTagging is GetObjectTagging: the store's tags of the object,
// with the read grant, sorted by key.
func (s *server) getObjectTagging(w http.ResponseWriter, r *http.Request, rq *request) {
	path, err := s.objectPath(rq.bucket, rq.key)
	if err == nil {
		err = s.edge.Authorize(r.Context(), edge.OpRead, path.Resource())
	}
	if err == nil && path.Store != api.StoreS3 {
		err = fmt.Errorf("%w: objects in %s buckets have no tags", errNotImplemented, path.Store)
	}
	var tags map[string]string
	if err == nil {
		tags, err = s.engine.ObjectTags(r.Context(), path)
	}
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	out := tagging{Xmlns: s3Namespace}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out.TagSet.Tags = append(out.TagSet.Tags, tag{Key: k, Value: tags[k]})
	}
	writeXML(w, http.StatusOK, out)
}

// sourceTags reads the tags of a CopyObject's source for a copy with
// x-amz-tagging-directive COPY: objects in GCS buckets have none. A copy
// into a GCS bucket of a source with tags is NotImplemented, before the
// fence check.
func (s *server) sourceTags(ctx context.Context, src api.ObjectPath, dstStore string) (map[string]string, error) {
	if src.Store != api.StoreS3 {
		return nil, nil
	}
	tags, err := s.engine.ObjectTags(ctx, src)
	if err != nil {
		return nil, err
	}
	if len(tags) > 0 && dstStore != api.StoreS3 {
		return nil, fmt.Errorf("%w: the source has tags, and objects in %s buckets have none", errNotImplemented, dstStore)
	}
	return tags, nil
}
