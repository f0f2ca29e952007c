package s3api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"fencegate/api"
	"fencegate/edge"
)

// The reads' own parameters: GetObject and HeadObject of one part of an
// object (partNumber), and the parameters the door refuses. The reads
// themselves are the gateway's (edge.ReadInput, fence.Engine.ReadObject).

// errInvalidPartNumber is S3's 416 InvalidPartNumber: the read named a
// part past the object's last (S3 answered 416 to a read of a part).
var errInvalidPartNumber = errors.New("invalid part number")

// readInput is the api.GetObjectInput of a GetObject or HeadObject:
// edge.ReadInput's Range and conditions, and the part that partNumber
// names. The read parameters the door does not serve are refused
// (refuseReadParams). partNumber is refused with a Range header (S3's
// InvalidRequest, whatever the Range says), and on a bucket whose store
// has no parts (NotImplemented), before anything is read.
func (s *server) readInput(r *http.Request, query url.Values, path api.ObjectPath) (api.GetObjectInput, error) {
	if err := refuseReadParams(query); err != nil {
		return api.GetObjectInput{}, err
	}
	part, err := partNumber(r.URL.RawQuery)
	if err != nil {
		return api.GetObjectInput{}, err
	}
	if part != 0 {
		if _, ok := r.Header["Range"]; ok {
			return api.GetObjectInput{}, &causeError{class: api.ErrInvalidRequest, message: "Cannot specify both Range header and partNumber query parameter"}
		}
		if path.Store != "" && path.Store != api.StoreS3 {
			return api.GetObjectInput{}, fmt.Errorf("%w: partNumber on a bucket in %s, whose objects have no parts", errNotImplemented, path.Store)
		}
	}
	in, err := edge.ReadInput(withQuotedEntityTags(r), path)
	if err != nil {
		return in, err
	}
	if in.Customer, err = readCustomerKey(r.Header, path.Store); err != nil { // sse.go
		return in, err
	}
	in.PartNumber = part
	in.Range = s3Range(r.Header)
	// S3 answers the object's checksums to a read of the whole object
	// that asks with x-amz-checksum-mode: ENABLED (its one value; any
	// other is none). A byte range or a part is read without them: the
	// store's checksums are of the whole object, and a client that
	// validated a range against one would refuse good bytes.
	in.ChecksumMode = r.Header.Get("X-Amz-Checksum-Mode") == "ENABLED" && in.Range == "" && in.PartNumber == 0
	return in, err
}

// withQuotedEntityTags returns r, or a shallow copy of it whose If-Match
// and If-None-Match have their unquoted entity tags quoted: S3 compares
// If-Match: abc as it compares If-Match: "abc" (users often pass an ETag
// without its quotes), where RFC 9110, and the gateway's parser of these
// fields, refuse it. Only a tag of entity-tag characters (RFC 9110
// section 8.8.3: visible ASCII but '"') is quoted; anything else is left
// for the parser to refuse.
func withQuotedEntityTags(r *http.Request) *http.Request {
	var header http.Header
	for _, name := range []string{"If-Match", "If-None-Match"} {
		fields, ok := r.Header[name]
		if !ok {
			continue
		}
		quoted := make([]string, len(fields))
		changed := false
		for i, f := range fields {
			quoted[i] = quoteEntityTags(f)
			changed = changed || quoted[i] != f
		}
		if !changed {
			continue
		}
		if header == nil {
			header = r.Header.Clone()
		}
		header[name] = quoted
	}
	if header == nil {
		return r
	}
	r2 := *r
	r2.Header = header
	return &r2
}

// quoteEntityTags is a list of entity tags with each bare one quoted:
// abc is "abc"; "abc", W/"abc" and * are as they were.
func quoteEntityTags(field string) string {
	tags := strings.Split(field, ",")
	changed := false
	for i, tag := range tags {
		t := strings.Trim(tag, " \t")
		if t == "" || t == "*" || strings.HasPrefix(t, `"`) || strings.HasPrefix(t, `W/"`) {
			continue
		}
		bare := true
		for j := 0; j < len(t); j++ {
			if c := t[j]; c <= ' ' || c == '"' || c >= 0x7f {
				bare = false
				break
			}
		}
		if bare {
			tags[i], changed = `"`+t+`"`, true
		}
	}
	if !changed {
		return field
	}
	return strings.Join(tags, ",")
}

// s3Range is the byte range of a GetObject or HeadObject, in the
// gateway's canonical form, or "" when the read is of the whole object.
// S3 reads a Range as the REST API does (edge.ByteRange: one field,
// one byte range, else the whole object), with two differences: it
// serves the range on HEAD too (206, its Content-Range and
// Content-Length; 416 past the end), and it ignores a field with a space
// or tab in it ("bytes= -1", "bytes=0 -1") rather than reading around
// the blank. A Range beside If-Range is ignored, as on the REST API: the
// door does not evaluate If-Range, and the whole object is always a
// correct answer to it.
func s3Range(h http.Header) string {
	fields := h.Values("Range")
	if len(fields) != 1 || len(h.Values("If-Range")) != 0 || strings.ContainsAny(fields[0], " \t") {
		return ""
	}
	return edge.ByteRange(fields[0])
}

// readObject is fence.Engine.ReadObject, with S3's code for a part past the
// object's last: InvalidPartNumber rather than InvalidRange (both 416).
func (s *server) readObject(ctx context.Context, in api.GetObjectInput, head bool) (*api.Object, error) {
	obj, err := s.engine.ReadObject(ctx, in, head)
	if in.PartNumber != 0 && errors.Is(err, api.ErrRangeNotSatisfiable) {
		err = fmt.Errorf("%w: the object has no part %d: %w", errInvalidPartNumber, in.PartNumber, err)
	}
	return obj, err
}

// partNumber returns the part that the query names with partNumber, or 0
// when it names none. The value must be one
// decimal number from 1 to api.MaxParts in its plain spelling: digits
// only, no sign, no leading zero, no space, once. Anything else is
// InvalidArgument, never read as some part: a parser that took "+1",
// "01" or a number that wraps around 32 bits (4294967297) for part 1
// would answer a part the client did not name. A query that does not
// parse (a bad escape, a ';') is refused too: url.ParseQuery drops the
// pairs it cannot read, and a dropped partNumber would read the whole
// object.
func partNumber(rawQuery string) (int32, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return 0, fmt.Errorf("%w: the query does not parse: %v", errInvalidArgument, err)
	}
	values, ok := q["partNumber"]
	if !ok {
		return 0, nil
	}
	invalid := fmt.Errorf("%w: partNumber must be one integer from 1 to %d", errInvalidArgument, api.MaxParts)
	if len(values) != 1 {
		return 0, invalid
	}
	v := values[0]
	if len(v) == 0 || len(v) > len(strconv.Itoa(api.MaxParts)) || v[0] < '1' || v[0] > '9' {
		return 0, invalid
	}
	for i := 1; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, invalid
		}
	}
	n, err := strconv.Atoi(v)
	if err != nil || n > api.MaxParts {
		return 0, invalid
	}
	return int32(n), nil
}

// refuseReadParams refuses the read parameters the door does not serve:
// versionId (no versions) and the response-* overrides of the answer's
// headers. (partNumber is served: see partNumber.)
func refuseReadParams(q url.Values) error {
	for _, name := range readParams {
		if name != "partNumber" && q.Has(name) {
			return fmt.Errorf("%w: the %s parameter", errNotImplemented, name)
		}
	}
	return nil
}
