package sigv4

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// expectedSignature recomputes the request's signature: the canonical
// request, string to sign and signature that the AWS SDK's v4 signer
// (github.com/aws/aws-sdk-go-v2/aws/signer/v4, with S3's settings:
// DisableURIPathEscaping, DisableHeaderHoisting) computes over a copy of
// the request carrying exactly the headers the client signed, byte for
// byte (FuzzSignatureAsTheSDKs compares the two on requests read off the
// wire: SDK-signed ones, presigned or not, the corners of
// canonicalization, and what the fuzzer makes of them). It is the
// verifier's own for its cost: the SDK's signer, fresh for each request,
// builds the canonical request through maps, sorts and joins and derives
// the signing key each time, about 6 % of the S3 API gateway's CPU per
// PutObject; this writes it into one buffer, with key, the signing key
// (signingKeys).
//
// The SDK's signer decides which headers it signs: host; content-length
// when the length is above zero; x-amz-date (header authentication,
// which the signer sets itself from the signing time); every other
// header of the copy. A client's list that differs from that (it left
// out x-amz-date, or signs a content-length that is not above zero) is
// refused with SignatureDoesNotMatch, as it was when the verifier
// compared the signer's list with the client's. (Verify's earlier checks
// refuse both already: every x-amz-* header must be signed, and a signed
// Content-Length of 0 is refused with its own message.)
func expectedSignature(r *http.Request, query url.Values, auth *authentication, payloadHash string, key []byte) (string, error) {
	amzDate := auth.date.Format(amzDateFormat)
	buf := make([]byte, 0, 1024)
	buf = append(buf, r.Method...)
	buf = append(buf, '\n')
	buf = append(buf, uriPath(r.URL)...)
	buf = append(buf, '\n')
	buf = appendCanonicalQuery(buf, query, auth, amzDate)
	buf = append(buf, '\n')
	dated := auth.presigned
	for _, name := range auth.signedHeaders {
		buf = append(buf, name...)
		buf = append(buf, ':')
		switch {
		case name == "host":
			// Signed as sent: without a scheme, the SDK's signer drops
			// no port.
			buf = append(buf, stripExcessSpaces(r.Host)...)
		case name == "content-length":
			// The signer takes it from ContentLength, and signs it only
			// above zero. A server request carries the header too; a
			// request built in-process may not.
			n := r.ContentLength
			if h := r.Header.Get("Content-Length"); h != "" {
				var err error
				if n, err = strconv.ParseInt(h, 10, 64); err != nil {
					return "", ErrSignatureDoesNotMatch
				}
			}
			if n <= 0 {
				return "", ErrSignatureDoesNotMatch
			}
			buf = strconv.AppendInt(buf, n, 10)
		case name == "x-amz-date" && !auth.presigned:
			// The signer sets X-Amz-Date from the signing time.
			buf = append(buf, amzDate...)
			dated = true
		default:
			values, ok := r.Header[http.CanonicalHeaderKey(name)]
			if !ok {
				return "", newError(ErrSignatureDoesNotMatch, "The signed header "+name+" is not in the request.")
			}
			for i, v := range values {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = append(buf, strings.TrimSpace(stripExcessSpaces(v))...)
			}
		}
		buf = append(buf, '\n')
	}
	if !dated {
		// The SDK's signer would have signed x-amz-date, which the
		// client did not.
		return "", ErrSignatureDoesNotMatch
	}
	buf = append(buf, '\n')
	for i, name := range auth.signedHeaders {
		if i > 0 {
			buf = append(buf, ';')
		}
		buf = append(buf, name...)
	}
	buf = append(buf, '\n')
	buf = append(buf, payloadHash...)
	canonicalHash := sha256.Sum256(buf)

	// The string to sign, after room for the HMAC's inner key block.
	buf = append(buf[:0], make([]byte, sha256.BlockSize)...)
	buf = append(buf, algorithm+"\n"...)
	buf = append(buf, amzDate...)
	buf = append(buf, '\n')
	buf = append(buf, auth.credential.scope()...)
	buf = append(buf, '\n')
	buf = hex.AppendEncode(buf, canonicalHash[:])
	sum := hmacSHA256Into(buf, key)
	return hex.EncodeToString(sum[:]), nil
}

// hmacSHA256Into returns HMAC-SHA256 (RFC 2104) under key of the message
// in buf after its first sha256.BlockSize bytes, which it overwrites
// with the inner key block. It is crypto/hmac's result without its
// allocations (two digests and the key pads, per request); key is a
// signing key, shorter than a block.
func hmacSHA256Into(buf, key []byte) [sha256.Size]byte {
	var outer [sha256.BlockSize + sha256.Size]byte
	clear(buf[:sha256.BlockSize])
	copy(buf, key)
	copy(outer[:], key)
	for i := range sha256.BlockSize {
		buf[i] ^= 0x36
		outer[i] ^= 0x5c
	}
	inner := sha256.Sum256(buf)
	copy(outer[sha256.BlockSize:], inner[:])
	return sha256.Sum256(outer[:])
}

// appendCanonicalQuery appends the canonical query string, as the SDK's
// signer writes it: every parameter's name and value escaped with
// url.QueryEscape and "+" as "%20", sorted by name, then value, joined
// with '&'. A presigned URL's is its query without X-Amz-Signature, and
// with X-Amz-Algorithm, X-Amz-Date, X-Amz-Credential and
// X-Amz-SignedHeaders as the signer sets them (from the parsed values:
// the same as sent, but for a date written differently, such as with
// fractional seconds, which the signer writes again in its own form).
func appendCanonicalQuery(buf []byte, query url.Values, auth *authentication, amzDate string) []byte {
	type param struct{ name, value string }
	params := make([]param, 0, len(query)+4)
	for name, values := range query {
		if auth.presigned {
			switch name {
			case "X-Amz-Signature", "X-Amz-Algorithm", "X-Amz-Date", "X-Amz-Credential", "X-Amz-SignedHeaders":
				continue
			}
		}
		escaped := queryEscape(name)
		for _, v := range values {
			params = append(params, param{escaped, queryEscape(v)})
		}
	}
	if auth.presigned {
		params = append(params,
			param{"X-Amz-Algorithm", algorithm},
			param{"X-Amz-Date", amzDate},
			param{"X-Amz-Credential", queryEscape(auth.credential.accessKeyID + "/" + auth.credential.scope())},
			param{"X-Amz-SignedHeaders", queryEscape(strings.Join(auth.signedHeaders, ";"))})
	}
	slices.SortFunc(params, func(a, b param) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return strings.Compare(a.value, b.value)
	})
	for i, p := range params {
		if i > 0 {
			buf = append(buf, '&')
		}
		buf = append(buf, p.name...)
		buf = append(buf, '=')
		buf = append(buf, p.value...)
	}
	return buf
}

// queryEscape is the SDK signer's escaping of a query name or value.
func queryEscape(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

// uriPath is the canonical URI, as the SDK's signer takes it from the
// request's URL (its GetURIPath), with S3's setting of no second round
// of escaping: the path as sent.
func uriPath(u *url.URL) string {
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

// stripExcessSpaces trims spaces at both ends of s and folds runs of
// spaces inside it into one, as the SDK's signer does (spaces only, not
// other white space).
func stripExcessSpaces(s string) string {
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

// maxCachedKeys bounds signingKeys: past it, the cache starts again empty.
const maxCachedKeys = 1024

// signingKeys keeps the signing key last derived for each access key id,
// with the secret, day and region it was derived from, and gives it again
// only for the same three: a rotated secret gets a key of its own at once
// (the SDK's signer keys its cache by access key id, region and day, not
// by secret, which is why the verifier never shared one). Deriving a key
// costs four HMACs, more than the rest of a signature.
type signingKeys struct {
	keys  sync.Map // access key id -> *derivedKey
	count atomic.Int64
}

type derivedKey struct {
	secret, day, region string
	key                 []byte // never written once derived
}

// get returns the signing key of secret for day (YYYYMMDD) and region.
func (c *signingKeys) get(accessKeyID, secret, day, region string) []byte {
	if v, ok := c.keys.Load(accessKeyID); ok {
		if k := v.(*derivedKey); k.secret == secret && k.day == day && k.region == region {
			return k.key
		}
	}
	k := &derivedKey{secret: secret, day: day, region: region, key: signingKey(secret, day, region)}
	if _, loaded := c.keys.Swap(accessKeyID, k); !loaded && c.count.Add(1) > maxCachedKeys {
		c.keys.Clear()
		c.count.Store(0)
	}
	return k.key
}
