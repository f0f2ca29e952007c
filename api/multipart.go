package api

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// S3's limits on multipart uploads, which every S3-compatible store keeps.
const (
	// MinPartSize is the smallest part but the last: 5 MiB.
	MinPartSize = 5 << 20
	// MaxPartSize is the largest part: 5 GiB.
	MaxPartSize = 5 << 30
	// MaxParts is the most parts an upload may have.
	MaxParts = 10000
)

// UploadBinding is what the gateway records of a multipart upload when it
// is created: the object's resource and the token of the writer that
// created it. Every part and the completion are fenced with that token.
type UploadBinding struct {
	// UploadID is the store's id of the upload: what ListMultipartUploads
	// shows to anyone who may read the bucket.
	UploadID string   `json:"upload_id"`
	Resource Resource `json:"resource"`
	Token    Token    `json:"token"`
	// Secret is the random part of the id that the gateway answers the
	// upload's creator (Capability); empty in a binding recorded before
	// gateways kept one. It is never encoded with the binding.
	Secret string `json:"-"`
	// Revision is the token store's revision of the binding as it was
	// read, so that it is deleted only if it is still that binding; zero
	// in a binding that was not read from the store.
	Revision int64 `json:"-"`
	// State is what became of the upload: UploadInProgress (zero) until
	// the gateway completed it or aborted it as stale, after which the
	// binding is kept a while to answer a repeated request as S3 would.
	State UploadState `json:"-"`
	// ETag and PartsDigest are, for UploadCompleted, the object's ETag
	// and the digest of the part list that completed it.
	ETag        string `json:"-"`
	PartsDigest string `json:"-"`
	// ChecksumAlgorithm is the algorithm the upload was created with
	// (CreateUploadInput.ChecksumAlgorithm): its completion names the
	// parts' checksums to the store. Empty: created without one, or
	// recorded by a gateway that did not keep it.
	ChecksumAlgorithm string `json:"-"`
	// Size and PartSize are, for an upload a multipart ticket created,
	// the object's size and its parts' (the last smaller), by which the
	// gateway signs more tickets of its parts. Zero: not a ticket's
	// upload, or recorded by a gateway that did not keep them.
	Size     int64 `json:"-"`
	PartSize int64 `json:"-"`
}

// UploadState is what became of a bound upload.
type UploadState string

const (
	// UploadInProgress: neither completed nor aborted through the
	// gateway.
	UploadInProgress UploadState = ""
	// UploadCompleted: the gateway completed it; the object was written.
	UploadCompleted UploadState = "completed"
	// UploadAbortedStale: the gateway aborted it because its token went
	// stale.
	UploadAbortedStale UploadState = "aborted-stale"
)

// MinUploadSecretLen is the shortest UploadBinding.Secret: 26 characters
// of base32 (A-Z, 2-7), 130 random bits, as crypto/rand's Text makes them.
const MinUploadSecretLen = 26

// Capability returns the id the gateway answers the creator of the upload
// b binds: the store's id, ".", and b's secret. Anyone who may read the
// bucket sees the store's id; only the creator is told the capability.
// Both are valid S3 upload ids: S3 clients echo the id opaquely, and the
// characters added (".", A-Z, 2-7) need no escaping in a query. A binding
// without a secret has no capability: its store's id.
func (b UploadBinding) Capability() string {
	if b.Secret == "" {
		return b.UploadID
	}
	return b.UploadID + "." + b.Secret
}

// SplitCapability splits an upload id that has the form of a capability
// (Capability) into the store's id and the secret; ok is false when it
// has not. A store's own id may have that form too (an S3 id may contain
// "."), so a caller that finds no binding with that secret takes id whole
// as a store's id.
func SplitCapability(id string) (storeID, secret string, ok bool) {
	i := strings.LastIndexByte(id, '.')
	if i <= 0 || len(id)-i-1 < MinUploadSecretLen {
		return "", "", false
	}
	storeID, secret = id[:i], id[i+1:]
	for _, c := range []byte(secret) {
		if (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return "", "", false
		}
	}
	return storeID, secret, true
}

// CreateUploadInput starts a multipart upload.
type CreateUploadInput struct {
	Path        ObjectPath
	ContentType string
	// Metadata is stored with the object that the upload completes, as
	// PutObjectInput.Metadata.
	Metadata ObjectMetadata
	// Token is recorded on the object that the upload completes, as
	// MetadataFenceToken.
	Token Token
	// Encryption is the server-side encryption of the object that the
	// upload completes, as PutObjectInput.Encryption.
	Encryption Encryption
	// ChecksumAlgorithm is the algorithm of the parts' checksums and of
	// the object's (S3's x-amz-checksum-algorithm: CRC32, CRC32C,
	// CRC64NVME, SHA1, SHA256), as the client named it; ChecksumType is
	// how the store combines the parts' (x-amz-checksum-type: COMPOSITE
	// or FULL_OBJECT). Empty: the client named none, and the store
	// chooses.
	ChecksumAlgorithm string
	ChecksumType      string
}

// UploadPartInput is one part of a multipart upload.
type UploadPartInput struct {
	Path     ObjectPath
	UploadID string
	// Number is the part's number, 1 to MaxParts.
	Number int32
	// Body is read once; Size is its exact length.
	Body io.Reader
	Size int64
	// Customer is the upload's customer key (SSE-C), which S3 needs
	// with every part of an upload created with one; zero: none.
	Customer CustomerKey
	// ChecksumAlgorithm, when not empty, is the algorithm ("crc32",
	// "crc32c", "crc64nvme", "sha1", "sha256") of the part's checksum,
	// which the backend computes over Body as it streams and sends the
	// store with the part. Body must already be verified against the
	// client's checksum: the backend forwards it, it does not check it.
	// Empty: the part goes without a checksum.
	ChecksumAlgorithm string
}

// CopyPartInput is one part of a multipart upload copied from an existing
// object (S3's UploadPartCopy).
type CopyPartInput struct {
	Path     ObjectPath
	UploadID string
	Number   int32
	// Source is the object the part is copied from.
	Source ObjectPath
	// SourceRange is a byte range of Source, "bytes=0-5242879"; empty
	// means the whole object.
	SourceRange string
}

// Part is an uploaded part, or a part named in a completion.
type Part struct {
	Number int32  `json:"part_number"`
	ETag   string `json:"etag"`
	// Size and LastModified are known in listings only.
	Size         int64     `json:"size,omitempty"`
	LastModified time.Time `json:"last_modified,omitzero"`
	// Checksums are the part's checksums (base64; Type unused): as a
	// completion names them, passed to the store, which checks them
	// against the parts it keeps; in a listing, those the store keeps.
	// Zero: none. Not in the REST API's answers.
	Checksums ObjectChecksums `json:"-"`
}

// UploadCompletion is the body of a REST completion of a multipart
// upload, such as a multipart ticket's (POST /v1/uploads/{bucket}/{key}).
type UploadCompletion struct {
	// UploadID names the upload: a ticket's upload_id (its creator's
	// capability, UploadBinding.Capability), or the store's id.
	UploadID string `json:"upload_id"`
	// Parts are the parts that make the object, by ascending number.
	Parts []CompletedPart `json:"parts"`
}

// CompletedPart is one part of an UploadCompletion: its number and the
// ETag the store answered its upload with, named as Part names them.
type CompletedPart struct {
	Number int32  `json:"part_number"`
	ETag   string `json:"etag"`
}

// Validate refuses a completion that names no upload, or not 1 to
// MaxParts parts each with a number of 1 to MaxParts and an ETag, by
// strictly ascending number (S3 refuses any other order):
// ErrInvalidRequest.
func (c UploadCompletion) Validate() error {
	if c.UploadID == "" {
		return fmt.Errorf("%w: completion: upload_id is required, the upload_id of the ticket", ErrInvalidRequest)
	}
	if len(c.Parts) == 0 || len(c.Parts) > MaxParts {
		return fmt.Errorf("%w: completion: 1 to %d parts, not %d", ErrInvalidRequest, MaxParts, len(c.Parts))
	}
	for i, p := range c.Parts {
		switch {
		case p.Number < 1 || p.Number > MaxParts:
			return fmt.Errorf("%w: completion: part %d: part_number %d, must be 1 to %d", ErrInvalidRequest, i+1, p.Number, MaxParts)
		case p.ETag == "":
			return fmt.Errorf("%w: completion: part %d: etag is required, the ETag the store answered the part with", ErrInvalidRequest, i+1)
		case i > 0 && p.Number <= c.Parts[i-1].Number:
			return fmt.Errorf("%w: completion: part %d: part_number %d after %d: parts go by ascending number, each once", ErrInvalidRequest, i+1, p.Number, c.Parts[i-1].Number)
		}
	}
	return nil
}

// CompleteUploadInput completes a multipart upload.
type CompleteUploadInput struct {
	Path     ObjectPath
	UploadID string
	// Parts are the parts, in ascending Number, that make the object.
	Parts []Part
	// ChecksumAlgorithm is the algorithm the upload was created with
	// (UploadBinding.ChecksumAlgorithm). Only then are the parts'
	// Checksums sent: a store refuses a completion that names a part's
	// checksum in an upload created without an algorithm (InvalidPart, as
	// S3), and a client may name the checksum that UploadPart answered it
	// all the same. Empty: the parts go by number and ETag.
	ChecksumAlgorithm string
	// Replaces is the version the completion replaces, as for
	// PutObjectInput: the completion applies only if it is still current
	// (If-Match its ETag, or If-None-Match: * when it did not exist). It
	// must be Named; a backend sends no completion without a condition.
	Replaces ObjectVersion
}

// PartList is one page of an upload's parts.
type PartList struct {
	Parts []Part
	// NextMarker is the part number to list from for the next page;
	// zero when Truncated is false.
	NextMarker int32
	Truncated  bool
	// StorageClass is the upload's storage class as the store answers it
	// (STANDARD, ...); empty when it did not say.
	StorageClass string
}

// Upload is a multipart upload in progress.
type Upload struct {
	Key       string
	UploadID  string
	Initiated time.Time
}

// ListUploadsInput asks for one page of a bucket's uploads in progress.
type ListUploadsInput struct {
	Bucket string
	Prefix string
	// KeyMarker and UploadIDMarker continue a previous page.
	KeyMarker      string
	UploadIDMarker string
	// MaxUploads bounds the page; zero means the store's default (1000).
	MaxUploads int32
	// Delimiter, when not empty, groups the keys that contain it after
	// Prefix into UploadList.CommonPrefixes, as S3 does; empty means
	// none.
	Delimiter string
}

// UploadList is one page of a bucket's uploads in progress.
type UploadList struct {
	Uploads []Upload
	// NextKeyMarker and NextUploadIDMarker continue the listing when
	// Truncated.
	NextKeyMarker      string
	NextUploadIDMarker string
	Truncated          bool
	// CommonPrefixes are the key prefixes that Delimiter grouped, each
	// listed once instead of its uploads.
	CommonPrefixes []string
}
