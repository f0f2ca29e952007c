package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"fencegate/api"
	"fencegate/fence"
)

// ticketsPrefix starts the ticket route, POST /v1/tickets/{bucket}/{key}.
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
}

// postTicket issues a ticket: the fenced PUT's checks up to the write
// (fence.Engine.Ticket), answered 201 with the request the client sends
// to the store itself. Every refusal is a PUT's, with nothing issued.
func (g *API) postTicket(w http.ResponseWriter, r *http.Request) {
	in, err := g.parseTicket(r)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	t, err := g.engine.Ticket(r.Context(), in)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	w.Header().Set(api.HeaderFenceToken, t.Token.String())
	writeJSON(w, http.StatusCreated, t)
}

// parseTicket parses a ticket request as a PUT's is parsed: the path, the
// caller's write access, the token, then its JSON body (api.ErrInvalidRequest
// when malformed, api.ErrBodyTooLarge past the multipart limit).
func (g *API) parseTicket(r *http.Request) (fence.TicketRequest, error) {
	path, token, err := g.parseWrite(r)
	if err != nil {
		return fence.TicketRequest{}, err
	}
	body, err := decodeTicketBody(r.Body)
	if err != nil {
		return fence.TicketRequest{}, err
	}
	if body.PartSize != 0 && *body.Size > g.cfg.MaxMultipartBodyBytes {
		return fence.TicketRequest{}, fmt.Errorf("%w: %d bytes, limit %d", api.ErrBodyTooLarge, *body.Size, g.cfg.MaxMultipartBodyBytes)
	}
	return fence.TicketRequest{Path: path, Token: token, Size: *body.Size, ContentType: body.ContentType,
		Metadata: body.Metadata, PartSize: body.PartSize}, nil
}

// decodeTicketBody reads one JSON object of known fields, with a size.
func decodeTicketBody(from io.Reader) (ticketBody, error) {
	dec := json.NewDecoder(io.LimitReader(from, maxTicketBodyBytes+1))
	dec.DisallowUnknownFields()
	var body ticketBody
	if err := dec.Decode(&body); err != nil {
		return ticketBody{}, fmt.Errorf("%w: ticket body: %w", api.ErrInvalidRequest, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ticketBody{}, fmt.Errorf("%w: ticket body: one JSON object of at most %d bytes", api.ErrInvalidRequest, maxTicketBodyBytes)
	}
	if body.Size == nil {
		return ticketBody{}, fmt.Errorf("%w: ticket body: size is required", api.ErrInvalidRequest)
	}
	if *body.Size < 1 {
		return ticketBody{}, fmt.Errorf("%w: ticket body: size %d: an empty object takes no ticket, write it through PUT", api.ErrInvalidRequest, *body.Size)
	}
	return body, nil
}
