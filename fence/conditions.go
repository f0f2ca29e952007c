package fence

import (
	"fmt"
	"strings"

	"fencegate/api"
)

// WriteCondition is a client's own precondition on a fenced write, as S3
// clients send it on PutObject and CompleteMultipartUpload: the write
// happens only if it holds and the fence check accepts the token. The
// zero value is none.
//
// The engine checks it against the version it observed (protocol step
// 3), and its own write is conditional on exactly that version (If-Match
// its ETag, or If-None-Match: * when it was absent); whether the
// condition holds depends only on whether the object exists and on its
// ETag, so a write the store applies found the condition holding at the
// moment it landed too. The store never sees the client's condition: the
// engine's implies it.
type WriteCondition struct {
	// IfMatch is "*" (the object exists) or one quoted entity tag (the
	// object exists with that ETag, compared strongly: a weak tag never
	// matches, RFC 9110 section 13.1.1). Empty means none.
	IfMatch string
	// IfNoneMatch is If-None-Match: *, create only: the object does not
	// exist. False means none.
	IfNoneMatch bool
}

// holds reports whether c holds for version v.
func (c WriteCondition) holds(v api.ObjectVersion) bool {
	if c.IfNoneMatch && v.Exists {
		return false
	}
	switch c.IfMatch {
	case "":
		return true
	case "*":
		return v.Exists
	}
	return v.Exists && !strings.HasPrefix(c.IfMatch, "W/") && c.IfMatch == v.ETag
}

// failed says why c does not hold for v, for a 412's detail. It never
// names the object's ETag: a writer may not be allowed to read the
// object, and an S3 ETag is a hash of its content.
func (c WriteCondition) failed(v api.ObjectVersion) error {
	switch {
	case c.IfNoneMatch && v.Exists:
		return fmt.Errorf("%w: If-None-Match: * and the object exists", api.ErrPreconditionFailed)
	case !v.Exists:
		return fmt.Errorf("%w: If-Match and the object does not exist", api.ErrPreconditionFailed)
	}
	return fmt.Errorf("%w: If-Match and the object's ETag is another", api.ErrPreconditionFailed)
}
