package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"fencegate/api"
)

// maxMultipartTicketBytes bounds the answer to a multipart ticket that
// the client reads: api.MaxParts presigned URLs, each about 550 bytes and
// the escaped bucket and key (docs/tickets.md: 5.5 MB with short names,
// about 37 MB with a 1 KiB key escaped byte for byte).
const maxMultipartTicketBytes = 64 << 20

// abortTimeout bounds the abort of an upload that PutObjectOnTicket
// gives up, sent even when ctx has ended.
const abortTimeout = 30 * time.Second

// MultipartTicket is the gateway's answer to a multipart ticket request:
// a fenced multipart upload, created and bound by the gateway, and a
// ticket for each of its parts, which the client sends straight to the
// store. Complete the upload with Client.CompleteUpload, or abort it with
// Client.AbortUpload.
type MultipartTicket struct {
	Resource api.Resource `json:"resource"`
	Token    api.Token    `json:"token"`
	// UploadID is the upload's id for CompleteUpload and AbortUpload: the
	// creator's capability, to keep as one keeps the token.
	UploadID string `json:"upload_id"`
	// FirstPart is the number of Parts[0]'s part: 1 in a multipart
	// ticket, the part asked for in PartTickets' answer.
	FirstPart int32 `json:"first_part"`
	// Parts are the parts' tickets, part FirstPart first, each for the
	// next number; each is sent once, with its headers, and the store
	// answers the part's ETag.
	Parts []api.Ticket `json:"parts"`
	// ExpiresAt is when the parts' tickets expire.
	ExpiresAt time.Time `json:"expires_at"`
}

// MultipartTicket asks the gateway for a multipart ticket to write size
// bytes to bucket/key with the fencing token, in parts of partSize bytes
// (the last smaller; api.MinPartSize to api.MaxPartSize, at most
// api.MaxParts parts): the fenced PUT's checks up to the write, then an
// upload bound to the token (POST /v1/tickets with part_size). Its
// refusals are PutObject's; a bucket whose store takes no tickets is
// api.ErrNotImplemented.
//
// Every part's ticket is in the answer, and they expire together: for
// an upload that takes longer than a ticket's life, ask for the first
// parts only (PartTickets names the rest), as PutObjectOnTicket does.
func (c *Client) MultipartTicket(ctx context.Context, bucket, key string, token api.Token, size, partSize int64) (*MultipartTicket, error) {
	return c.multipartTicket(ctx, bucket, key, token, map[string]any{"size": size, "part_size": partSize})
}

// PartTickets asks the gateway for fresh tickets of count parts (1 to
// api.MaxPartTickets) of the upload uploadID of bucket/key, a
// MultipartTicket's, from part first: for the parts whose tickets expired
// before they were sent (POST /v1/tickets with upload_id). They are
// refused as the upload's parts are: a token that is not the upload's,
// or parts that are not among its, is api.ErrInvalidRequest; an id that
// names no upload of the key, or an upload completed or aborted,
// api.ErrNotFound; once a newer holder's fence check made the token
// stale, api.ErrStaleToken, and the gateway aborts the upload.
func (c *Client) PartTickets(ctx context.Context, bucket, key string, token api.Token, uploadID string, first, count int32) (*MultipartTicket, error) {
	return c.multipartTicket(ctx, bucket, key, token, map[string]any{"upload_id": uploadID, "first_part": first, "part_count": count})
}

// multipartTicket sends a multipart ticket's request of the JSON body
// given and reads its answer.
func (c *Client) multipartTicket(ctx context.Context, bucket, key string, token api.Token, body map[string]any) (*MultipartTicket, error) {
	req := request{method: http.MethodPost, path: "/v1/tickets/" + escapePath(bucket) + "/" + escapePath(key),
		header: tokenHeader(token), json: body}
	var t MultipartTicket
	if err := c.sendJSONUpTo(ctx, req, maxMultipartTicketBytes, &t, http.StatusCreated); err != nil {
		return nil, err
	}
	if t.FirstPart == 0 { // a gateway that did not say
		t.FirstPart = 1
	}
	return &t, nil
}

func uploadPath(bucket, key string) string {
	return "/v1/uploads/" + escapePath(bucket) + "/" + escapePath(key)
}

// CompleteUpload completes, through the gateway, the multipart upload
// uploadID of bucket/key (a MultipartTicket's) from parts: each part's
// number and the ETag the store answered it with, by ascending number
// (POST /v1/uploads). The completion is the write, fenced as PutObject's:
// a newer holder's fence check since the ticket is an error wrapping
// api.ErrStaleToken, and the gateway aborts the upload; an id that names
// no upload of the key is api.ErrNotFound. The same completion sent again
// (a retry) gets the same ETag, with Created false, and writes nothing.
func (c *Client) CompleteUpload(ctx context.Context, bucket, key string, token api.Token, uploadID string, parts []api.CompletedPart) (*PutResult, error) {
	return c.sendWrite(ctx, request{method: http.MethodPost, path: uploadPath(bucket, key), header: tokenHeader(token),
		json: api.UploadCompletion{UploadID: uploadID, Parts: parts}})
}

// AbortUpload aborts, through the gateway, the multipart upload uploadID
// of bucket/key (DELETE /v1/uploads): the store drops its parts. Its
// creator may abort it with its token even once the token is stale; an
// id that names no upload of the key is api.ErrNotFound.
func (c *Client) AbortUpload(ctx context.Context, bucket, key string, token api.Token, uploadID string) error {
	req := request{method: http.MethodDelete, path: uploadPath(bucket, key), query: url.Values{"upload_id": {uploadID}}, header: tokenHeader(token)}
	resp, err := c.send(ctx, req, http.StatusNoContent)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// partTicketBatch is how many part tickets PutObjectOnTicket asks for at
// a time: a few hundred kilobytes of answer, and as many parts as a
// client sends in a ticket's life only on a fast link (100 parts of 5 MiB
// in 15 s is 33 MiB/s); those it does not reach before half that life are
// asked for again.
const partTicketBatch = 100

// putInParts is PutObjectOnTicket in parts of Client.TicketPartSize, of
// the size bytes of body from start: a multipart ticket, each part sent
// to the store on its ticket, one after another, then the fenced
// completion. The tickets come partTicketBatch at a time, the first with
// the upload, the next when a part's ticket is not at hand or has lived
// half its life (partTickets); a part the store refuses 403 (its body
// ended after the ticket's expiry) is sent once more on a fresh ticket.
// So an upload may take longer than a ticket's life. An upload that
// fails before its completion is aborted; one whose completion or part
// tickets were stale the gateway aborted already.
func (c *Client) putInParts(ctx context.Context, bucket, key string, token api.Token, body io.ReadSeeker, start, size int64) (*PutResult, error) {
	partSize := c.TicketPartSize
	count := int32((size + partSize - 1) / partSize)
	first, err := c.multipartTicket(ctx, bucket, key, token, map[string]any{"size": size, "part_size": partSize, "part_count": min(count, partTicketBatch)})
	if err != nil {
		return nil, err
	}
	tickets := &partTickets{c: c, bucket: bucket, key: key, token: token, parts: count}
	tickets.take(first)
	fail := func(number int32, err error) (*PutResult, error) {
		abortCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
		defer cancel()
		return nil, errors.Join(fmt.Errorf("part %d: %w", number, err), c.AbortUpload(abortCtx, bucket, key, token, first.UploadID))
	}
	parts := make([]api.CompletedPart, 0, count)
	for number := int32(1); number <= count; number++ {
		offset := int64(number-1) * partSize
		n := min(partSize, size-offset)
		var etag string
		for attempt := 1; ; attempt++ {
			t, err := tickets.ticket(ctx, number, attempt > 1)
			if err != nil {
				return fail(number, err)
			}
			if _, err := body.Seek(start+offset, io.SeekStart); err != nil {
				return fail(number, err)
			}
			etag, err = c.sendPart(ctx, first.Resource, t, io.LimitReader(body, n), n)
			if errors.Is(err, errTicketExpired) && attempt == 1 {
				continue
			}
			if err != nil {
				return fail(number, err)
			}
			break
		}
		parts = append(parts, api.CompletedPart{Number: number, ETag: etag})
	}
	return c.CompleteUpload(ctx, bucket, key, token, first.UploadID, parts)
}

// partTickets hands putInParts the tickets of an upload's parts, asking
// the gateway for fresh ones (PartTickets) when the part's is not at
// hand, fresh is set, or the tickets at hand have lived half their life:
// a part sent on one of them has the other half to arrive.
type partTickets struct {
	c           *Client
	bucket, key string
	token       api.Token
	// parts is how many parts the upload has.
	parts int32
	// batch is the tickets at hand, and received when they came.
	batch    *MultipartTicket
	received time.Time
}

// take makes t's tickets the ones at hand.
func (p *partTickets) take(t *MultipartTicket) {
	p.batch, p.received = t, time.Now()
}

// ticket returns the ticket of part number.
func (p *partTickets) ticket(ctx context.Context, number int32, fresh bool) (api.Ticket, error) {
	i := int(number - p.batch.FirstPart)
	halfSpent := time.Since(p.received) > p.batch.ExpiresAt.Sub(p.received)/2
	if fresh || halfSpent || i < 0 || i >= len(p.batch.Parts) {
		t, err := p.c.PartTickets(ctx, p.bucket, p.key, p.token, p.batch.UploadID, number, min(p.parts-number+1, partTicketBatch))
		if err != nil {
			return api.Ticket{}, err
		}
		if t.FirstPart != number || len(t.Parts) == 0 {
			return api.Ticket{}, fmt.Errorf("fencegate ticket %s: asked for part %d's ticket, answered %d from part %d", t.Resource, number, len(t.Parts), t.FirstPart)
		}
		p.take(t)
		i = 0
	}
	return p.batch.Parts[i], nil
}

// errTicketExpired is a part's ticket that expired before its part was
// sent, or that the store refused (403, as it refuses a part whose body
// ended after the expiry).
var errTicketExpired = errors.New("the ticket expired")

// sendPart sends a part of size bytes on its ticket and returns the ETag
// the store answered.
func (c *Client) sendPart(ctx context.Context, resource api.Resource, t api.Ticket, body io.Reader, size int64) (string, error) {
	resp, err := c.sendTicket(ctx, resource, t, body, size)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes))
	if resp.StatusCode == http.StatusForbidden {
		return "", fmt.Errorf("fencegate ticket %s: %w: the store answered a part %s: %.200q", resource, errTicketExpired, resp.Status, b)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") == "" {
		return "", fmt.Errorf("fencegate ticket %s: the store answered a part %s: %.200q", resource, resp.Status, b)
	}
	return resp.Header.Get("ETag"), nil
}
