package s3

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyauth "github.com/aws/smithy-go/auth"
	"github.com/aws/smithy-go/encoding/httpbinding"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"fencegate/api"
)

// The hot path of a fenced write, the conditional PUT and the HEAD that
// observes an object, does not go through the SDK's operation machinery
// (its middleware stack costs about as much CPU as the HTTP round trip on
// loopback; see BenchmarkPut). It builds the request the SDK would build,
// signs it as the SDK's SigV4 signer would (sigv4.go) with the SDK's
// credentials, and sends it
// through the SDK client's own HTTP client (the same connection pool, no
// redirects followed). Everything else, and any bucket whose endpoint is not
// plain SigV4 for "s3" (S3 Express, access points), goes through the SDK.

// unsignedPayload is the payload hash of a request whose body is not signed,
// as the SDK sends it with SwapComputePayloadSHA256ForUnsignedPayloadMiddleware.
const unsignedPayload = "UNSIGNED-PAYLOAD"

// continueThreshold is the body size from which the SDK asks for
// "Expect: 100-continue" (its ContinueHeaderThresholdBytes default).
const continueThreshold = 2 << 20

// fenceTokenHeader carries the token as user metadata.
var fenceTokenHeader = http.CanonicalHeaderKey("X-Amz-Meta-" + api.MetadataFenceToken)

// maxErrorBody bounds how much of an error answer is read for its code.
const maxErrorBody = 64 << 10

// maxCachedEndpoints bounds the per-bucket endpoint cache; buckets past it
// are resolved on every request (bucket names come from requests).
const maxCachedEndpoints = 1024

// signedHTTP sends SigV4-signed requests without the SDK's middleware.
type signedHTTP struct {
	http     aws.HTTPClient
	creds    aws.CredentialsProvider
	signer   sigV4
	resolver s3.EndpointResolverV2
	params   s3.EndpointParameters // without Bucket and Key

	endpoints       sync.Map // bucket -> bucketEndpoint
	cachedEndpoints atomic.Int64

	// clockSkew is added to the local clock when signing: the server's
	// clock minus ours, learned as the SDK learns it (see noteClockSkew).
	clockSkew atomic.Int64
}

// skewThreshold is the clock difference from which a signing failure is
// taken for clock skew, as in the SDK's retry middleware.
const skewThreshold = 4 * time.Minute

// clockSkewCodes are the error codes that may mean the signing time was
// too far from the server's clock (the SDK's list).
var clockSkewCodes = map[string]bool{
	"InvalidSignatureException": true,
	"SignatureDoesNotMatch":     true,
	"AuthFailure":               true,
	"RequestTimeTooSkewed":      true,
	"AccessDeniedException":     true,
}

// noteClockSkew corrects the signing clock after a refusal that may be
// clock skew, when the answer's Date differs from the signing time by more
// than skewThreshold, as the SDK does for its own operations (whose offset
// this path cannot read). The refused request is reported, not retried:
// the backend makes one attempt per write.
func (s *signedHTTP) noteClockSkew(err *responseError, date string, received time.Time) {
	if !clockSkewCodes[err.code] || date == "" {
		return
	}
	serverTime, perr := http.ParseTime(date)
	if perr != nil {
		return
	}
	candidate := serverTime.Sub(received)
	if d := candidate - time.Duration(s.clockSkew.Load()); d > skewThreshold || d < -skewThreshold {
		s.clockSkew.Store(int64(candidate))
	}
}

// bucketEndpoint is where a bucket's objects are, as the SDK resolves it.
type bucketEndpoint struct {
	// sdk means: send through the SDK (an endpoint this path does not
	// handle). The other fields are then unset.
	sdk     bool
	scheme  string
	host    string
	path    string // unescaped, "/bucket" for path-style addressing
	rawPath string // escaped form of path
	region  string // signing region
}

// newSignedHTTP returns the signed-request path for client, or nil when the
// client's configuration needs the SDK for every request (no credentials
// provider, anonymous credentials, no HTTP client or endpoint resolver).
func newSignedHTTP(client *s3.Client) *signedHTTP {
	o := client.Options()
	if o.Credentials == nil || aws.IsCredentialsProvider(o.Credentials, aws.AnonymousCredentials{}) ||
		o.HTTPClient == nil || o.EndpointResolverV2 == nil {
		return nil
	}
	region := o.Region
	return &signedHTTP{
		http:     o.HTTPClient,
		creds:    o.Credentials,
		resolver: o.EndpointResolverV2,
		params: s3.EndpointParameters{ // as the SDK's bindEndpointParams
			Region:                         &region,
			UseFIPS:                        aws.Bool(o.EndpointOptions.UseFIPSEndpoint == aws.FIPSEndpointStateEnabled),
			UseDualStack:                   aws.Bool(o.EndpointOptions.UseDualStackEndpoint == aws.DualStackEndpointStateEnabled),
			Endpoint:                       o.BaseEndpoint,
			ForcePathStyle:                 aws.Bool(o.UsePathStyle),
			Accelerate:                     aws.Bool(o.UseAccelerate),
			DisableMultiRegionAccessPoints: aws.Bool(o.DisableMultiRegionAccessPoints),
			UseArnRegion:                   aws.Bool(o.UseARNRegion),
			DisableS3ExpressSessionAuth:    o.DisableS3ExpressSessionAuth,
		},
	}
}

// endpoint resolves bucket's endpoint once, with the SDK's resolver. A
// bucket the resolver refuses goes to the SDK, which reports that itself.
func (s *signedHTTP) endpoint(ctx context.Context, bucket string) bucketEndpoint {
	if ep, ok := s.endpoints.Load(bucket); ok {
		return ep.(bucketEndpoint)
	}
	params := s.params
	params.Bucket = aws.String(bucket)
	resolved, err := s.resolver.ResolveEndpoint(ctx, params)
	if err != nil {
		return bucketEndpoint{sdk: true}
	}
	ep := bucketEndpoint{sdk: true}
	if region, ok := plainSigV4(resolved.Properties); ok && len(resolved.Headers) == 0 && resolved.URI.RawQuery == "" {
		u := resolved.URI
		ep = bucketEndpoint{scheme: u.Scheme, host: u.Host, path: u.Path, rawPath: u.EscapedPath(), region: region}
	}
	if s.cachedEndpoints.Load() < maxCachedEndpoints {
		if _, loaded := s.endpoints.LoadOrStore(bucket, ep); !loaded {
			s.cachedEndpoints.Add(1)
		}
	}
	return ep
}

// plainSigV4 reports the signing region when an endpoint's auth options
// are SigV4 for service "s3", which is what this path signs.
func plainSigV4(props smithy.Properties) (region string, ok bool) {
	opts, _ := smithyauth.GetAuthOptions(&props)
	if len(opts) == 0 {
		return "", false
	}
	o := opts[0]
	if o.SchemeID != "sigv4" && o.SchemeID != smithyauth.SchemeIDSigV4 {
		return "", false
	}
	if name, _ := smithyhttp.GetSigV4SigningName(&o.SignerProperties); name != "s3" {
		return "", false
	}
	region, ok = smithyhttp.GetSigV4SigningRegion(&o.SignerProperties)
	return region, ok && region != ""
}

// newRequest builds the request for key under ep, with query (such as
// "x-id=PutObject", as the SDK sends it, or ""; already canonical) and
// body, and signs it with an unsigned payload: UNSIGNED-PAYLOAD, unless
// setHeaders, which sets the headers first, names another payload in
// X-Amz-Content-Sha256 (an aws-chunked body with a trailer, partchecksum.go).
func (s *signedHTTP) newRequest(ctx context.Context, ep bucketEndpoint, method, key, query string, body io.Reader, size int64, setHeaders func(http.Header)) (*http.Request, error) {
	req := s.buildRequest(ctx, ep, method, key, query, body, size, setHeaders)
	creds, err := s.creds.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("retrieve credentials: %w", err)
	}
	s.signer.sign(creds, req, query, ep.region, time.Now().Add(time.Duration(s.clockSkew.Load())))
	return req, nil
}

// buildRequest is newRequest's request before it is signed.
func (s *signedHTTP) buildRequest(ctx context.Context, ep bucketEndpoint, method, key, query string, body io.Reader, size int64, setHeaders func(http.Header)) *http.Request {
	// As the SDK: the operation's path is "/{Key+}", joined to the
	// endpoint's (a key that starts with "/" keeps it).
	u := &url.URL{
		Scheme:   ep.scheme,
		Host:     ep.host,
		Path:     smithyhttp.JoinPath(ep.path, "/"+key),
		RawPath:  smithyhttp.JoinPath(ep.rawPath, "/"+httpbinding.EscapePath(key, false)),
		RawQuery: query,
	}
	req := &http.Request{
		Method:     method,
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     make(http.Header, 8),
		Host:       u.Host,
	}
	req = req.WithContext(ctx)
	if body != nil {
		req.ContentLength = size
		req.Body = newLentBody(body) // the caller owns body: see send
		if size == 0 {
			req.Body = http.NoBody
		}
	}
	setHeaders(req.Header)
	if _, ok := req.Header["X-Amz-Content-Sha256"]; !ok {
		req.Header["X-Amz-Content-Sha256"] = []string{unsignedPayload}
	}
	return req
}

// put is Client.Put on the signed path, with the condition that
// writeCondition built for in. It reports sdk true, having sent nothing,
// when the bucket's endpoint needs the SDK.
func (s *signedHTTP) put(ctx context.Context, in api.PutObjectInput, cond condition) (etag string, sdk bool, err error) {
	ep := s.endpoint(ctx, in.Path.Bucket)
	if ep.sdk {
		return "", true, nil
	}
	req, err := s.newRequest(ctx, ep, http.MethodPut, in.Path.Key, "x-id=PutObject", in.Body, in.Size, func(h http.Header) {
		contentType := in.ContentType
		if contentType == "" && in.Body != nil {
			contentType = "application/octet-stream" // as the SDK sends it
		}
		if contentType != "" {
			h["Content-Type"] = []string{contentType}
		}
		if cond.header != "" {
			h[cond.header] = []string{cond.value}
		}
		setMetadataHeaders(h, in.Metadata)
		if t := tagging(in.Metadata); t != "" {
			h["X-Amz-Tagging"] = []string{t}
		}
		setEncryptionHeaders(h, in.Encryption) // encryption.go
		h[fenceTokenHeader] = []string{in.Token.String()}
		if in.Size >= continueThreshold {
			h["Expect"] = []string{"100-continue"}
		}
	})
	if err != nil {
		return "", false, err
	}
	h, err := s.send(req, "PutObject")
	if err != nil {
		return "", false, err
	}
	if in.Answered != nil {
		*in.Answered = answeredEncryption(h)
	}
	return h.Get("ETag"), false, nil
}

// send sends req, a write of operation ("PutObject", ...), and returns
// the answer's headers when S3 answered 2xx; any other answer is its
// error (readResponseError). The answer's body is read and closed.
func (s *signedHTTP) send(req *http.Request, operation string) (http.Header, error) {
	// The store may answer before it has read the body (a refusal), and
	// net/http's transport may then still be sending it, from a goroutine
	// of its own, after Do returned. The body is the caller's (the door
	// drains a refused part's from its client), so send returns only
	// once the transport has let go of it: the request's context ends,
	// which makes the transport give up the connection, and send waits
	// for the body's Close, which the transport always calls. A Read in
	// progress ends first, within the door's transfer deadline.
	ctx, cancel := context.WithCancel(req.Context())
	req = req.WithContext(ctx)
	defer returned(req.Body, cancel)
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer discard(resp.Body)
	if resp.StatusCode/100 != 2 {
		return nil, s.readResponseError(operation, resp)
	}
	return resp.Header, nil
}

// head is Client.Head on the signed path, with in's preconditions and
// part number (as the SDK sends them); see put for sdk.
func (s *signedHTTP) head(ctx context.Context, in api.GetObjectInput) (obj *api.Object, sdk bool, err error) {
	p := in.Path
	ep := s.endpoint(ctx, p.Bucket)
	if ep.sdk {
		return nil, true, nil
	}
	query := "" // canonical: sorted, escaped
	if in.PartNumber != 0 {
		query = "partNumber=" + strconv.FormatInt(int64(in.PartNumber), 10)
	}
	req, err := s.newRequest(ctx, ep, http.MethodHead, p.Key, query, nil, 0, func(h http.Header) {
		if in.ChecksumMode {
			h["X-Amz-Checksum-Mode"] = []string{"ENABLED"}
		}
		if in.Range != "" {
			h["Range"] = []string{in.Range}
		}
		setCustomerKeyHeaders(h, in.Customer)
		if in.IfMatch != "" {
			h["If-Match"] = []string{in.IfMatch}
		}
		if in.IfNoneMatch != "" {
			h["If-None-Match"] = []string{in.IfNoneMatch}
		}
		if !in.IfModifiedSince.IsZero() {
			h["If-Modified-Since"] = []string{in.IfModifiedSince.UTC().Format(http.TimeFormat)}
		}
		if !in.IfUnmodifiedSince.IsZero() {
			h["If-Unmodified-Since"] = []string{in.IfUnmodifiedSince.UTC().Format(http.TimeFormat)}
		}
	})
	if err != nil {
		return nil, false, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, false, err
	}
	defer discard(resp.Body)
	if resp.StatusCode == http.StatusNotModified {
		return notModifiedObject(resp.Header), false, nil
	}
	if resp.StatusCode/100 != 2 {
		return nil, false, s.readResponseError("HeadObject", resp)
	}
	h := resp.Header
	obj = &api.Object{
		Size:         resp.ContentLength,
		ContentType:  h.Get("Content-Type"),
		ETag:         h.Get("ETag"),
		ContentRange: h.Get("Content-Range"),
		StorageClass: h.Get("X-Amz-Storage-Class"),
		Metadata:     metadataFromHeaders(h),
		Encryption:   answeredEncryption(h),
	}
	for _, c := range api.ChecksumHeaders {
		*c.Field(&obj.Checksums) = h.Get(c.Name)
	}
	if n, err := strconv.ParseInt(h.Get("X-Amz-Mp-Parts-Count"), 10, 32); err == nil && n > 0 {
		obj.PartsCount = int32(n)
	}
	if v := h.Get("Content-Length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			obj.Size = n
		}
	}
	if obj.Size < 0 {
		obj.Size = 0
	}
	if v := h.Get("Last-Modified"); v != "" {
		if t, err := http.ParseTime(v); err == nil {
			obj.LastModified = t
		}
	}
	if t, err := api.ParseToken(h.Get(fenceTokenHeader)); err == nil {
		obj.Token = t
	}
	return obj, false, nil
}

// lentBody is a caller's request body lent to the transport: its Close
// closes nothing but tells that the transport is done with it.
type lentBody struct {
	io.Reader
	once   sync.Once
	closed chan struct{}
}

func newLentBody(r io.Reader) *lentBody {
	return &lentBody{Reader: r, closed: make(chan struct{})}
}

func (b *lentBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// returned ends a request with cancel and waits until the transport has
// closed its body, when it is a lentBody.
func returned(body io.ReadCloser, cancel context.CancelFunc) {
	cancel()
	if b, ok := body.(*lentBody); ok {
		<-b.closed
	}
}

// discard reads what is left of a small answer, so that its connection
// can be reused, and closes it.
func discard(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxErrorBody))
	body.Close()
}

// responseError is an error answer from S3 to a request sent on the signed
// path. It is a smithy.APIError, as the SDK's errors are, so that one
// mapping (mapWriteError, mapReadError) serves both paths.
type responseError struct {
	operation  string
	statusCode int
	code       string
	message    string
	requestID  string
}

var _ smithy.APIError = (*responseError)(nil)

func (e *responseError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "operation %s: status %d", e.operation, e.statusCode)
	if e.requestID != "" {
		fmt.Fprintf(&b, ", request id %s", e.requestID)
	}
	fmt.Fprintf(&b, ", api error %s", e.code)
	if e.message != "" {
		fmt.Fprintf(&b, ": %s", e.message)
	}
	return b.String()
}

// ErrorCode is S3's error code, such as "PreconditionFailed", or for an
// answer without one (a HEAD has no body) the status text without spaces,
// such as "NotFound".
func (e *responseError) ErrorCode() string { return e.code }

// ErrorMessage is S3's error message, if any.
func (e *responseError) ErrorMessage() string { return e.message }

// ErrorFault says whether S3 blames the server or the client.
func (e *responseError) ErrorFault() smithy.ErrorFault {
	if e.statusCode >= 500 {
		return smithy.FaultServer
	}
	return smithy.FaultClient
}

// HTTPStatusCode is the answer's status code.
func (e *responseError) HTTPStatusCode() int { return e.statusCode }

// readResponseError reads S3's XML error body, if any:
// <Error><Code>…</Code><Message>…</Message><RequestId>…</RequestId></Error>,
// and notes a clock skew it reveals.
func (s *signedHTTP) readResponseError(operation string, resp *http.Response) error {
	received := time.Now()
	e := &responseError{
		operation:  operation,
		statusCode: resp.StatusCode,
		requestID:  resp.Header.Get("X-Amz-Request-Id"),
	}
	var body struct {
		Code      string `xml:"Code"`
		Message   string `xml:"Message"`
		RequestID string `xml:"RequestId"`
	}
	if data, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody)); err == nil && len(data) > 0 {
		if xml.Unmarshal(data, &body) == nil {
			e.code, e.message = body.Code, body.Message
			if e.requestID == "" {
				e.requestID = body.RequestID
			}
		}
	}
	if e.code == "" {
		e.code = strings.ReplaceAll(http.StatusText(resp.StatusCode), " ", "")
	}
	if e.code == "" {
		e.code = "UnknownError"
	}
	s.noteClockSkew(e, resp.Header.Get("Date"), received)
	return e
}
