// Package s3 is fencegate's S3 backend: it observes objects, writes and
// deletes them conditionally (If-Match / If-None-Match: *), reads them back,
// and maps S3's failures to fencegate's error classes in package api.
//
// It talks to AWS S3 or any S3-compatible server through aws-sdk-go-v2, with
// a custom endpoint and path-style addressing where configured. The two
// requests of the write path, the conditional PUT and the HEAD, are built
// with the SDK's own endpoint resolver and credentials, signed as its SigV4
// signer signs them (sigv4.go), and sent without its per-operation
// middleware (signed.go).
//
// It also signs upload tickets (ticket.go): presigned PUTs and UploadParts
// with which a client sends a fenced write's bytes to S3 itself, under the
// condition and token that the gateway would have sent.
package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"fencegate/api"
	"fencegate/backends/upstream"
)

// Config configures a Client.
type Config struct {
	// Endpoint is the S3 server's base URL, such as
	// "http://127.0.0.1:7070". Empty means AWS S3 for Region.
	Endpoint string
	// Region is the signing region. Empty means "us-east-1".
	Region string
	// AccessKeyID and SecretAccessKey are static credentials. Empty means
	// the standard AWS chain (environment, shared files, instance role).
	AccessKeyID     string
	SecretAccessKey string
	// UsePathStyle addresses buckets as endpoint/bucket/key rather than
	// bucket.endpoint/key. S3-compatible servers usually need it.
	UsePathStyle bool
	// MaxConnsPerHost bounds the connection pool to S3. Zero means 256.
	MaxConnsPerHost int
	// ResponseHeaderTimeout bounds the wait for S3's answer once a request
	// is sent. Zero means 30 seconds.
	ResponseHeaderTimeout time.Duration
	// ConnWaitTimeout bounds the wait for a connection to S3 (from the
	// pool, or dialed), before a request is sent. Zero means 5 seconds.
	ConnWaitTimeout time.Duration
	// CompleteTimeout is ResponseHeaderTimeout for the completions of
	// multipart uploads, which some servers answer only once they have
	// assembled the object (versitygw: about a minute for 6 GiB on
	// disk). Zero means 15 minutes.
	CompleteTimeout time.Duration
}

// Client is an S3 backend. It is safe for concurrent use.
type Client struct {
	s3 *s3.Client
	// region is Config.Region, in which CreateBucket creates buckets.
	region string
	// connWait is Config.ConnWaitTimeout.
	connWait time.Duration
	// signed sends Put and Head without the SDK's middleware; nil means
	// through the SDK (see newSignedHTTP).
	signed *signedHTTP
	// completeHTTP sends the completions of multipart uploads, with
	// Config.CompleteTimeout (multipart.go).
	completeHTTP *awshttp.BuildableClient
	// clock is the time at which tickets are signed (ticket.go); nil
	// means time.Now. Only tests set it.
	clock func() time.Time
}

// New returns a Client for cfg.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.MaxConnsPerHost == 0 {
		cfg.MaxConnsPerHost = 256
	}
	if cfg.ResponseHeaderTimeout == 0 {
		cfg.ResponseHeaderTimeout = 30 * time.Second
	}
	if cfg.ConnWaitTimeout == 0 {
		cfg.ConnWaitTimeout = 5 * time.Second
	}
	if cfg.CompleteTimeout == 0 {
		cfg.CompleteTimeout = 15 * time.Minute
	}
	if cfg.MaxConnsPerHost < 0 || cfg.ResponseHeaderTimeout < 0 || cfg.ConnWaitTimeout < 0 || cfg.CompleteTimeout < 0 {
		return nil, errors.New("s3: negative pool size or timeout")
	}
	if (cfg.AccessKeyID == "") != (cfg.SecretAccessKey == "") {
		return nil, errors.New("s3: set both access key id and secret access key, or neither")
	}
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = cfg.MaxConnsPerHost
		t.MaxIdleConnsPerHost = cfg.MaxConnsPerHost
		t.MaxConnsPerHost = cfg.MaxConnsPerHost
		t.IdleConnTimeout = 90 * time.Second
		t.ResponseHeaderTimeout = cfg.ResponseHeaderTimeout
	})
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(cfg.Region),
		awsconfig.WithHTTPClient(httpClient),
		// The gateway does its own bounded retries, and only where a
		// retry is safe; a write whose answer was lost is reported, never
		// re-sent behind the caller's back.
		awsconfig.WithRetryMaxAttempts(1),
	}
	if cfg.AccessKeyID != "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, "")))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3: load aws config: %w", err)
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.UsePathStyle
		// Body checksums and payload hashes would cost a full pass over
		// every body before it is sent (and make unseekable bodies
		// impossible over plain HTTP); integrity in transit is TLS's job.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
	})
	return &Client{s3: client, region: cfg.Region, signed: newSignedHTTP(client), connWait: cfg.ConnWaitTimeout, completeHTTP: newCompleteHTTP(cfg)}, nil
}

// errNoETag refuses an object that exists without an ETag. A conditional
// write names the version it replaces by its ETag, and S3 servers read an
// If-Match whose ETag is empty as no condition at all (versitygw drops the
// empty header; the SDK sends it empty), so a write built on such a version
// would be blind: a stale writer that observed the object and passed its
// fence check, then paused while a newer holder wrote, would overwrite or
// delete the newer holder's bytes. versitygw serves a file placed in its
// directory by hand without an ETag until the object is written through
// S3 (its posix backend keeps ETags in an extended attribute that only its
// own writes set). No fenced write of such an object is safe, so none is
// sent; the error says how the object gets an ETag.
var errNoETag = errors.New("the object exists without an ETag, so no conditional request can name its version; " +
	"write it once through S3, outside fencegate, so that S3 records one")

// Observe returns the object's current version: its ETag and recorded
// token, or Exists false when there is no object. An object that exists
// without an ETag is an api.ErrUpstream (see errNoETag), never a version.
func (c *Client) Observe(ctx context.Context, p api.ObjectPath) (api.ObjectVersion, error) {
	return c.observe(ctx, api.GetObjectInput{Path: p})
}

// observe is Observe with in's customer key (ObserveWithKey).
func (c *Client) observe(ctx context.Context, in api.GetObjectInput) (api.ObjectVersion, error) {
	p := in.Path
	obj, err := c.head(ctx, in)
	if errors.Is(err, api.ErrNotFound) {
		return api.ObjectVersion{}, nil
	}
	if err != nil {
		return api.ObjectVersion{}, err
	}
	v := api.ObjectVersion{Exists: true, ETag: obj.ETag, Token: obj.Token}
	if !v.Named() {
		return api.ObjectVersion{}, fmt.Errorf("s3 head %s/%s: %w: %w", p.Bucket, p.Key, api.ErrUpstream, errNoETag)
	}
	return v, nil
}

// ConfirmAbsent reports whether S3 says that the bucket exists and holds
// no object named p.Key: S3's NoSuchKey, answered for this bucket and
// key. Observe cannot tell: a HEAD's 404 has no body, so a missing bucket
// (NoSuchBucket), a proxy's or load balancer's bare 404 and a missing key
// all look alike to it. ConfirmAbsent asks with a GET of the object's
// first byte, whose error answer carries S3's code. It reports false with
// no error when the object exists (it was created since it was
// observed), and an error for every other answer: it never guesses.
func (c *Client) ConfirmAbsent(ctx context.Context, p api.ObjectPath) (bool, error) {
	ctx, release := boundConnWait(ctx, c.connWait)
	defer release()
	out, err := c.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(p.Bucket), Key: aws.String(p.Key), Range: aws.String("bytes=0-0")})
	if err == nil {
		out.Body.Close()
		return false, nil
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch code, status := apiErr.ErrorCode(), statusCode(err); {
		case code == "NoSuchKey" && status == http.StatusNotFound:
			return true, nil
		case code == "InvalidRange" && status == http.StatusRequestedRangeNotSatisfiable:
			return false, nil // an empty object: it has no first byte
		}
	}
	if waitErr := connWaitError(ctx, "get", p, c.connWait); waitErr != nil {
		return false, waitErr
	}
	return false, fmt.Errorf("s3 get %s/%s, to confirm it absent: %w", p.Bucket, p.Key, mapReadError(err))
}

// condition is the precondition header of a conditional write, such as
// If-Match: "etag"; the zero condition is none.
type condition struct {
	header string // "If-Match" or "If-None-Match"; empty for none
	value  string
}

// writeCondition builds the condition of in, the one place where it is
// built for both paths: If-Match the ETag of the version in replaces,
// If-None-Match: * when it did not exist, none only when the write is
// UnsafeUnconditional. A version that exists without an ETag has no
// condition that names it, and an If-Match with an empty ETag is no
// condition at all: it is refused (errNoETag), so that no write goes out
// blind because an observation had no ETag.
func writeCondition(in api.PutObjectInput) (condition, error) {
	switch {
	case in.UnsafeUnconditional:
		return condition{}, nil
	case !in.Replaces.Exists:
		return condition{"If-None-Match", "*"}, nil
	case !in.Replaces.Named():
		return condition{}, errNoETag
	}
	return condition{"If-Match", in.Replaces.ETag}, nil
}

// Put writes the object if in.Replaces is still its current version:
// If-Match its ETag, or If-None-Match: * when it did not exist. It returns
// the new ETag. A lost race is api.ErrConcurrentModification. A Replaces
// that exists without an ETag is an api.ErrUpstream, and nothing is sent
// (see writeCondition).
func (c *Client) Put(ctx context.Context, in api.PutObjectInput) (etag string, err error) {
	cond, err := writeCondition(in)
	if err != nil {
		return "", fmt.Errorf("s3 put %s/%s: %w: %w", in.Path.Bucket, in.Path.Key, api.ErrUpstream, err)
	}
	ctx, release := boundConnWait(ctx, c.connWait)
	defer release()
	defer func() {
		if waitErr := connWaitError(ctx, "put", in.Path, c.connWait); err != nil && waitErr != nil {
			err = waitErr
		}
	}()
	if c.signed != nil && in.Size >= 0 {
		etag, sdk, err := c.signed.put(ctx, in, cond)
		if err != nil {
			return "", fmt.Errorf("s3 put %s/%s: %w", in.Path.Bucket, in.Path.Key, mapWriteError(err))
		}
		if !sdk {
			return etag, nil
		}
	}
	put := &s3.PutObjectInput{
		Bucket:        aws.String(in.Path.Bucket),
		Key:           aws.String(in.Path.Key),
		Body:          in.Body,
		ContentLength: aws.Int64(in.Size),
		Metadata:      sdkUserMetadata(in.Metadata, in.Token),

		CacheControl:       optional(in.Metadata.CacheControl),
		ContentDisposition: optional(in.Metadata.ContentDisposition),
		ContentEncoding:    optional(in.Metadata.ContentEncoding),
		ContentLanguage:    optional(in.Metadata.ContentLanguage),
		Expires:            sdkExpires(in.Metadata),
		Tagging:            optional(tagging(in.Metadata)),

		ServerSideEncryption:    types.ServerSideEncryption(in.Encryption.Algorithm),
		SSEKMSKeyId:             optional(in.Encryption.KMSKeyID),
		SSEKMSEncryptionContext: optional(in.Encryption.KMSContext),
		BucketKeyEnabled:        sdkBucketKey(in.Encryption),
	}
	put.SSECustomerAlgorithm, put.SSECustomerKey, put.SSECustomerKeyMD5 = sdkCustomerKey(in.Encryption.Customer)
	if in.ContentType != "" {
		put.ContentType = aws.String(in.ContentType)
	}
	switch cond.header {
	case "If-Match":
		put.IfMatch = aws.String(cond.value)
	case "If-None-Match":
		put.IfNoneMatch = aws.String(cond.value)
	}
	out, err := c.s3.PutObject(ctx, put)
	if err != nil {
		return "", fmt.Errorf("s3 put %s/%s: %w", in.Path.Bucket, in.Path.Key, mapWriteError(err))
	}
	if in.Answered != nil {
		*in.Answered = sdkEncryption(out.ServerSideEncryption, out.SSEKMSKeyId, out.SSEKMSEncryptionContext, out.BucketKeyEnabled, out.SSECustomerAlgorithm, out.SSECustomerKeyMD5)
	}
	return aws.ToString(out.ETag), nil
}

// Delete deletes the object if its ETag is still etag (If-Match). A lost
// race, including an object already gone, is api.ErrConcurrentModification.
// An empty etag is an api.ErrUpstream, and nothing is sent: an empty
// If-Match is no condition, and the delete would be blind (see errNoETag).
func (c *Client) Delete(ctx context.Context, p api.ObjectPath, etag string) error {
	if !(api.ObjectVersion{Exists: true, ETag: etag}).Named() {
		return fmt.Errorf("s3 delete %s/%s: %w: %w", p.Bucket, p.Key, api.ErrUpstream, errNoETag)
	}
	ctx, release := boundConnWait(ctx, c.connWait)
	defer release()
	_, err := c.s3.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket:  aws.String(p.Bucket),
		Key:     aws.String(p.Key),
		IfMatch: aws.String(etag),
	})
	if waitErr := connWaitError(ctx, "delete", p, c.connWait); err != nil && waitErr != nil {
		return waitErr
	}
	if err != nil {
		return fmt.Errorf("s3 delete %s/%s: %w", p.Bucket, p.Key, mapWriteError(err))
	}
	return nil
}

// Get reads the object, or the range of it that in.Range names, or the
// part that in.PartNumber names (a part past the last is
// api.ErrRangeNotSatisfiable, S3's 416 InvalidPartNumber), if in's
// preconditions hold. The caller closes its Body. S3's 304 is a result,
// Object.NotModified, with the current version's ETag, Last-Modified and
// token (see withCurrentVersion); its 412 is api.ErrPreconditionFailed and
// its 416 api.ErrRangeNotSatisfiable.
func (c *Client) Get(ctx context.Context, in api.GetObjectInput) (*api.Object, error) {
	return c.withCurrentVersion(ctx, in, c.get)
}

// Head reads the object's metadata, if in's preconditions hold. in.Range
// and in.PartNumber are sent, as S3 reads them on a HEAD: the range's or
// the part's Size and ContentRange are answered (and PartsCount), a
// range past the end is api.ErrRangeNotSatisfiable. Its answers are
// Get's, without a Body.
func (c *Client) Head(ctx context.Context, in api.GetObjectInput) (*api.Object, error) {
	return c.withCurrentVersion(ctx, in, c.head)
}

// notModifiedAttempts bounds the conditional reads of withCurrentVersion.
const notModifiedAttempts = 3

// withCurrentVersion runs read, and completes a 304 that does not carry
// the object's recorded token. S3 servers answer 304 with few headers
// (versitygw with none of ETag, Last-Modified or metadata), but the
// client's 304 must say which token the version it holds was written
// with. A HEAD without conditions then reads the current version, and it
// answers the 304 only if the client's preconditions still say "not
// modified" for that version (stillNotModified): the 304 then describes a
// version that was current at the HEAD, with its own token and metadata
// (whose Cache-Control and Expires the client's 304 repeats), never
// another version's. If the object changed in between, the read starts again, at
// most notModifiedAttempts times; after that it is an api.ErrUpstream.
func (c *Client) withCurrentVersion(ctx context.Context, in api.GetObjectInput, read func(context.Context, api.GetObjectInput) (*api.Object, error)) (*api.Object, error) {
	for attempt := 1; ; attempt++ {
		obj, err := read(ctx, in)
		if err != nil || !obj.NotModified || obj.Token != 0 {
			return obj, err
		}
		current, err := c.head(ctx, api.GetObjectInput{Path: in.Path, Customer: in.Customer})
		if err != nil && !errors.Is(err, api.ErrNotFound) { // not found: deleted since; read again
			return nil, err
		}
		if err == nil && stillNotModified(in, obj, current) {
			current.NotModified, current.Size, current.ContentType = true, 0, ""
			return current, nil
		}
		if attempt == notModifiedAttempts {
			return nil, fmt.Errorf("s3 get %s/%s: %w: the object changed during each of %d conditional reads",
				in.Path.Bucket, in.Path.Key, api.ErrUpstream, notModifiedAttempts)
		}
	}
}

// stillNotModified reports whether current, read after S3 answered 304
// (answer) to in, is a version for which in's preconditions still give
// 304: the version S3's answer named, if it named one; else one that
// passes in's If-Match and matches its If-None-Match, or, without
// If-None-Match, was not modified after its If-Modified-Since (RFC 9110
// section 13.2.2, at the one-second precision of HTTP dates).
func stillNotModified(in api.GetObjectInput, answer, current *api.Object) bool {
	switch {
	case answer.ETag != "":
		return current.ETag == answer.ETag
	case in.IfMatch != "" && !matchesEntityTag(in.IfMatch, current.ETag, false):
		return false
	case in.IfNoneMatch != "":
		return matchesEntityTag(in.IfNoneMatch, current.ETag, true)
	case !in.IfModifiedSince.IsZero():
		return !current.LastModified.Truncate(time.Second).After(in.IfModifiedSince)
	}
	return false
}

// matchesEntityTag reports whether list ("*" or comma-separated entity
// tags) matches etag, by weak or strong comparison (RFC 9110 section
// 8.8.3.2): strong comparison never matches a weak tag.
func matchesEntityTag(list, etag string, weak bool) bool {
	if strings.TrimSpace(list) == "*" {
		return etag != ""
	}
	if !weak && strings.HasPrefix(etag, "W/") {
		return false
	}
	etag = strings.TrimPrefix(etag, "W/")
	for _, tag := range strings.Split(list, ",") {
		tag = strings.TrimSpace(tag)
		if strings.HasPrefix(tag, "W/") {
			if !weak {
				continue
			}
			tag = tag[2:]
		}
		if tag == etag {
			return true
		}
	}
	return false
}

// get is Get without withCurrentVersion.
func (c *Client) get(ctx context.Context, in api.GetObjectInput) (*api.Object, error) {
	p := in.Path
	get := &s3.GetObjectInput{Bucket: aws.String(p.Bucket), Key: aws.String(p.Key)}
	if in.Range != "" {
		get.Range = aws.String(in.Range)
	}
	if in.PartNumber != 0 {
		get.PartNumber = aws.Int32(in.PartNumber)
	}
	if in.ChecksumMode {
		get.ChecksumMode = types.ChecksumModeEnabled
	}
	get.SSECustomerAlgorithm, get.SSECustomerKey, get.SSECustomerKeyMD5 = sdkCustomerKey(in.Customer)
	if in.IfMatch != "" {
		get.IfMatch = aws.String(in.IfMatch)
	}
	if in.IfNoneMatch != "" {
		get.IfNoneMatch = aws.String(in.IfNoneMatch)
	}
	if !in.IfModifiedSince.IsZero() {
		get.IfModifiedSince = aws.Time(in.IfModifiedSince)
	}
	if !in.IfUnmodifiedSince.IsZero() {
		get.IfUnmodifiedSince = aws.Time(in.IfUnmodifiedSince)
	}
	ctx, release := boundConnWait(ctx, c.connWait)
	out, err := c.s3.GetObject(ctx, get)
	if obj, ok := notModified(err); ok {
		release()
		return obj, nil
	}
	if err != nil {
		release()
		if waitErr := connWaitError(ctx, "get", p, c.connWait); waitErr != nil {
			return nil, waitErr
		}
		return nil, fmt.Errorf("s3 get %s/%s: %w", p.Bucket, p.Key, mapReadError(err))
	}
	return &api.Object{
		Body:         &releasingBody{ReadCloser: out.Body, release: release},
		Size:         aws.ToInt64(out.ContentLength),
		ContentType:  aws.ToString(out.ContentType),
		ETag:         aws.ToString(out.ETag),
		LastModified: aws.ToTime(out.LastModified),
		Metadata:     metadataFromSDK(out.Metadata, out.CacheControl, out.ContentDisposition, out.ContentEncoding, out.ContentLanguage, out.ExpiresString),
		Token:        recordedToken(out.Metadata),
		ContentRange: aws.ToString(out.ContentRange),
		PartsCount:   aws.ToInt32(out.PartsCount),
		StorageClass: string(out.StorageClass),
		Checksums: api.ObjectChecksums{CRC32: aws.ToString(out.ChecksumCRC32), CRC32C: aws.ToString(out.ChecksumCRC32C),
			CRC64NVME: aws.ToString(out.ChecksumCRC64NVME), SHA1: aws.ToString(out.ChecksumSHA1), SHA256: aws.ToString(out.ChecksumSHA256),
			SHA512: aws.ToString(out.ChecksumSHA512), MD5: aws.ToString(out.ChecksumMD5), XXHASH64: aws.ToString(out.ChecksumXXHASH64),
			XXHASH3: aws.ToString(out.ChecksumXXHASH3), XXHASH128: aws.ToString(out.ChecksumXXHASH128),
			Type: string(out.ChecksumType)},
		Encryption: sdkEncryption(out.ServerSideEncryption, out.SSEKMSKeyId, nil, out.BucketKeyEnabled, out.SSECustomerAlgorithm, out.SSECustomerKeyMD5),
	}, nil
}

// head is Head without withCurrentVersion.
func (c *Client) head(ctx context.Context, in api.GetObjectInput) (_ *api.Object, err error) {
	p := in.Path
	ctx, release := boundConnWait(ctx, c.connWait)
	defer release()
	defer func() {
		if waitErr := connWaitError(ctx, "head", p, c.connWait); err != nil && waitErr != nil {
			err = waitErr
		}
	}()
	if c.signed != nil {
		obj, sdk, err := c.signed.head(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("s3 head %s/%s: %w", p.Bucket, p.Key, mapReadError(err))
		}
		if !sdk {
			return obj, nil
		}
	}
	head := &s3.HeadObjectInput{Bucket: aws.String(p.Bucket), Key: aws.String(p.Key)}
	if in.PartNumber != 0 {
		head.PartNumber = aws.Int32(in.PartNumber)
	}
	if in.Range != "" {
		head.Range = aws.String(in.Range)
	}
	if in.ChecksumMode {
		head.ChecksumMode = types.ChecksumModeEnabled
	}
	head.SSECustomerAlgorithm, head.SSECustomerKey, head.SSECustomerKeyMD5 = sdkCustomerKey(in.Customer)
	if in.IfMatch != "" {
		head.IfMatch = aws.String(in.IfMatch)
	}
	if in.IfNoneMatch != "" {
		head.IfNoneMatch = aws.String(in.IfNoneMatch)
	}
	if !in.IfModifiedSince.IsZero() {
		head.IfModifiedSince = aws.Time(in.IfModifiedSince)
	}
	if !in.IfUnmodifiedSince.IsZero() {
		head.IfUnmodifiedSince = aws.Time(in.IfUnmodifiedSince)
	}
	out, err := c.s3.HeadObject(ctx, head)
	if obj, ok := notModified(err); ok {
		return obj, nil
	}
	if err != nil {
		return nil, fmt.Errorf("s3 head %s/%s: %w", p.Bucket, p.Key, mapReadError(err))
	}
	return &api.Object{
		Size:         aws.ToInt64(out.ContentLength),
		ContentType:  aws.ToString(out.ContentType),
		ETag:         aws.ToString(out.ETag),
		LastModified: aws.ToTime(out.LastModified),
		Metadata:     metadataFromSDK(out.Metadata, out.CacheControl, out.ContentDisposition, out.ContentEncoding, out.ContentLanguage, out.ExpiresString),
		Token:        recordedToken(out.Metadata),
		ContentRange: aws.ToString(out.ContentRange),
		PartsCount:   aws.ToInt32(out.PartsCount),
		StorageClass: string(out.StorageClass),
		Checksums: api.ObjectChecksums{CRC32: aws.ToString(out.ChecksumCRC32), CRC32C: aws.ToString(out.ChecksumCRC32C),
			CRC64NVME: aws.ToString(out.ChecksumCRC64NVME), SHA1: aws.ToString(out.ChecksumSHA1), SHA256: aws.ToString(out.ChecksumSHA256),
			SHA512: aws.ToString(out.ChecksumSHA512), MD5: aws.ToString(out.ChecksumMD5), XXHASH64: aws.ToString(out.ChecksumXXHASH64),
			XXHASH3: aws.ToString(out.ChecksumXXHASH3), XXHASH128: aws.ToString(out.ChecksumXXHASH128),
			Type: string(out.ChecksumType)},
		Encryption: sdkEncryption(out.ServerSideEncryption, out.SSEKMSKeyId, nil, out.BucketKeyEnabled, out.SSECustomerAlgorithm, out.SSECustomerKeyMD5),
	}, nil
}

// notModified turns the SDK's error for S3's 304 into the result it is:
// the SDK reports every answer outside 2xx as an error, a 304 included.
func notModified(err error) (*api.Object, bool) {
	var respErr *smithyhttp.ResponseError
	if !errors.As(err, &respErr) || respErr.Response == nil || respErr.Response.StatusCode != http.StatusNotModified {
		return nil, false
	}
	return notModifiedObject(respErr.Response.Header), true
}

// notModifiedObject is the result of a 304 with header: the current
// ETag, Last-Modified, metadata (Cache-Control and Expires, from the S3
// servers that repeat them) and recorded token, as S3 gave them.
func notModifiedObject(h http.Header) *api.Object {
	obj := &api.Object{NotModified: true, ETag: h.Get("ETag"), Metadata: metadataFromHeaders(h)}
	if t, err := http.ParseTime(h.Get("Last-Modified")); err == nil {
		obj.LastModified = t
	}
	if t, err := api.ParseToken(h.Get(fenceTokenHeader)); err == nil {
		obj.Token = t
	}
	return obj
}

// Ping checks that S3 answers and the credentials are accepted, by listing
// at most one bucket.
func (c *Client) Ping(ctx context.Context) error {
	if _, err := c.s3.ListBuckets(ctx, &s3.ListBucketsInput{MaxBuckets: aws.Int32(1)}); err != nil {
		return fmt.Errorf("s3 ping: %w", mapReadError(err))
	}
	return nil
}

// recordedToken returns the token a fenced write recorded on an object, or
// zero when there is none or it is not a valid token.
func recordedToken(meta map[string]string) api.Token {
	for k, v := range meta { // servers differ in the case they return
		if strings.EqualFold(k, api.MetadataFenceToken) {
			if t, err := api.ParseToken(v); err == nil {
				return t
			}
		}
	}
	return 0
}

// mapWriteError maps the failure of a conditional write. S3 answers a lost
// race in three ways: 412 PreconditionFailed (the ETag changed), 404
// NoSuchKey (If-Match on an object that is gone) and 409
// ConditionalRequestConflict (a concurrent conditional write is in
// progress). All three mean "someone else wrote first".
func mapWriteError(err error) error {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "PreconditionFailed", "NoSuchKey", "ConditionalRequestConflict":
			return storeError(api.ErrConcurrentModification, err, false)
		case "NoSuchBucket":
			return storeError(api.ErrNotFound, err, true)
		}
	}
	switch statusCode(err) {
	case http.StatusPreconditionFailed, http.StatusConflict:
		return storeError(api.ErrConcurrentModification, err, false)
	}
	return storeError(classOf(upstream.Transport(err)), err, refusedOther(err))
}

// mapReadError maps the failure of a read: S3's 404 (NoSuchKey, or a
// HEAD's bodiless NotFound), its 412 to a read's If-Match or
// If-Unmodified-Since, and its 416 to a range past the end (InvalidRange)
// or a part past the last (InvalidPartNumber).
func mapReadError(err error) error {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "NoSuchKey", "NoSuchBucket":
			return storeError(api.ErrNotFound, err, true)
		case "NotFound": // a HEAD's 404, which has no body to say which
			return storeError(api.ErrNotFound, err, false)
		case "PreconditionFailed":
			return storeError(api.ErrPreconditionFailed, err, true)
		case "InvalidRange", "InvalidPartNumber":
			return storeError(api.ErrRangeNotSatisfiable, err, true)
		}
	}
	return storeError(classOf(upstream.ReadStatus(statusCode(err), err)), err, refusedOther(err))
}

// statusCode is the HTTP status of S3's answer, from the SDK's
// *awshttp.ResponseError or the signed path's *responseError; 0 if none.
func statusCode(err error) int {
	var respErr interface{ HTTPStatusCode() int }
	if errors.As(err, &respErr) {
		return respErr.HTTPStatusCode()
	}
	return 0
}
