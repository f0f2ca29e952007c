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
	// Parts are the parts' tickets, part 1 first; each is sent once,
	// with its headers, and the store answers the part's ETag.
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
func (c *Client) MultipartTicket(ctx context.Context, bucket, key string, token api.Token, size, partSize int64) (*MultipartTicket, error) {
	req := request{method: http.MethodPost, path: "/v1/tickets/" + escapePath(bucket) + "/" + escapePath(key),
		header: tokenHeader(token), json: map[string]int64{"size": size, "part_size": partSize}}
	var t MultipartTicket
	if err := c.sendJSONUpTo(ctx, req, maxMultipartTicketBytes, &t, http.StatusCreated); err != nil {
		return nil, err
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

// putInParts is PutObjectOnTicket in parts of Client.TicketPartSize: a
// multipart ticket, each part sent to the store on its ticket, one after
// another, then the fenced completion. An upload that fails before its
// completion is aborted; one whose completion is stale the gateway
// aborted already.
func (c *Client) putInParts(ctx context.Context, bucket, key string, token api.Token, body io.Reader, size int64) (*PutResult, error) {
	t, err := c.MultipartTicket(ctx, bucket, key, token, size, c.TicketPartSize)
	if err != nil {
		return nil, err
	}
	parts := make([]api.CompletedPart, 0, len(t.Parts))
	for i, pt := range t.Parts {
		n := min(c.TicketPartSize, size-int64(i)*c.TicketPartSize)
		etag, err := c.sendPart(ctx, t.Resource, pt, io.LimitReader(body, n), n)
		if err != nil {
			abortCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
			defer cancel()
			return nil, errors.Join(fmt.Errorf("part %d: %w", i+1, err), c.AbortUpload(abortCtx, bucket, key, token, t.UploadID))
		}
		parts = append(parts, api.CompletedPart{Number: int32(i + 1), ETag: etag})
	}
	return c.CompleteUpload(ctx, bucket, key, token, t.UploadID, parts)
}

// sendPart sends a part of size bytes on its ticket and returns the ETag
// the store answered.
func (c *Client) sendPart(ctx context.Context, resource api.Resource, t api.Ticket, body io.Reader, size int64) (string, error) {
	resp, err := c.sendTicket(ctx, resource, t, body, size)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") == "" {
		return "", fmt.Errorf("fencegate ticket %s: the store answered a part %s: %.200q", resource, resp.Status, b)
	}
	return resp.Header.Get("ETag"), nil
}
