package sigv4

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"fencegate/internal/s3checksum"
	"fencegate/internal/sigv4core"
)

const (
	algorithm = sigv4core.Algorithm
	service   = sigv4core.Service
	terminal  = sigv4core.Terminator

	amzDateFormat = sigv4core.DateFormat
	scopeFormat   = sigv4core.DayFormat

	// MaxSkew is how far X-Amz-Date may be from the verifier's clock, as on S3.
	MaxSkew = 15 * time.Minute
	// MaxPresignExpiry is the longest X-Amz-Expires S3 accepts: 7 days.
	MaxPresignExpiry = 7 * 24 * time.Hour

	// The x-amz-content-sha256 values that are not a hex digest.
	UnsignedPayload              = "UNSIGNED-PAYLOAD"
	StreamingSignedPayload       = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	StreamingSignedTrailer       = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	StreamingUnsignedTrailer     = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
	emptySHA256                  = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	maxAuthorizationHeaderLength = 8 << 10
)

// ErrUnknownAccessKey is what a KeyStore returns for an access key id it does
// not know; Verify answers it with InvalidAccessKeyId. Any other KeyStore
// error is answered with InternalError (and returned wrapped, for the log).
var ErrUnknownAccessKey = errors.New("unknown access key id")

// KeyStore looks up the secret of an S3 access key id.
type KeyStore interface {
	// SecretKey returns the secret access key of accessKeyID and the name of
	// the identity it belongs to, or ErrUnknownAccessKey.
	SecretKey(ctx context.Context, accessKeyID string) (secret, identity string, err error)
}

// Config configures a Verifier.
type Config struct {
	// Keys resolves access key ids to secrets. Required.
	Keys KeyStore
	// Region is the region the credential scope must name (as S3 requires
	// the bucket's region). Empty accepts any region.
	Region string
	// Now is the verifier's clock. Nil means time.Now.
	Now func() time.Time
}

// Verifier checks AWS Signature Version 4 on S3 requests. It is safe for
// concurrent use.
type Verifier struct {
	store  KeyStore
	region string
	now    func() time.Time
	keys   sigv4core.KeyCache
}

// New returns a Verifier for cfg.
func New(cfg Config) (*Verifier, error) {
	if cfg.Keys == nil {
		return nil, errors.New("sigv4: Config.Keys is required")
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Verifier{
		store:  cfg.Keys,
		region: cfg.Region,
		now:    now,
	}, nil
}

// Result is an authenticated request.
type Result struct {
	AccessKeyID string
	Identity    string // from the KeyStore
	Region      string // the credential scope's region
	Presigned   bool   // query authentication rather than the Authorization header
	// SignedHeaders are the lower-case names the signature covers. A header
	// not listed here (other than x-amz-*, which Verify requires to be
	// signed) may have been added by anyone on the path.
	SignedHeaders []string
	// Body yields the decoded payload (aws-chunked framing removed). Its
	// final Read returns io.EOF only once every check of the body passed:
	// the payload hash, each chunk signature, the trailer signature, the
	// checksum and the decoded length. Otherwise that Read returns an *Error
	// instead, and the bytes of that Read are withheld, so a consumer never
	// holds the whole body unless it was verified. A caller streams Body to
	// its destination and commits only after reading io.EOF; a destination
	// with a fixed Content-Length (an upstream PutObject) never receives its
	// last byte from a body that failed, so it cannot store it. A body of
	// length zero has no last byte to withhold: Verify reads and checks it
	// before it returns, and Body is then http.NoBody.
	Body io.Reader
	// DecodedContentLength is the payload length (x-amz-decoded-content-length
	// for aws-chunked bodies, else Content-Length), or -1 if unknown.
	DecodedContentLength int64
	// ChecksumAlgorithm names the x-amz-checksum-* the body is verified
	// against ("crc32", "crc32c", "crc64nvme", "sha1", "sha256"), or "".
	ChecksumAlgorithm string

	checksum *checksum // the one of ChecksumAlgorithm; nil if none
}

// Checksum is the body's x-amz-checksum-<ChecksumAlgorithm> (base64), as
// the client sent it in a header or a trailer, once the body matched it:
// empty until Body's final Read returned io.EOF (a body of length zero
// is checked by Verify), and for a request without a checksum.
func (r *Result) Checksum() string {
	if r.checksum == nil || !r.checksum.verified {
		return ""
	}
	return r.checksum.want
}

// credential is a parsed Credential= / X-Amz-Credential value.
type credential struct {
	accessKeyID string
	date        string // yyyymmdd
	region      string
}

func (c credential) scope() string {
	return c.date + "/" + c.region + "/" + service + "/" + terminal
}

// authentication is what the Authorization header or the query says.
type authentication struct {
	presigned     bool
	credential    credential
	signedHeaders []string
	signature     string
	date          time.Time
	// amzDate is the request's X-Amz-Date as sent, which parseAmzDate
	// holds to be exactly date in amzDateFormat: what the strings to sign
	// name, without formatting date again.
	amzDate string
	expires time.Duration // presigned only
}

// Verify authenticates r. On success the returned Result's Body replaces
// r.Body (see Result.Body), and the headers a presigned URL carried in
// its signed query (IsQueryHeader) are set on r.Header, so that what
// follows reads them as headers. On failure errors.As(err, &e) with e an
// *Error
// gives the S3 code and status (a KeyStore failure is InternalError, with
// the store's error wrapped alongside for the log); r.Body has not been read,
// but for a body of length zero, which Verify checks itself (see
// Result.Body).
func (v *Verifier) Verify(ctx context.Context, r *http.Request) (*Result, error) {
	if err := checkSingleValues(r); err != nil {
		return nil, err
	}
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		// The signature cannot cover it: url.ParseQuery drops a pair
		// with a bad escape or a ';' separator, so the canonical query
		// (and every reader of r.URL.Query()) would not see it, while
		// anything reading the raw query would.
		return nil, newError(ErrInvalidArgument, "The query string does not parse: a parameter is not URL-encoded, or ';' separates parameters.")
	}
	return v.verify(ctx, r, query)
}

// VerifyQuery is Verify for a caller that has parsed r's query already,
// so that it is not parsed twice: query must be what
// url.ParseQuery(r.URL.RawQuery) returned, and it must have returned no
// error (a query that does not parse is Verify's to refuse, as it
// does). VerifyQuery does not change query.
func (v *Verifier) VerifyQuery(ctx context.Context, r *http.Request, query url.Values) (*Result, error) {
	if err := checkSingleValues(r); err != nil {
		return nil, err
	}
	return v.verify(ctx, r, query)
}

// verify is Verify once the headers read once are known to be sent once
// (checkSingleValues) and the query parsed.
func (v *Verifier) verify(ctx context.Context, r *http.Request, query url.Values) (*Result, error) {
	var err error
	header := r.Header.Get("Authorization")
	_, presigned := query["X-Amz-Algorithm"]
	if !presigned {
		_, presigned = query["X-Amz-Signature"]
	}
	var auth *authentication
	if strings.HasPrefix(header, "AWS ") || (query.Has("AWSAccessKeyId") && query.Has("Signature")) {
		return nil, newError(ErrInvalidRequest, "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.")
	}
	switch {
	case header != "" && presigned:
		return nil, newError(ErrInvalidArgument, "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter or the Authorization header should be specified")
	case header != "":
		auth, err = parseAuthorization(header, r.Header.Get("X-Amz-Date"))
	case presigned:
		auth, err = parsePresignQuery(query)
	default:
		return nil, newError(ErrAccessDenied, "Anonymous requests are not accepted; sign the request with AWS Signature Version 4")
	}
	if err != nil {
		return nil, err
	}
	hoisted, err := queryHeaders(r, query, auth.presigned)
	if err != nil {
		return nil, err
	}
	if v.region != "" && auth.credential.region != v.region {
		base := ErrAuthorizationHeaderMalformed
		if auth.presigned {
			base = ErrAuthorizationQueryParametersError
		}
		return nil, newError(base, fmt.Sprintf("the region '%s' is wrong; expecting '%s'", auth.credential.region, v.region))
	}
	if err := v.checkTime(auth); err != nil {
		return nil, err
	}
	if err := checkSignedHeaders(r, auth); err != nil {
		return nil, err
	}
	payloadHash, err := payloadHashOf(r, auth)
	if err != nil {
		return nil, err
	}

	secret, identity, err := v.store.SecretKey(ctx, auth.credential.accessKeyID)
	if errors.Is(err, ErrUnknownAccessKey) {
		return nil, ErrInvalidAccessKeyID
	}
	if err != nil {
		return nil, fmt.Errorf("%w: key lookup: %w", ErrInternal, err)
	}
	key := v.keys.Get(auth.credential.accessKeyID, secret, auth.credential.date, auth.credential.region).Bytes()
	expected, err := expectedSignature(r, query, auth, payloadHash, key)
	if err != nil {
		return nil, err
	}
	// The client's signature is 64 lower-case hex digits
	// (isHexSignature), compared as the 32 bytes they encode.
	sent, ok := decodeSignature(auth.signature)
	if !ok || !hmac.Equal(expected[:], sent[:]) {
		return nil, ErrSignatureDoesNotMatch
	}

	// The signature covers the query, so the headers moved into it are
	// the client's: from here on they read as headers (the body's
	// checksum below, a read's checksum mode in the handler).
	for name, value := range hoisted {
		r.Header[name] = []string{value}
	}
	res := &Result{
		AccessKeyID:   auth.credential.accessKeyID,
		Identity:      identity,
		Region:        auth.credential.region,
		Presigned:     auth.presigned,
		SignedHeaders: auth.signedHeaders,
	}
	var signing chunkSigning // what an aws-chunked body's signatures need
	switch payloadHash {
	case StreamingSignedPayload, StreamingSignedTrailer, StreamingUnsignedTrailer:
		signing = chunkSigning{
			key:       key,
			amzDate:   auth.amzDate,
			scope:     auth.credential.scope(),
			seed:      auth.signature,
			algorithm: payloadHash,
		}
	}
	if err := buildBody(r, res, payloadHash, signing); err != nil {
		return nil, err
	}
	if res.DecodedContentLength == 0 {
		// A body of no bytes has no last byte to hold back, and a
		// consumer that reads exactly its length (a store sent
		// Content-Length: 0) never reads to the checks: a signed payload
		// hash, a checksum or a trailer that do not match would let an
		// empty body through. Check it now; what is read is the
		// framing only (a chunk header, the trailer), bounded by the
		// line limits.
		if _, err := io.Copy(io.Discard, res.Body); err != nil {
			return nil, err
		}
		res.Body = http.NoBody
	}
	return res, nil
}

// singleValueHeaders are the headers that authentication and the body's
// framing read one value of. A second value would be read by nobody and
// covered by no signature: the signer re-adds X-Amz-Date from the parsed
// time, so a second X-Amz-Date line rode along a valid signature, and a
// second Authorization was never looked at.
var singleValueHeaders = []string{"Authorization", "X-Amz-Date", "X-Amz-Content-Sha256", "X-Amz-Decoded-Content-Length", "X-Amz-Trailer"}

// checkSingleValues refuses what the signature cannot cover: a header of
// singleValueHeaders sent more than once.
func checkSingleValues(r *http.Request) error {
	for _, name := range singleValueHeaders { // canonical names: no lookup by Values
		if len(r.Header[name]) > 1 {
			return newError(ErrInvalidArgument, "The "+name+" header is sent more than once; send it once.")
		}
	}
	return nil
}

// queryHeaderValues are the headers a presigned URL may carry in its
// query, by lower-case name, each with the check of its value: what the
// newest SDKs' presigners put there. The AWS SDK for JavaScript v3 moves
// every x-amz-* header into the query but the server-side encryption
// ones (X-Amz-Content-Sha256, x-amz-checksum-*,
// x-amz-sdk-checksum-algorithm and x-amz-tagging into a PUT's,
// x-amz-checksum-mode into a GET's), and those too when its caller names
// them hoistable; aws-sdk-go-v2 moves the x-amz-* headers it does not
// require signed as headers (X-Amz-Checksum-Mode,
// X-Amz-Server-Side-Encryption-Bucket-Key-Enabled). Those named here are
// read with their S3 meaning as headers, once the signature over the
// query verified; a value the handler reads (tagging, encryption) is
// checked there as a header's. User metadata (x-amz-meta-*) in the query
// is the front door's to read, not these.
var queryHeaderValues = map[string]func(value string) error{
	"x-amz-content-sha256": func(v string) error {
		if v != UnsignedPayload {
			// A digest or a streaming mode in the query would change what
			// the canonical request names as its payload; presigners put
			// UNSIGNED-PAYLOAD there, and only that is accepted.
			return newError(ErrAuthorizationQueryParametersError, "X-Amz-Content-Sha256 in the query must be UNSIGNED-PAYLOAD.")
		}
		return nil
	},
	"x-amz-checksum-mode": func(v string) error {
		if v != "ENABLED" {
			return newError(ErrInvalidArgument, "x-amz-checksum-mode must be ENABLED.")
		}
		return nil
	},
	"x-amz-sdk-checksum-algorithm": func(v string) error {
		if _, known := s3checksum.Lookup(v); !known {
			return newError(ErrInvalidRequest, "x-amz-sdk-checksum-algorithm must be one of "+s3checksum.Names()+".")
		}
		return nil
	},
	// The value of a checksum is checked as a header's is (headerChecksum).
	"x-amz-checksum-crc32":     nil,
	"x-amz-checksum-crc32c":    nil,
	"x-amz-checksum-crc64nvme": nil,
	"x-amz-checksum-sha1":      nil,
	"x-amz-checksum-sha256":    nil,
	"x-amz-checksum-sha512":    nil,
	"x-amz-checksum-md5":       nil,
	"x-amz-checksum-xxhash64":  nil,
	"x-amz-checksum-xxhash3":   nil,
	"x-amz-checksum-xxhash128": nil,
	// Read by the handler, as the headers.
	"x-amz-tagging":                                   nil,
	"x-amz-server-side-encryption":                    nil,
	"x-amz-server-side-encryption-aws-kms-key-id":     nil,
	"x-amz-server-side-encryption-context":            nil,
	"x-amz-server-side-encryption-bucket-key-enabled": nil,
	"x-amz-server-side-encryption-customer-algorithm": nil,
	"x-amz-server-side-encryption-customer-key":       nil,
	"x-amz-server-side-encryption-customer-key-md5":   nil,
	// A copy's source, its conditions and directives, read by the
	// handler as the headers.
	"x-amz-copy-source":                     nil,
	"x-amz-copy-source-if-match":            nil,
	"x-amz-copy-source-if-none-match":       nil,
	"x-amz-copy-source-if-modified-since":   nil,
	"x-amz-copy-source-if-unmodified-since": nil,
	"x-amz-copy-source-range":               nil,
	"x-amz-metadata-directive":              nil,
	"x-amz-tagging-directive":               nil,
	// A copy's source's customer key, read by the handler as the
	// headers.
	"x-amz-copy-source-server-side-encryption-customer-algorithm": nil,
	"x-amz-copy-source-server-side-encryption-customer-key":       nil,
	"x-amz-copy-source-server-side-encryption-customer-key-md5":   nil,
}

// IsQueryHeader reports whether the query parameter name (in any case) is
// a header that a presigned URL may carry in its query and that Verify
// reads as that header (see Result and Verify): X-Amz-Content-Sha256
// (UNSIGNED-PAYLOAD only), x-amz-checksum-<algorithm> of each of S3's
// algorithms (package s3checksum; the body is checked against it),
// x-amz-sdk-checksum-algorithm,
// x-amz-checksum-mode (ENABLED), x-amz-tagging, and the server-side
// encryption headers (x-amz-server-side-encryption, -aws-kms-key-id,
// -context, -bucket-key-enabled, -customer-algorithm, -customer-key,
// -customer-key-md5), a copy's source, conditions and directives
// (x-amz-copy-source, -if-match, -if-none-match, -if-modified-since,
// -if-unmodified-since, -range, x-amz-metadata-directive,
// x-amz-tagging-directive) and a copy source's customer key
// (x-amz-copy-source-server-side-encryption-customer-algorithm, -key,
// -key-md5), whose values the front door checks as headers. A
// front door's router accepts these beside an operation's own parameters.
func IsQueryHeader(name string) bool {
	_, ok := queryHeaderValues[strings.ToLower(name)]
	return ok
}

// queryHeaders returns the headers the query carries (queryHeaderValues),
// by canonical name, once each checked: each is taken only from a
// presigned URL (whose signature covers the query; a header-signed
// request has no business moving headers there, and S3 would not read
// them), once in any spelling, never beside the same header (which of
// the two would count?), with a value S3 accepts, and a
// x-amz-sdk-checksum-algorithm that names the algorithm of the checksum
// beside it, if any.
func queryHeaders(r *http.Request, query url.Values, presigned bool) (map[string]string, error) {
	var found map[string]string
	for name, values := range query {
		lower := strings.ToLower(name)
		check, ok := queryHeaderValues[lower]
		if !ok {
			continue
		}
		canonical := http.CanonicalHeaderKey(lower)
		switch _, seen := found[canonical]; {
		case !presigned:
			return nil, newError(ErrInvalidArgument, "The query parameter "+lower+" is a header; only a presigned URL carries headers in its query.")
		case len(values) != 1 || seen:
			return nil, newError(ErrInvalidArgument, "The query parameter "+lower+" is sent more than once; send it once.")
		case len(r.Header.Values(canonical)) > 0:
			return nil, newError(ErrInvalidArgument, "The "+lower+" is sent both in the query and as a header; send it once.")
		}
		if check != nil {
			if err := check(values[0]); err != nil {
				return nil, err
			}
		}
		if found == nil {
			found = map[string]string{}
		}
		found[canonical] = values[0]
	}
	if alg := strings.ToLower(found["X-Amz-Sdk-Checksum-Algorithm"]); alg != "" {
		for name := range found {
			if other, ok := strings.CutPrefix(strings.ToLower(name), "x-amz-checksum-"); ok && other != "mode" && other != alg {
				return nil, newError(ErrInvalidRequest, "x-amz-sdk-checksum-algorithm names "+strings.ToUpper(alg)+" but the checksum is "+name+".")
			}
		}
	}
	return found, nil
}

func (v *Verifier) checkTime(auth *authentication) error {
	now := v.now()
	if auth.presigned {
		if auth.date.Sub(now) > MaxSkew {
			return newError(ErrAccessDenied, "Request is not valid yet")
		}
		if now.After(auth.date.Add(auth.expires)) {
			return newError(ErrAccessDenied, "Request has expired")
		}
		return nil
	}
	if d := now.Sub(auth.date); d > MaxSkew || d < -MaxSkew {
		return newError(ErrRequestTimeTooSkewed, fmt.Sprintf("The difference between the request time (%s) and the current time (%s) is too large.", auth.date.Format(amzDateFormat), now.UTC().Format(amzDateFormat)))
	}
	return nil
}

// parseAuthorization parses
// "AWS4-HMAC-SHA256 Credential=AK/20260101/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=hex".
func parseAuthorization(header, amzDate string) (*authentication, error) {
	malformed := func(msg string) error { return newError(ErrAuthorizationHeaderMalformed, msg) }
	if len(header) > maxAuthorizationHeaderLength {
		return nil, malformed("The authorization header is too long.")
	}
	alg, rest, ok := strings.Cut(header, " ")
	if !ok || alg != algorithm {
		return nil, malformed("The authorization header is malformed; only the AWS4-HMAC-SHA256 algorithm is supported.")
	}
	// The three components, each once, in any order; any other is
	// refused once all three are there.
	names := [3]string{"Credential", "SignedHeaders", "Signature"}
	var (
		values [3]string
		seen   [3]bool
		others []string
	)
	for part := range strings.SplitSeq(rest, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, malformed("The authorization header is malformed; the authorization component \"" + strings.TrimSpace(part) + "\" is malformed.")
		}
		i := slices.Index(names[:], k)
		if i >= 0 && seen[i] || i < 0 && slices.Contains(others, k) {
			return nil, malformed("The authorization header is malformed; " + k + " appears twice.")
		}
		if i < 0 {
			others = append(others, k)
			continue
		}
		values[i], seen[i] = val, true
	}
	for i, k := range names {
		if !seen[i] {
			return nil, malformed("The authorization header is malformed; it is missing " + k + ".")
		}
	}
	if len(others) > 0 {
		return nil, malformed("The authorization header is malformed; unexpected component.")
	}
	if amzDate == "" {
		return nil, newError(ErrAccessDenied, "AWS authentication requires a valid x-amz-date header")
	}
	date, ok := parseAmzDate(amzDate)
	if !ok {
		return nil, newError(ErrAccessDenied, "AWS authentication requires a valid x-amz-date header")
	}
	cred, err := parseCredential(values[0], amzDate, malformed)
	if err != nil {
		return nil, err
	}
	signed, err := parseSignedHeaders(values[1], malformed)
	if err != nil {
		return nil, err
	}
	if !isHexSignature(values[2]) {
		return nil, malformed("The authorization header is malformed; the signature is not 64 lower-case hex digits.")
	}
	return &authentication{credential: cred, signedHeaders: signed, signature: values[2], date: date, amzDate: amzDate}, nil
}

func parsePresignQuery(q url.Values) (*authentication, error) {
	malformed := func(msg string) error { return newError(ErrAuthorizationQueryParametersError, msg) }
	get := func(k string) (string, error) {
		vs, ok := q[k]
		if !ok || len(vs) != 1 || vs[0] == "" {
			return "", malformed("Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.")
		}
		return vs[0], nil
	}
	var vals [6]string
	for i, k := range []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Expires"} {
		s, err := get(k)
		if err != nil {
			return nil, err
		}
		vals[i] = s
	}
	if vals[0] != algorithm {
		return nil, malformed("X-Amz-Algorithm only supports \"AWS4-HMAC-SHA256\"")
	}
	date, ok := parseAmzDate(vals[3])
	if !ok {
		return nil, malformed("X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
	}
	secs, err := strconv.ParseInt(vals[5], 10, 64)
	if err != nil || secs < 0 {
		return nil, malformed("X-Amz-Expires should be a number")
	}
	if secs > int64(MaxPresignExpiry/time.Second) {
		return nil, malformed("X-Amz-Expires must be less than a week (in seconds) that is 604800")
	}
	cred, err := parseCredential(vals[1], vals[3], malformed)
	if err != nil {
		return nil, err
	}
	signed, err := parseSignedHeaders(vals[4], malformed)
	if err != nil {
		return nil, err
	}
	if !isHexSignature(vals[2]) {
		return nil, malformed("X-Amz-Signature must be 64 lower-case hex digits")
	}
	return &authentication{
		presigned:     true,
		credential:    cred,
		signedHeaders: signed,
		signature:     vals[2],
		date:          date,
		amzDate:       vals[3],
		expires:       time.Duration(secs) * time.Second,
	}, nil
}

// parseAmzDate parses an X-Amz-Date value: exactly amzDateFormat, 16
// characters (time.Parse alone would also take a fraction of a second
// after the seconds, which the strings to sign would not name).
func parseAmzDate(s string) (time.Time, bool) {
	if len(s) != len(amzDateFormat) || s[8] != 'T' || s[15] != 'Z' {
		return time.Time{}, false
	}
	// The digits as time.Parse reads them: fields of fixed width, each
	// in its range (a day in its month's), without its cost.
	var fields [6]int
	for i, at := range [6][2]int{{0, 4}, {4, 6}, {6, 8}, {9, 11}, {11, 13}, {13, 15}} {
		for _, c := range []byte(s[at[0]:at[1]]) {
			if c < '0' || c > '9' {
				return time.Time{}, false
			}
			fields[i] = fields[i]*10 + int(c-'0')
		}
	}
	year, month, day, hour, minute, second := fields[0], time.Month(fields[1]), fields[2], fields[3], fields[4], fields[5]
	if month < time.January || month > time.December || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || second > 59 {
		return time.Time{}, false
	}
	return time.Date(year, month, day, hour, minute, second, 0, time.UTC), true
}

// daysIn is the number of days of month in year.
func daysIn(month time.Month, year int) int {
	return time.Date(year, month+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// parseCredential parses "AKID/YYYYMMDD/REGION/s3/aws4_request", whose
// date must be the day of amzDate, a valid X-Amz-Date (parseAmzDate).
func parseCredential(s, amzDate string, malformed func(string) error) (credential, error) {
	var c credential
	var serviceName, terminalName string
	ok := true
	cut := func(rest string) (string, string) {
		before, after, found := strings.Cut(rest, "/")
		ok = ok && found
		return before, after
	}
	c.accessKeyID, s = cut(s)
	c.date, s = cut(s)
	c.region, s = cut(s)
	serviceName, terminalName = cut(s)
	if !ok || c.accessKeyID == "" || strings.Contains(terminalName, "/") {
		return credential{}, malformed("the Credential is mal-formed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".")
	}
	if day := amzDate[:len(scopeFormat)]; c.date != day {
		return credential{}, malformed("Invalid credential date \"" + c.date + "\". This date is not the same as X-Amz-Date: \"" + day + "\".")
	}
	if c.region == "" {
		return credential{}, malformed("the Credential is mal-formed; the region is empty.")
	}
	if serviceName != service {
		return credential{}, malformed("the Credential is mal-formed; incorrect service \"" + serviceName + "\". This endpoint belongs to \"s3\".")
	}
	if terminalName != terminal {
		return credential{}, malformed("the Credential is mal-formed; incorrect terminal \"" + terminalName + "\". This endpoint uses \"aws4_request\".")
	}
	return c, nil
}

func parseSignedHeaders(s string, malformed func(string) error) ([]string, error) {
	names := strings.Split(s, ";")
	for i, n := range names {
		if n == "" || hasUpper(n) || (i > 0 && names[i-1] >= n) {
			return nil, malformed("SignedHeaders must be lower-case header names, sorted and separated by ';'.")
		}
	}
	return names, nil
}

// hasUpper reports whether strings.ToLower would change s: it holds an
// upper-case letter, or a byte beyond ASCII (which ToLower may rewrite).
func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' || c >= 0x80 {
			return true
		}
	}
	return false
}

// decodeSignature decodes a signature of 64 lower-case hex digits
// (isHexSignature) into its bytes.
func decodeSignature(s string) (sum [sha256.Size]byte, ok bool) {
	if len(s) != 2*len(sum) {
		return sum, false
	}
	for i := range sum {
		hi, okHi := hexDigit(s[2*i])
		lo, okLo := hexDigit(s[2*i+1])
		if !okHi || !okLo {
			return sum, false
		}
		sum[i] = hi<<4 | lo
	}
	return sum, true
}

// hexDigit is the value of a lower-case hex digit.
func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

func isHexSignature(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// checkSignedHeaders applies S3's rules on which headers must be signed:
// host always, and every x-amz-* header the request carries (an unsigned
// one could have been added on the way). It also refuses, with an explicit
// message, signatures the verifier cannot recompute.
func checkSignedHeaders(r *http.Request, auth *authentication) error {
	for _, h := range auth.signedHeaders {
		// The SDK's canonicalizer never signs these, so a signature
		// covering one cannot be recomputed with it. Mainstream S3
		// clients do not sign them either.
		if sigv4core.IgnoredHeader(h) {
			return newError(ErrSignatureDoesNotMatch, "This gateway cannot verify a signature that covers the "+h+" header; sign without it.")
		}
		if h == "content-length" && r.Header.Get("Content-Length") == "0" {
			return newError(ErrSignatureDoesNotMatch, "This gateway cannot verify a signature that covers a zero Content-Length; sign without it.")
		}
	}
	// auth.signedHeaders is sorted (parseSignedHeaders).
	if _, found := slices.BinarySearch(auth.signedHeaders, "host"); !found {
		return newError(ErrAccessDenied, "The host header must be signed")
	}
	var unsigned []string
	for k := range r.Header {
		if len(k) < len("x-amz-") || !strings.EqualFold(k[:len("x-amz-")], "x-amz-") {
			continue
		}
		if !signedName(auth.signedHeaders, k) && !(auth.presigned && strings.EqualFold(k, "x-amz-content-sha256")) {
			unsigned = append(unsigned, strings.ToLower(k))
		}
	}
	if len(unsigned) > 0 {
		sort.Strings(unsigned)
		return newError(ErrAccessDenied, "There were headers present in the request which were not signed: "+strings.Join(unsigned, ", "))
	}
	return nil
}

// signedName reports whether signed, sorted lower-case names, holds the
// header name (a request's, in any case) in lower case, as
// slices.BinarySearch(signed, strings.ToLower(name)) does, without
// allocating the lower-case name for an ASCII one.
func signedName(signed []string, name string) bool {
	var lower [128]byte
	if len(name) > len(lower) || hasNonASCII(name) {
		_, found := slices.BinarySearch(signed, strings.ToLower(name))
		return found
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	l := lower[:len(name)]
	// Comparisons of string(l) do not copy l.
	i := sort.Search(len(signed), func(i int) bool { return signed[i] >= string(l) })
	return i < len(signed) && signed[i] == string(l)
}

// hasNonASCII reports whether s holds a byte beyond ASCII.
func hasNonASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return true
		}
	}
	return false
}

// payloadHashOf returns the payload hash that goes into the canonical
// request: x-amz-content-sha256 for header authentication (required by S3),
// UNSIGNED-PAYLOAD for presigned URLs.
func payloadHashOf(r *http.Request, auth *authentication) (string, error) {
	h := r.Header.Get("X-Amz-Content-Sha256")
	if auth.presigned {
		if h == "" {
			return UnsignedPayload, nil
		}
	} else if h == "" {
		return "", newError(ErrInvalidRequest, "Missing required header for this request: x-amz-content-sha256")
	}
	switch h {
	case UnsignedPayload, StreamingSignedPayload, StreamingSignedTrailer, StreamingUnsignedTrailer:
		if auth.presigned && h != UnsignedPayload {
			return "", newError(ErrInvalidRequest, "aws-chunked bodies are not accepted with query authentication")
		}
		return h, nil
	}
	if len(h) != 64 {
		return "", newError(ErrInvalidArgument, "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER or a valid sha256 value.")
	}
	if _, err := hex.DecodeString(h); err != nil {
		return "", newError(ErrInvalidArgument, "x-amz-content-sha256 must be a valid sha256 value.")
	}
	h = strings.ToLower(h)
	if auth.presigned {
		// The canonical request of a presigned URL names UNSIGNED-PAYLOAD;
		// the body is still checked against the hash the client sent.
		return UnsignedPayload, nil
	}
	return h, nil
}
