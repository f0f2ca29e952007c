package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"fencegate/api"
)

// ticketAttempts bounds the tickets PutObjectOnTicket asks for when the
// store refuses each one's write because the object changed (412), as
// the gateway bounds its own rounds (its WriteAttempts, 3).
const ticketAttempts = 3

// issuedTicket is the gateway's answer to POST /v1/tickets.
type issuedTicket struct {
	api.Ticket
	Resource     api.Resource `json:"resource"`
	Token        api.Token    `json:"token"`
	ReplacesETag string       `json:"replaces_etag"`
}

// PutObjectOnTicket writes body (its bytes from where it stands to its
// end) to bucket/key with the fencing token, straight to the store: it
// asks the gateway for a ticket (POST /v1/tickets, the fenced PUT's
// checks up to the write) and sends the bytes to the store on it, so
// that they never pass through the gateway. A store that refuses the
// write because the object changed since the gateway observed it (412)
// is asked again on a new ticket, from a fresh observation, as the
// gateway retries its own write, up to 3 tickets (then an error wrapping
// api.ErrConcurrentModification); a newer holder's write makes the next
// ticket a stale token (api.ErrStaleToken). The gateway's refusals are
// PutObject's; a bucket whose store takes no tickets is
// api.ErrNotImplemented. An empty body takes no ticket: use PutObject.
//
// With Client.TicketPartSize, a body larger than it is sent in parts on a
// multipart ticket, and the upload completed through the gateway
// (CompleteUpload), fenced again: a newer holder's fence check since the
// ticket makes the write api.ErrStaleToken. The parts' tickets are asked
// for in batches as the parts go (PartTickets), so the upload may take
// longer than a ticket's life.
func (c *Client) PutObjectOnTicket(ctx context.Context, bucket, key string, token api.Token, body io.ReadSeeker) (*PutResult, error) {
	start, size, err := remaining(body)
	if err != nil {
		return nil, fmt.Errorf("fencegate ticket %s/%s: %w", bucket, key, err)
	}
	if c.TicketPartSize > 0 && size > c.TicketPartSize {
		return c.putInParts(ctx, bucket, key, token, body, start, size)
	}
	for attempt := 1; ; attempt++ {
		if _, err := body.Seek(start, io.SeekStart); err != nil {
			return nil, fmt.Errorf("fencegate ticket %s/%s: %w", bucket, key, err)
		}
		t, err := c.ticket(ctx, bucket, key, token, size)
		if err != nil {
			return nil, err
		}
		res, err := c.sendOnTicket(ctx, t, io.LimitReader(body, size), size)
		if errors.Is(err, api.ErrConcurrentModification) && attempt < ticketAttempts {
			continue
		}
		return res, err
	}
}

// putAboveThreshold is PutObject on a ticket, when Client.TicketThreshold
// asks for one and body can be read again; done is false when PutObject
// is to write through the gateway (body then stands where it stood).
func (c *Client) putAboveThreshold(ctx context.Context, bucket, key string, token api.Token, body io.Reader) (res *PutResult, done bool, err error) {
	seeker, ok := body.(io.ReadSeeker)
	if c.TicketThreshold <= 0 || !ok {
		return nil, false, nil
	}
	start, size, err := remaining(seeker)
	if err != nil || size <= c.TicketThreshold {
		// A body that cannot seek after all (an *os.File of a pipe)
		// goes through the gateway, as any other.
		return nil, false, nil
	}
	res, err = c.PutObjectOnTicket(ctx, bucket, key, token, seeker)
	if errors.Is(err, api.ErrNotImplemented) {
		if _, err := seeker.Seek(start, io.SeekStart); err != nil {
			return nil, true, err
		}
		return nil, false, nil
	}
	return res, true, err
}

// remaining returns where body stands and how many bytes it has from
// there to its end, and leaves it where it stood.
func remaining(body io.Seeker) (start, size int64, err error) {
	if start, err = body.Seek(0, io.SeekCurrent); err != nil {
		return 0, 0, err
	}
	end, err := body.Seek(0, io.SeekEnd)
	if _, serr := body.Seek(start, io.SeekStart); err != nil || serr != nil {
		return 0, 0, errors.Join(err, serr)
	}
	return start, end - start, nil
}

// ticket asks the gateway for a ticket to write size bytes.
func (c *Client) ticket(ctx context.Context, bucket, key string, token api.Token, size int64) (issuedTicket, error) {
	var t issuedTicket
	req := request{method: http.MethodPost, path: "/v1/tickets/" + escapePath(bucket) + "/" + escapePath(key),
		header: tokenHeader(token), json: map[string]int64{"size": size}}
	err := c.sendJSON(ctx, req, http.StatusCreated, &t)
	return t, err
}

// sendOnTicket sends body, of size bytes, to the store as t says. A 412
// is api.ErrConcurrentModification; any other refusal is an error with
// the store's answer.
func (c *Client) sendOnTicket(ctx context.Context, t issuedTicket, body io.Reader, size int64) (*PutResult, error) {
	resp, err := c.sendTicket(ctx, t.Resource, t.Ticket, body, size)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes))
	switch resp.StatusCode {
	case http.StatusOK:
		return &PutResult{Resource: t.Resource, Token: t.Token, ETag: resp.Header.Get("ETag"),
			Created: t.ReplacesETag == "", ReplacedETag: t.ReplacesETag}, nil
	case http.StatusPreconditionFailed:
		return nil, fmt.Errorf("fencegate ticket %s: %w: the object changed since the gateway observed it", t.Resource, api.ErrConcurrentModification)
	}
	return nil, fmt.Errorf("fencegate ticket %s: the store answered %s: %.200q", t.Resource, resp.Status, b)
}

// sendTicket sends body, of size bytes, to the store as t, a ticket to
// write resource, says, and returns the store's answer, whatever its
// status. The caller closes its body.
func (c *Client) sendTicket(ctx context.Context, resource api.Resource, t api.Ticket, body io.Reader, size int64) (*http.Response, error) {
	if time.Now().After(t.ExpiresAt) {
		return nil, fmt.Errorf("fencegate ticket %s: %w before it was used", resource, errTicketExpired)
	}
	req, err := http.NewRequestWithContext(ctx, t.Method, t.URL, body)
	if err != nil {
		return nil, fmt.Errorf("fencegate ticket %s: %w", resource, err)
	}
	for name, value := range t.Headers {
		if name != "Content-Length" {
			req.Header.Set(name, value)
		}
	}
	req.ContentLength = size
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("fencegate ticket %s: %w", resource, err)
	}
	return resp, nil
}
