package api

import (
	"io"
	"strings"
	"time"
)

// MetadataFenceToken is the S3 user-metadata name (x-amz-meta-fence-token)
// under which every fenced write records its token on the object.
const MetadataFenceToken = "fence-token"

// ObjectVersion is what a fenced write observed of an object before its
// fence check: the version its conditional write must replace.
type ObjectVersion struct {
	// Exists is false when there was no object: the write is then a
	// create (If-None-Match: *).
	Exists bool
	// ETag is the object's quoted entity tag, when it exists.
	ETag string
	// Token is the fencing token recorded on the object, zero if none.
	Token Token
}

// Named reports whether a conditional request can require v to be
// current: v is "absent" (If-None-Match: *), or an object with an ETag
// (If-Match: ETag). An object that exists without an ETag (as versitygw
// serves a file placed in its directory by hand) is not named: S3 servers
// read an If-Match whose ETag is empty, with or without its quotes, as no
// condition at all, so a write "conditional" on it would be blind.
func (v ObjectVersion) Named() bool {
	return !v.Exists || strings.Trim(v.ETag, `"`) != ""
}

// PutObjectInput is one conditional write.
type PutObjectInput struct {
	Path ObjectPath
	// Body is read once per attempt. A body that must survive a retry is
	// an *bytes.Reader, rewound by the caller.
	Body io.Reader
	// Size is the exact length of Body.
	Size        int64
	ContentType string
	// Token is recorded on the object as MetadataFenceToken.
	Token Token
	// Replaces is the version the write replaces: the write applies only
	// if it is still current. It must be Named; a backend refuses a write
	// that replaces a version it cannot name, without sending it.
	Replaces ObjectVersion
	// UnsafeUnconditional sends the write with no condition at all, so
	// that it overwrites whatever version is current, and Replaces is
	// ignored. It is wrong for a fenced write, and exists only for the
	// gateway's UnsafeUnconditionalWrite test hook, which shows that the
	// condition matters. False, the zero value, means a conditional write.
	UnsafeUnconditional bool
}

// Object is an object's content and metadata, as read back.
type Object struct {
	// Body is the content; nil on HEAD. The caller closes it.
	Body         io.ReadCloser
	Size         int64
	ContentType  string
	ETag         string
	LastModified time.Time
	// Token is the fencing token recorded on the object, zero if none.
	Token Token
}
