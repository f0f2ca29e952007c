package sigv4

import (
	"crypto/sha256"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"fencegate/internal/sigv4core"
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
// (a sigv4core.KeyCache's), and the pieces the write path's signer
// computes alike (package sigv4core).
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
//
// It returns the signature as bytes, which the caller compares with the
// client's, decoded from its hex.
func expectedSignature(r *http.Request, query url.Values, auth *authentication, payloadHash string, key []byte) ([sha256.Size]byte, error) {
	var none [sha256.Size]byte
	amzDate := auth.amzDate
	buf := make([]byte, 0, 1024)
	buf = append(buf, r.Method...)
	buf = append(buf, '\n')
	buf = append(buf, sigv4core.CanonicalURI(r.URL)...)
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
			buf = append(buf, sigv4core.StripExcessSpaces(r.Host)...)
		case name == "content-length":
			// The signer takes it from ContentLength, and signs it only
			// above zero. A server request carries the header too; a
			// request built in-process may not.
			n := r.ContentLength
			if h := r.Header.Get("Content-Length"); h != "" {
				var err error
				if n, err = strconv.ParseInt(h, 10, 64); err != nil {
					return none, ErrSignatureDoesNotMatch
				}
			}
			if n <= 0 {
				return none, ErrSignatureDoesNotMatch
			}
			buf = strconv.AppendInt(buf, n, 10)
		case name == "x-amz-date" && !auth.presigned:
			// The signer sets X-Amz-Date from the signing time.
			buf = append(buf, amzDate...)
			dated = true
		default:
			values, ok := headerValues(r.Header, name)
			if !ok {
				return none, newError(ErrSignatureDoesNotMatch, "The signed header "+name+" is not in the request.")
			}
			buf = sigv4core.AppendHeaderValues(buf, values)
		}
		buf = append(buf, '\n')
	}
	if !dated {
		// The SDK's signer would have signed x-amz-date, which the
		// client did not.
		return none, ErrSignatureDoesNotMatch
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
	buf = sigv4core.AppendStringToSign(buf, amzDate, auth.credential.region, &canonicalHash)
	return hmacSHA256Into(buf, key), nil
}

// headerValues returns the values of the header whose lower-case name
// is name, as r.Header[http.CanonicalHeaderKey(name)] does, without
// allocating the canonical name for a name of letters, digits and '-'
// (every header the SDKs sign): it is written into a buffer on the stack,
// and a map index by string(bytes) does not copy them.
func headerValues(h http.Header, name string) ([]string, bool) {
	var canonical [64]byte
	if len(name) > len(canonical) {
		values, ok := h[http.CanonicalHeaderKey(name)]
		return values, ok
	}
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z':
			if upper {
				c -= 'a' - 'A'
			}
		case c >= '0' && c <= '9' || c == '-':
		default:
			// Anything else is textproto's to canonicalize (a name
			// with a character outside a token is left as it is).
			values, ok := h[http.CanonicalHeaderKey(name)]
			return values, ok
		}
		canonical[i] = c
		upper = c == '-'
	}
	values, ok := h[string(canonical[:len(name)])]
	return values, ok
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
	var room [16]param // on the stack, for the queries the SDKs send
	params := room[:0]
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
