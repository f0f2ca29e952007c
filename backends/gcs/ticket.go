package gcs

import (
	"context"
	"fmt"

	"fencegate/api"
)

// errNoTicketTests says why GCS buckets get no tickets. A GCS ticket
// would be a V4 signed URL for a PUT that signs x-goog-if-generation-match
// (the generation observed, 0 for "must not exist") and
// x-goog-meta-fence-token; its safety would rest entirely on GCS
// verifying the signature, the expiry and the condition of a signed
// request. The only GCS server the tests can run, fake-gcs-server
// (v1.56.1), verifies none of them: it takes a PUT with X-Goog-Algorithm
// in its query as a signed upload without checking the signature or the
// expiry, and writes it with no precondition, ignoring
// x-goog-if-generation-match (TestFakeGCSSignedURLsEnforceNothing). No
// test could show that a stale ticket is refused, so none is issued.
const errNoTicketTests = "GCS buckets take no tickets: the GCS emulator the tests run verifies neither the signature, the expiry nor the generation condition of a V4 signed URL, so nothing shows that a stale ticket would be refused; write through the gateway"

// PresignPut refuses every ticket with api.ErrNotImplemented (see
// errNoTicketTests), after the checks any store makes (an r that does
// not validate is an api.ErrInvalidRequest). Nothing is sent to GCS.
func (c *Client) PresignPut(_ context.Context, r api.TicketRequest) (api.Ticket, error) {
	if err := r.Validate(); err != nil {
		return api.Ticket{}, fmt.Errorf("gcs presign put %s/%s: %w", r.Path.Bucket, r.Path.Key, err)
	}
	return api.Ticket{}, fmt.Errorf("gcs presign put %s/%s: %w: %s", r.Path.Bucket, r.Path.Key, api.ErrNotImplemented, errNoTicketTests)
}
