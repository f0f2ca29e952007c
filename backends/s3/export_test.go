package s3

import (
	"context"
	"time"

	"fencegate/api"
)

// ThroughSDK returns a Client that sends every request through the SDK's
// operations, so that tests can compare the signed path with them.
func ThroughSDK(c *Client) *Client { return &Client{s3: c.s3, connWait: c.connWait} }

// UsesSignedPath reports whether c sends Put and Head on the signed path.
func UsesSignedPath(c *Client) bool { return c.signed != nil }

// WithClock returns a copy of c that signs tickets at the times now
// gives, so that tests can make a ticket that has already expired.
func WithClock(c *Client, now func() time.Time) *Client {
	copied := *c
	copied.clock = now
	return &copied
}

// SignsPartsItself reports whether PresignUploadParts signs the parts
// after r itself, from t, the SDK's ticket of r (newPartSigner).
func SignsPartsItself(c *Client, ctx context.Context, r api.PartTicketRequest, t api.Ticket) bool {
	return c.newPartSigner(ctx, r, t) != nil
}
