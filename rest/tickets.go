package rest

import (
	"fmt"
	"io"
	"net/http"

	"fencegate/api"
	"fencegate/fence"
	"fencegate/internal/jsonbody"
)

// ticketsPrefix starts the ticket route, POST /v1/tickets/{bucket}/{key}.
// Its body asks for one of three things:
//
//	{"size", "content_type", "metadata"}       -> 201, a ticket for one PUT
//	{"size", ..., "part_size", "part_count"}   -> 201, an upload and its parts' tickets
//	{"upload_id", "first_part", "part_count"}  -> 201, fresh tickets of an upload's parts
//
// The last is a multipart ticket's again, for parts of the upload it
// created (fence.Engine.PartTickets): the upload is named in the body, as
// the completion names it, so that its creator's capability is never in
// a URL, and the answer has the first answer's form.
const ticketsPrefix = "/v1/tickets/"

// maxTicketBodyBytes bounds a ticket request's JSON body: a size, a
// content type and a few metadata entries, which S3 bounds to 2 KiB.
const maxTicketBodyBytes = 16 << 10

// ticketBody is a ticket request's JSON body.
type ticketBody struct {
	// Size is the object's exact length in bytes; required.
	Size *int64 `json:"size"`
	// ContentType is the Content-Type the client sends with the bytes.
	ContentType string `json:"content_type"`
	// Metadata is user metadata, lower-case names without x-amz-meta-.
	Metadata map[string]string `json:"metadata"`
	// PartSize asks for a multipart ticket with parts of this size.
	PartSize int64 `json:"part_size"`
	// PartCount, with PartSize or UploadID, is how many part tickets to
	// answer; zero with PartSize means every part.
	PartCount int32 `json:"part_count"`
	// UploadID and FirstPart ask for fresh tickets of an upload's parts,
	// from FirstPart; nothing else but PartCount is sent with them.
	UploadID  string `json:"upload_id"`
	FirstPart int32  `json:"first_part"`
}

// postTicket issues a ticket: the fenced PUT's checks up to the write
// (fence.Engine.Ticket), answered 201 with the request the client sends
// to the store itself. Every refusal is a PUT's, with nothing issued. A
// request for part tickets of an upload is fence.Engine.PartTickets's,
// answered in the same form.
func (g *API) postTicket(w http.ResponseWriter, r *http.Request) {
	in, parts, err := g.parseTicket(r)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	var t fence.IssuedTicket
	if parts.UploadID != "" {
		t, err = g.engine.PartTickets(r.Context(), parts)
	} else {
		t, err = g.engine.Ticket(r.Context(), in)
	}
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	defer t.Release()
	w.Header().Set(api.HeaderFenceToken, t.Token.String())
	writeJSON(w, http.StatusCreated, t)
}

// parseTicket parses a ticket request as a PUT's is parsed: the path, the
// caller's write access, the token, then its JSON body (api.ErrInvalidRequest
// when malformed, api.ErrBodyTooLarge past the multipart limit). A body
// with an upload_id is a request for part tickets, returned as parts;
// any other a ticket's, returned as in.
func (g *API) parseTicket(r *http.Request) (in fence.TicketRequest, parts fence.PartTicketsRequest, err error) {
	path, token, err := g.parseWrite(r)
	if err != nil {
		return in, parts, err
	}
	body, err := decodeTicketBody(r.Body)
	if err != nil {
		return in, parts, err
	}
	if body.UploadID != "" {
		return in, fence.PartTicketsRequest{Path: path, Token: token, UploadID: body.UploadID,
			FirstPart: body.FirstPart, PartCount: body.PartCount}, nil
	}
	if body.PartSize != 0 && *body.Size > g.cfg.MaxMultipartBodyBytes {
		return in, parts, fmt.Errorf("%w: %d bytes, limit %d", api.ErrBodyTooLarge, *body.Size, g.cfg.MaxMultipartBodyBytes)
	}
	return fence.TicketRequest{Path: path, Token: token, Size: *body.Size, ContentType: body.ContentType,
		Metadata: body.Metadata, PartSize: body.PartSize, PartCount: body.PartCount}, parts, nil
}

// decodeTicketBody reads one JSON object of known fields (jsonbody.Decode):
// with a size, or with an upload_id and nothing of the object's.
func decodeTicketBody(from io.Reader) (ticketBody, error) {
	data, err := io.ReadAll(io.LimitReader(from, maxTicketBodyBytes+1))
	switch {
	case err != nil:
		return ticketBody{}, fmt.Errorf("%w: ticket body: %w", api.ErrInvalidRequest, err)
	case len(data) > maxTicketBodyBytes:
		return ticketBody{}, fmt.Errorf("%w: ticket body: one JSON object of at most %d bytes", api.ErrInvalidRequest, maxTicketBodyBytes)
	}
	var body ticketBody
	if err := jsonbody.Decode(data, &body); err != nil {
		return ticketBody{}, fmt.Errorf("%w: ticket body: %w", api.ErrInvalidRequest, err)
	}
	if body.UploadID != "" {
		if body.Size != nil || body.PartSize != 0 || body.ContentType != "" || body.Metadata != nil {
			return ticketBody{}, fmt.Errorf("%w: ticket body: with upload_id, only first_part and part_count: the upload has its size, parts and metadata", api.ErrInvalidRequest)
		}
		return body, nil
	}
	switch {
	case body.FirstPart != 0:
		return ticketBody{}, fmt.Errorf("%w: ticket body: first_part names parts of an upload: send its upload_id", api.ErrInvalidRequest)
	case body.PartCount != 0 && body.PartSize == 0:
		return ticketBody{}, fmt.Errorf("%w: ticket body: part_count is for a multipart ticket: send part_size", api.ErrInvalidRequest)
	case body.Size == nil:
		return ticketBody{}, fmt.Errorf("%w: ticket body: size is required", api.ErrInvalidRequest)
	}
	if *body.Size < 1 {
		return ticketBody{}, fmt.Errorf("%w: ticket body: size %d: an empty object takes no ticket, write it through PUT", api.ErrInvalidRequest, *body.Size)
	}
	return body, nil
}
