package s3

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"fencegate/api"
)

// A ticket (package api) is, at S3, a presigned request: SigV4 query
// authentication with the gateway's credentials (X-Amz-Algorithm,
// X-Amz-Credential, X-Amz-Date, X-Amz-Expires, X-Amz-SignedHeaders and
// X-Amz-Signature in the URL), built by the SDK's presign client and
// signed by its v4 signer. The signer signs every header of the request
// but a few it ignores (none of which a ticket sets), so a ticket signs:
//
//	host
//	content-length       the exact size (the signer signs it only when positive)
//	content-type         when the ticket names one
//	if-match             the ETag observed, or
//	if-none-match: *     when the object did not exist
//	x-amz-meta-fence-token and every other x-amz-meta-NAME
//
// The signer hoists other x-amz-* headers into the query instead of
// signing them as headers; a ticket sets none. A part's ticket signs host
// and content-length only: its upload is fenced at its creation and its
// completion, which go through the gateway. What S3 servers enforce of
// this, measured on versitygw and as AWS documents it, is in
// docs/tickets.md (TestTicket*).

// PresignPut returns a ticket (a presigned PUT) with which a client writes
// r.Path, if r.Replaces is still its current version, with r's token,
// size, content type and metadata, until the ticket expires. Nothing is
// sent to S3. An r that does not validate is an api.ErrInvalidRequest.
func (c *Client) PresignPut(ctx context.Context, r api.TicketRequest) (api.Ticket, error) {
	if err := r.Validate(); err != nil {
		return api.Ticket{}, fmt.Errorf("s3 presign put %s/%s: %w", r.Path.Bucket, r.Path.Key, err)
	}
	put := &s3.PutObjectInput{
		Bucket:        aws.String(r.Path.Bucket),
		Key:           aws.String(r.Path.Key),
		ContentLength: aws.Int64(r.Size),
		ContentType:   optional(r.ContentType),
		Metadata:      sdkUserMetadata(api.ObjectMetadata{User: r.Metadata}, r.Token),
	}
	switch {
	case r.UnsafeUnconditional:
	case r.Replaces.Exists:
		put.IfMatch = aws.String(r.Replaces.ETag)
	default:
		put.IfNoneMatch = aws.String("*")
	}
	signingTime, expires := c.now(), ticketExpiry(r.Expires)
	req, err := c.presignClient(signingTime, expires).PresignPutObject(ctx, put)
	if err != nil {
		return api.Ticket{}, fmt.Errorf("s3 presign put %s/%s: %w: %w", r.Path.Bucket, r.Path.Key, api.ErrUpstream, err)
	}
	return ticket(req.Method, req.URL, req.SignedHeader, signingTime, expires)
}

// PresignUploadPart returns a ticket (a presigned UploadPart) with which a
// client sends part r.PartNumber of the multipart upload r.UploadID, of
// exactly r.Size bytes, until the ticket expires. Nothing is sent to S3.
// An r that does not validate is an api.ErrInvalidRequest.
func (c *Client) PresignUploadPart(ctx context.Context, r api.PartTicketRequest) (api.Ticket, error) {
	return c.presignUploadPartAt(ctx, r, c.now())
}

// presignUploadPartAt is PresignUploadPart signed at signingTime.
func (c *Client) presignUploadPartAt(ctx context.Context, r api.PartTicketRequest, signingTime time.Time) (api.Ticket, error) {
	if err := r.Validate(); err != nil {
		return api.Ticket{}, fmt.Errorf("s3 presign part %s/%s: %w", r.Path.Bucket, r.Path.Key, err)
	}
	part := &s3.UploadPartInput{
		Bucket:        aws.String(r.Path.Bucket),
		Key:           aws.String(r.Path.Key),
		UploadId:      aws.String(r.UploadID),
		PartNumber:    aws.Int32(r.PartNumber),
		ContentLength: aws.Int64(r.Size),
	}
	expires := ticketExpiry(r.Expires)
	req, err := c.presignClient(signingTime, expires).PresignUploadPart(ctx, part)
	if err != nil {
		return api.Ticket{}, fmt.Errorf("s3 presign part %s/%s: %w: %w", r.Path.Bucket, r.Path.Key, api.ErrUpstream, err)
	}
	return ticket(req.Method, req.URL, req.SignedHeader, signingTime, expires)
}

// ticketExpiry is a request's expiry, or api.DefaultTicketExpiry for zero.
func ticketExpiry(d time.Duration) time.Duration {
	if d == 0 {
		return api.DefaultTicketExpiry
	}
	return d
}

// presignClient is the SDK's presign client for c's S3 client, whose
// requests are signed at signingTime and valid for expires.
func (c *Client) presignClient(signingTime time.Time, expires time.Duration) *s3.PresignClient {
	return s3.NewPresignClient(c.s3, func(o *s3.PresignOptions) {
		o.Expires = expires
		o.Presigner = fixedTimePresigner{signer: ticketSigner, at: signingTime}
	})
}

// ticketSigner signs tickets as the SDK's S3 client signs its requests:
// without escaping the path again (S3 signs the path as sent, each
// segment escaped once; escaped twice, a key with a space or a '+' would
// not verify).
var ticketSigner = v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })

// fixedTimePresigner signs at its own time rather than the SDK's clock,
// so that a ticket's ExpiresAt is exactly its signing time plus its
// expiry, and tests can sign at another time (Client.now).
type fixedTimePresigner struct {
	signer *v4.Signer
	at     time.Time
}

func (p fixedTimePresigner) PresignHTTP(ctx context.Context, creds aws.Credentials, r *http.Request, payloadHash, service, region string, _ time.Time, optFns ...func(*v4.SignerOptions)) (string, http.Header, error) {
	return p.signer.PresignHTTP(ctx, creds, r, payloadHash, service, region, p.at, optFns...)
}

// ticket is the api.Ticket of a presigned request: its headers but Host,
// which the client's URL carries, each with its one value (a header
// signed with several values could not be told as one exactly: an
// error). ExpiresAt counts from X-Amz-Date, the signing time in whole
// seconds.
func ticket(method, url string, signed http.Header, signingTime time.Time, expires time.Duration) (api.Ticket, error) {
	t := api.Ticket{Method: method, URL: url, ExpiresAt: signingTime.UTC().Truncate(time.Second).Add(expires)}
	for name, values := range signed {
		if name == "Host" {
			continue
		}
		if len(values) != 1 {
			return api.Ticket{}, fmt.Errorf("s3 presign: header %s signed with %d values", name, len(values))
		}
		if t.Headers == nil {
			t.Headers = make(map[string]string, len(signed))
		}
		t.Headers[name] = values[0]
	}
	return t, nil
}

// now is the time at which c signs tickets: its clock, or time.Now.
func (c *Client) now() time.Time {
	if c.clock != nil {
		return c.clock()
	}
	return time.Now()
}
