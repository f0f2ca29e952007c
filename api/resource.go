package api

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Resource names the thing a token protects, such as "s3/<bucket>/<key>".
// High-water marks are kept per Resource.
type Resource string

// Limits on object names, as S3 has them.
const (
	// MaxKeyBytes is the longest object key, in bytes of UTF-8.
	MaxKeyBytes  = 1024
	minBucketLen = 3
	maxBucketLen = 63
)

// Object stores, the first segment of an object's resource name.
const (
	StoreS3  = "s3"
	StoreGCS = "gcs"
)

// ObjectResource returns the resource name of an object in S3:
// "s3/<bucket>/<key>". It knows nothing of where a bucket lives: a front
// door names an object by the store of its bucket (the gateway's
// ObjectResource), never with this.
func ObjectResource(bucket, key string) Resource {
	return StoreObjectResource(StoreS3, bucket, key)
}

// StoreObjectResource returns the resource name of an object of store
// (StoreS3 or StoreGCS): "gcs/<bucket>/<key>". High-water marks are kept
// per resource, so the same bucket and key in two stores are two
// resources.
func StoreObjectResource(store, bucket, key string) Resource {
	return Resource(store + "/" + bucket + "/" + key)
}

// ObjectPath is a validated bucket and key, in the store that holds the
// bucket.
type ObjectPath struct {
	// Store names the bucket's store (StoreS3, StoreGCS), the first
	// segment of the resource name. Empty means StoreS3.
	Store  string
	Bucket string
	Key    string
}

// Resource returns the path's resource name.
func (p ObjectPath) Resource() Resource {
	if p.Store == "" {
		return ObjectResource(p.Bucket, p.Key)
	}
	return StoreObjectResource(p.Store, p.Bucket, p.Key)
}

// ParseObjectPath validates a bucket name and an object key as they arrive in
// a request path (already percent-decoded). Bucket names follow S3's rules
// for new buckets (3-63 characters of lower-case letters, digits, '.' and
// '-', starting and ending with a letter or digit). Keys are 1 to MaxKeyBytes
// bytes of valid UTF-8 without control characters; no path segment may be
// empty (no leading, trailing or doubled '/'), "." or "..", which HTTP
// clients and file-backed S3 servers resolve differently. Failures are
// ErrInvalidObjectPath.
func ParseObjectPath(bucket, key string) (ObjectPath, error) {
	if err := validateBucket(bucket); err != nil {
		return ObjectPath{}, err
	}
	if err := validateKey(key); err != nil {
		return ObjectPath{}, err
	}
	return ObjectPath{Bucket: bucket, Key: key}, nil
}

func validateBucket(b string) error {
	if len(b) < minBucketLen || len(b) > maxBucketLen {
		return fmt.Errorf("%w: bucket name must be %d to %d characters", ErrInvalidObjectPath, minBucketLen, maxBucketLen)
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && c != '.' && c != '-' {
			return fmt.Errorf("%w: bucket name may hold only a-z, 0-9, '.' and '-'", ErrInvalidObjectPath)
		}
		if !alnum && (i == 0 || i == len(b)-1) {
			return fmt.Errorf("%w: bucket name must start and end with a letter or digit", ErrInvalidObjectPath)
		}
	}
	if strings.Contains(b, "..") {
		return fmt.Errorf("%w: bucket name may not contain \"..\"", ErrInvalidObjectPath)
	}
	return nil
}

func validateKey(k string) error {
	switch {
	case k == "":
		return fmt.Errorf("%w: empty object key", ErrInvalidObjectPath)
	case len(k) > MaxKeyBytes:
		return fmt.Errorf("%w: object key longer than %d bytes", ErrInvalidObjectPath, MaxKeyBytes)
	case !utf8.ValidString(k):
		return fmt.Errorf("%w: object key is not valid UTF-8", ErrInvalidObjectPath)
	}
	for _, r := range k {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: object key contains a control character", ErrInvalidObjectPath)
		}
	}
	for _, seg := range strings.Split(k, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w: object key may not start or end with '/' or contain \"//\"", ErrInvalidObjectPath)
		case ".", "..":
			return fmt.Errorf("%w: object key may not contain %q segments", ErrInvalidObjectPath, seg)
		}
	}
	return nil
}
