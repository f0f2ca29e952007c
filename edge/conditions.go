package edge

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"fencegate/api"
)

// ReadInput builds a GET's or HEAD's api.GetObjectInput from the client's
// Range and conditional headers (RFC 9110 sections 13 and 14). The gateway
// never forwards the client's raw values: it parses them and sends S3 only
// what it rebuilt, so that nothing but a byte range, entity tags and dates
// reaches S3 (no header injection, no numbers S3 might read differently).
//
// What is ignored, as RFC 9110 allows or requires (the read goes on as if
// the header were absent):
//   - Range on HEAD (range handling is defined for GET only);
//   - a Range that is not exactly one field holding one valid byte range:
//     several Range fields, another unit, a malformed or backwards range,
//     or several ranges ("bytes=0-1,4-5": S3 serves no multipart
//     answers, and a client that asks for several ranges must accept the
//     whole object, 200);
//   - Range when If-Range is present: the gateway does not evaluate
//     If-Range, and serving the range without it could splice bytes of
//     two versions into the client's copy; the whole object is always a
//     correct answer to it;
//   - an If-Modified-Since or If-Unmodified-Since that is not one valid
//     HTTP date, and If-Modified-Since beside If-None-Match or
//     If-Unmodified-Since beside If-Match (the entity tag decides).
//
// A malformed If-Match or If-None-Match, or one with several entity tags
// (see EntityTag), is refused (api.ErrInvalidRequest, 400), not ignored:
// the client asked for a guarantee that ignoring it would silently drop.
func ReadInput(r *http.Request, path api.ObjectPath) (api.GetObjectInput, error) {
	in := api.GetObjectInput{Path: path}
	var err error
	if in.IfMatch, err = EntityTag(r.Header.Values("If-Match")); err != nil {
		return api.GetObjectInput{}, fmt.Errorf("%w: If-Match: %w", api.ErrInvalidRequest, err)
	}
	if in.IfNoneMatch, err = EntityTag(r.Header.Values("If-None-Match")); err != nil {
		return api.GetObjectInput{}, fmt.Errorf("%w: If-None-Match: %w", api.ErrInvalidRequest, err)
	}
	if in.IfNoneMatch == "" {
		in.IfModifiedSince = httpDate(r.Header.Values("If-Modified-Since"))
	}
	if in.IfMatch == "" {
		in.IfUnmodifiedSince = httpDate(r.Header.Values("If-Unmodified-Since"))
	}
	if r.Method == http.MethodGet && len(r.Header.Values("If-Range")) == 0 {
		if ranges := r.Header.Values("Range"); len(ranges) == 1 {
			in.Range = ByteRange(ranges[0])
		}
	}
	return in, nil
}

// ByteRange returns the canonical form of a Range field holding one byte
// range ("bytes=2-5", "bytes=7-", "bytes=-3"), or "" when the field is
// not one valid byte range. Positions past what an int64 holds are
// clamped to math.MaxInt64, which no object reaches: a last position
// becomes "to the end" and a first position one past every end (416).
func ByteRange(field string) string {
	unit, set, ok := strings.Cut(field, "=")
	if !ok || !strings.EqualFold(strings.TrimSpace(unit), "bytes") {
		return ""
	}
	first, last, ok := strings.Cut(strings.TrimSpace(set), "-")
	if !ok || strings.Contains(last, "-") { // several ranges; position refuses "bytes=0-1,4"
		return ""
	}
	switch {
	case first == "": // suffix range: the last N bytes
		n, ok := position(last)
		if !ok {
			return ""
		}
		return "bytes=-" + strconv.FormatInt(n, 10)
	case last == "":
		n, ok := position(first)
		if !ok {
			return ""
		}
		return "bytes=" + strconv.FormatInt(n, 10) + "-"
	}
	from, ok1 := position(first)
	to, ok2 := position(last)
	if !ok1 || !ok2 || to < from {
		return ""
	}
	if to == math.MaxInt64 {
		return "bytes=" + strconv.FormatInt(from, 10) + "-"
	}
	return "bytes=" + strconv.FormatInt(from, 10) + "-" + strconv.FormatInt(to, 10)
}

// position parses a range position, 1*DIGIT, clamping values past int64
// to math.MaxInt64. Anything but digits (signs, spaces, commas) is not a
// position.
func position(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (math.MaxInt64-int64(c-'0'))/10 {
			n = math.MaxInt64 // keep checking the rest are digits
			continue
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// EntityTag validates the fields of an If-Match or If-None-Match and
// returns the one entity tag ("xyz" or W/"xyz", of visible ASCII but
// '"') or "*" they hold, "" when there is none. RFC 9110 allows a list of
// tags, but S3 compares the field as one tag (versitygw reads
// "\"a\", \"b\"" as a tag that matches nothing): passed on, a list would
// turn If-Match into a 412 where the RFC says it holds. A list of several
// is refused, so that the client learns it, rather than sent.
func EntityTag(fields []string) (string, error) {
	var tags []string
	for _, f := range fields {
		for _, tag := range strings.Split(f, ",") {
			tag = strings.Trim(tag, " \t")
			if tag == "" {
				continue // empty list elements are allowed
			}
			if tag != "*" && !isEntityTag(tag) {
				return "", fmt.Errorf("%q is not an entity tag", truncate(tag, 80))
			}
			tags = append(tags, tag)
		}
	}
	if len(tags) > 1 {
		return "", fmt.Errorf("%d entity tags: S3 compares one, so send one", len(tags))
	}
	return strings.Join(tags, ""), nil
}

// isEntityTag reports whether tag is an entity-tag of RFC 9110 section
// 8.8.3, without obs-text: [W/] DQUOTE *etagc DQUOTE.
func isEntityTag(tag string) bool {
	tag = strings.TrimPrefix(tag, "W/")
	if len(tag) < 2 || tag[0] != '"' || tag[len(tag)-1] != '"' {
		return false
	}
	for i := 1; i < len(tag)-1; i++ {
		if c := tag[i]; c <= ' ' || c == '"' || c >= 0x7f {
			return false
		}
	}
	return true
}

// httpDate parses a field that must be exactly one HTTP date; zero when it
// is absent or is not (the precondition is then ignored).
func httpDate(fields []string) time.Time {
	if len(fields) != 1 {
		return time.Time{}
	}
	t, err := http.ParseTime(strings.TrimSpace(fields[0]))
	if err != nil {
		return time.Time{}
	}
	return t
}

// truncate shortens s to at most n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
