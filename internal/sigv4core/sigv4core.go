// Package sigv4core owns the parts of AWS Signature Version 4, as S3
// uses it, that signing a request and verifying one compute alike, each
// as the AWS SDK's v4 signer (github.com/aws/aws-sdk-go-v2/aws/signer/v4)
// computes it: the signing key and a cache of derived keys, the headers
// the signer never signs, the canonical form of a header's values and of
// the URI path, the credential scope and the string to sign.
//
// backends/s3 signs the write path's requests with it and s3api/sigv4
// verifies clients' requests with it; each keeps its own canonical
// request, for each decides differently which headers it covers (the
// signer the ones it sets, the verifier the ones the client listed).
// It imports only the standard library, so that neither side brings its
// dependencies to the other.
//
// The Append functions write into the caller's buffer and allocate
// nothing of their own but for a header value with a run of spaces
// inside ([StripExcessSpaces]); [HMACSHA256], [DeriveKey] and
// [KeyCache.Get] when it derives allocate their results.
package sigv4core

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
)

const (
	// Algorithm names the signing algorithm, in the Authorization header,
	// X-Amz-Algorithm and the string to sign.
	Algorithm = "AWS4-HMAC-SHA256"
	// Service is the credential scope's service.
	Service = "s3"
	// Terminator ends the credential scope.
	Terminator = "aws4_request"
	// DateFormat is X-Amz-Date's layout (time.Format); a credential
	// scope's day is its first eight characters.
	DateFormat = "20060102T150405Z"
	// DayFormat is the credential scope's day (YYYYMMDD).
	DayFormat = "20060102"
)

// DeriveKey returns the signing key of secret for day (YYYYMMDD) and
// region: four HMACs, from "AWS4"+secret through day, region, Service
// and Terminator.
func DeriveKey(secret, day, region string) []byte {
	key := HMACSHA256([]byte("AWS4"+secret), day)
	key = HMACSHA256(key, region)
	key = HMACSHA256(key, Service)
	return HMACSHA256(key, Terminator)
}

// HMACSHA256 returns the HMAC-SHA256 of data under key.
func HMACSHA256(key []byte, data string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(data))
	return mac.Sum(nil)
}

// maxCachedKeys bounds a KeyCache: past it, the cache starts again empty.
const maxCachedKeys = 1024

// KeyCache keeps the signing key last derived for each access key id,
// with the secret, day and region it was derived from, and gives it
// again only for the same three: a rotated secret gets a key of its own
// at once (the SDK's signer keys its cache by access key id, region and
// day, not by secret). Deriving a key costs four HMACs, more than the
// rest of a signature. It holds at most 1024 access key ids; past that
// it starts again empty.
//
// The zero value is an empty cache, ready to use; it is safe for
// concurrent use and must not be copied once used.
type KeyCache struct {
	keys  sync.Map // access key id -> *Key
	count atomic.Int64
}

// Key is a derived signing key and what it was derived from. A Key is
// never written once derived, so a caller may keep state beside it (an
// HMAC keyed with it) and compare Keys by pointer.
type Key struct {
	secret, day, region string
	bytes               []byte
}

// Bytes returns the signing key; the caller must not write to it.
func (k *Key) Bytes() []byte { return k.bytes }

// Get returns the signing key of secret for day (YYYYMMDD) and region,
// derived once and given again while the access key id's secret, day and
// region stay the same.
func (c *KeyCache) Get(accessKeyID, secret, day, region string) *Key {
	if v, ok := c.keys.Load(accessKeyID); ok {
		if k := v.(*Key); k.secret == secret && k.day == day && k.region == region {
			return k
		}
	}
	k := &Key{secret: secret, day: day, region: region, bytes: DeriveKey(secret, day, region)}
	if _, loaded := c.keys.Swap(accessKeyID, k); !loaded && c.count.Add(1) > maxCachedKeys {
		c.keys.Clear()
		c.count.Store(0)
	}
	return k
}

// ignoredHeaders are the headers the SDK's signer never signs (its
// v4Internal.IgnoredHeaders).
var ignoredHeaders = [...]string{"Authorization", "User-Agent", "X-Amzn-Trace-Id", "Expect", "Transfer-Encoding"}

// IgnoredHeader reports whether the SDK's signer leaves the header name
// (in any case) unsigned: Authorization, User-Agent, X-Amzn-Trace-Id,
// Expect and Transfer-Encoding.
func IgnoredHeader(name string) bool {
	for _, ignored := range ignoredHeaders {
		if len(name) == len(ignored) && strings.EqualFold(name, ignored) {
			return true
		}
	}
	return false
}

// StripExcessSpaces trims spaces at both ends of s and folds runs of
// spaces inside it into one, as the SDK's signer does (spaces only, not
// other white space). The signer writes the Host header's value so.
func StripExcessSpaces(s string) string {
	s = strings.Trim(s, " ")
	if !strings.Contains(s, "  ") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ' ' && space {
			continue
		}
		space = c == ' '
		b.WriteByte(c)
	}
	return b.String()
}

// AppendHeaderValues appends the canonical value of a signed header sent
// with values, as the SDK's signer writes it: each value with runs of
// spaces folded (StripExcessSpaces) and white space trimmed at its ends,
// the values joined with ','.
func AppendHeaderValues(buf []byte, values []string) []byte {
	for i, v := range values {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, strings.TrimSpace(StripExcessSpaces(v))...)
	}
	return buf
}

// CanonicalURI is the canonical request's URI, as the SDK's signer takes
// it from the request's URL (its GetURIPath), with S3's setting of no
// second round of escaping: the path as sent, "/" when there is none.
func CanonicalURI(u *url.URL) string {
	var path string
	if u.Opaque != "" {
		opaque := u.Opaque
		if i := strings.Index(opaque, "?"); i >= 0 {
			opaque = opaque[:i]
		}
		opaque = strings.TrimPrefix(opaque, "//")
		if i := strings.Index(opaque, "/"); i >= 0 {
			path = opaque[i:]
		}
	} else {
		path = u.EscapedPath()
	}
	if path == "" {
		path = "/"
	}
	return path
}

// AppendScope appends the credential scope of day (YYYYMMDD) and region:
// "day/region/s3/aws4_request".
func AppendScope(buf []byte, day, region string) []byte {
	buf = append(buf, day...)
	buf = append(buf, '/')
	buf = append(buf, region...)
	return append(buf, "/"+Service+"/"+Terminator...)
}

// AppendStringToSign appends the string to sign of a canonical request
// whose SHA-256 is canonicalHash, signed at amzDate (in DateFormat) for
// region: Algorithm, amzDate, the credential scope of amzDate's day and
// region (AppendScope), and the hash in hex, one a line.
func AppendStringToSign(buf []byte, amzDate, region string, canonicalHash *[sha256.Size]byte) []byte {
	buf = append(buf, Algorithm+"\n"...)
	buf = append(buf, amzDate...)
	buf = append(buf, '\n')
	buf = AppendScope(buf, amzDate[:len(DayFormat)], region)
	buf = append(buf, '\n')
	return hex.AppendEncode(buf, canonicalHash[:])
}
