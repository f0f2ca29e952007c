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
	// ETag is the object's quoted entity tag, when it exists: an opaque
	// name of its version that the store's conditional requests compare.
	// For S3 it is S3's ETag (a hash of the content); for GCS it is the
	// object's generation, a number every write gets anew, as a quoted
	// decimal (package backends/gcs).
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

// ObjectMetadata is what an object keeps besides its bytes, its
// Content-Type and its token, as S3 keeps it: user metadata (S3's
// x-amz-meta-NAME headers) and the standard headers that a read answers
// with what the write sent. The zero value is none of them; an empty
// string is a header not set.
//
// Front doors validate it before it reaches a store (S3's limits, see
// package s3api); backends send it as it is.
type ObjectMetadata struct {
	// User is the user metadata by NAME, lower case, without the
	// x-amz-meta- prefix. It never holds MetadataFenceToken: that entry
	// is the token's, written from PutObjectInput.Token. Nil means none.
	User map[string]string
	// CacheControl, ContentDisposition, ContentEncoding, ContentLanguage
	// and Expires are the object's headers of those names. Expires is an
	// HTTP date (RFC 9110 section 5.6.7), as sent.
	CacheControl       string
	ContentDisposition string
	ContentEncoding    string
	ContentLanguage    string
	Expires            string
	// Tags are the object's tags (S3's object tagging), key to value, as
	// the front door validated them (S3's rules, see package s3api): a
	// write stores exactly these, replacing the tags of the version it
	// replaces. Nil or empty means none. Reads leave it nil: a store
	// answers tags on their own (a separate request), not with the
	// object. Stores without tags (GCS) refuse a write that has some.
	Tags map[string]string
}

// MetadataHeaders are ObjectMetadata's fields but User, each with the
// canonical name of the header it is stored and answered as: the one
// list that the S3 front door reads from requests and writes on
// answers, and that the S3 backend sends and reads back.
var MetadataHeaders = []struct {
	Name  string
	Field func(*ObjectMetadata) *string
}{
	{"Cache-Control", func(m *ObjectMetadata) *string { return &m.CacheControl }},
	{"Content-Disposition", func(m *ObjectMetadata) *string { return &m.ContentDisposition }},
	{"Content-Encoding", func(m *ObjectMetadata) *string { return &m.ContentEncoding }},
	{"Content-Language", func(m *ObjectMetadata) *string { return &m.ContentLanguage }},
	{"Expires", func(m *ObjectMetadata) *string { return &m.Expires }},
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
	// Metadata is stored with the object: its user metadata and standard
	// headers. The zero value stores none.
	Metadata ObjectMetadata
	// Token is recorded on the object as MetadataFenceToken.
	Token Token
	// Encryption is the server-side encryption the write asks of the
	// store; the zero value asks for none (the bucket's default).
	Encryption Encryption
	// Answered, when not nil, receives the encryption the store answered
	// the write with (its x-amz-server-side-encryption* headers), for the
	// front door to pass on; it is left zero when the store answered
	// none.
	Answered *Encryption
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

// GetObjectInput is one read (GET or HEAD) with the client's byte range
// and preconditions, which the backend sends on to S3 for S3 to decide.
// The gateway validates and rewrites them first; the zero value of every
// field but Path means "none": the whole object, unconditionally.
type GetObjectInput struct {
	Path ObjectPath
	// Range is one byte range in canonical form: "bytes=2-5", "bytes=7-"
	// or "bytes=-3". Empty means the whole object. HEAD ignores it.
	Range string
	// IfMatch and IfNoneMatch are "*" or a comma-separated list of quoted
	// entity tags. A failed If-Match is ErrPreconditionFailed; a failed
	// If-None-Match is Object.NotModified.
	IfMatch     string
	IfNoneMatch string
	// IfModifiedSince and IfUnmodifiedSince are HTTP dates (second
	// precision). A failed If-Modified-Since is Object.NotModified; a
	// failed If-Unmodified-Since is ErrPreconditionFailed.
	IfModifiedSince   time.Time
	IfUnmodifiedSince time.Time
	// PartNumber reads one part of an object uploaded in parts (S3's
	// partNumber): 1 to MaxParts, the part's bytes with its ContentRange
	// and the object's PartsCount; an object written in one PUT has only
	// part 1, the whole object. A part past the object's last is
	// ErrRangeNotSatisfiable. Zero means none. It excludes Range: the
	// gateway refuses a read with both (ErrInvalidRequest), and reads
	// with it only from S3 buckets.
	PartNumber int32
	// ChecksumMode asks the store for the checksums it keeps of the
	// object (S3's x-amz-checksum-mode: ENABLED), answered in
	// Object.Checksums. False asks for none.
	ChecksumMode bool
	// Customer is the key of an object encrypted with the client's own
	// key (SSE-C), without which S3 refuses to read it; the zero value
	// is none.
	Customer CustomerKey
}

// ObjectChecksums are the checksums a store keeps of an object's content,
// as S3 answers them to a read with checksum mode enabled: base64 values,
// each empty when the store answered none of that algorithm.
type ObjectChecksums struct {
	CRC32, CRC32C, CRC64NVME, SHA1, SHA256    string
	SHA512, MD5, XXHASH64, XXHASH3, XXHASH128 string
	// Type is FULL_OBJECT or COMPOSITE (S3's x-amz-checksum-type); empty
	// when the store did not say.
	Type string
}

// ChecksumHeaders are ObjectChecksums' fields, each with the canonical
// name of the S3 header it is answered in: the one list that the S3
// backend reads and the S3 front door writes.
var ChecksumHeaders = []struct {
	Name  string
	Field func(*ObjectChecksums) *string
}{
	{"X-Amz-Checksum-Crc32", func(c *ObjectChecksums) *string { return &c.CRC32 }},
	{"X-Amz-Checksum-Crc32c", func(c *ObjectChecksums) *string { return &c.CRC32C }},
	{"X-Amz-Checksum-Crc64nvme", func(c *ObjectChecksums) *string { return &c.CRC64NVME }},
	{"X-Amz-Checksum-Sha1", func(c *ObjectChecksums) *string { return &c.SHA1 }},
	{"X-Amz-Checksum-Sha256", func(c *ObjectChecksums) *string { return &c.SHA256 }},
	{"X-Amz-Checksum-Sha512", func(c *ObjectChecksums) *string { return &c.SHA512 }},
	{"X-Amz-Checksum-Md5", func(c *ObjectChecksums) *string { return &c.MD5 }},
	{"X-Amz-Checksum-Xxhash64", func(c *ObjectChecksums) *string { return &c.XXHASH64 }},
	{"X-Amz-Checksum-Xxhash3", func(c *ObjectChecksums) *string { return &c.XXHASH3 }},
	{"X-Amz-Checksum-Xxhash128", func(c *ObjectChecksums) *string { return &c.XXHASH128 }},
	{"X-Amz-Checksum-Type", func(c *ObjectChecksums) *string { return &c.Type }},
}

// Object is an object's content and metadata, as read back.
type Object struct {
	// Body is the content, or the range of it that ContentRange names;
	// nil on HEAD and when NotModified. The caller closes it.
	Body io.ReadCloser
	// Size is the length of Body (of the range, for a partial read).
	Size         int64
	ContentType  string
	ETag         string
	LastModified time.Time
	// Metadata is the object's user metadata (without the token) and
	// standard headers, as the store answered them. When NotModified it
	// is the current version's, as far as the store told it: a 304 must
	// repeat the Cache-Control and Expires that a 200 would carry (RFC
	// 9110 section 15.4.5), and the front door that builds the 304 picks
	// those.
	Metadata ObjectMetadata
	// Token is the fencing token recorded on the object, zero if none.
	Token Token
	// ContentRange is S3's Content-Range for a partial read, such as
	// "bytes 2-5/10"; empty when Body is the whole object. A read of a
	// part (GetObjectInput.PartNumber) has the part's, on HEAD too.
	ContentRange string
	// PartsCount is the number of parts of an object uploaded in parts,
	// as S3 answers it to a read of one part (x-amz-mp-parts-count);
	// zero when S3 did not say.
	PartsCount int32
	// StorageClass is the object's storage class as the store answers it
	// (x-amz-storage-class: STANDARD, GLACIER, ...); empty when it did not
	// say (AWS leaves it out for STANDARD).
	StorageClass string
	// Checksums are the store's checksums of the object, when the read
	// asked for them (GetObjectInput.ChecksumMode) and the store has
	// them; the zero value is none.
	Checksums ObjectChecksums
	// Encryption is the server-side encryption the store answered for
	// the object (never a customer key, only its algorithm and MD5);
	// the zero value is none.
	Encryption Encryption
	// NotModified is true when the read's If-None-Match or
	// If-Modified-Since did not hold (S3 answered 304). It is a result,
	// not an error: Body is nil, Size zero, and ETag, LastModified,
	// Metadata and Token describe the current object.
	NotModified bool
}
