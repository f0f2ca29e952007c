package fence

import (
	"context"
	"errors"
	"fmt"
	"time"

	"fencegate/api"
)

// TicketSigner signs tickets (package api): presigned requests with which
// a client writes straight to the store, with nothing sent to the store
// when they are signed. The S3 backend implements it.
type TicketSigner interface {
	// PresignPut returns a ticket for one conditional PUT of r.Path, as
	// the engine's own conditional write would have sent it (see
	// api.TicketRequest). An r that does not validate is
	// api.ErrInvalidRequest; a store that signs no tickets answers
	// api.ErrNotImplemented.
	PresignPut(ctx context.Context, r api.TicketRequest) (api.Ticket, error)
	// PresignUploadPart returns a ticket for one part of a multipart
	// upload (see api.PartTicketRequest), with the same errors.
	PresignUploadPart(ctx context.Context, r api.PartTicketRequest) (api.Ticket, error)
}

// errNoTickets refuses a ticket for a bucket whose store signs none.
var errNoTickets = errors.New("tickets are available for S3 buckets only: no GCS emulator the tests can run enforces a signed URL's signature, expiry or generation condition, so nothing shows that a stale ticket would be refused (docs/tickets.md); write through the gateway")

// TicketRequest is a front door's request for a ticket, as it parsed it.
type TicketRequest struct {
	// Path is the object, with its store named.
	Path api.ObjectPath
	// Token is the writer's fencing token; zero is api.ErrMissingToken.
	Token api.Token
	// Size is the exact length of the object the client will send: 1 to
	// the engine's Config.MaxBodyBytes, at most api.MaxTicketSize
	// (api.ErrBodyTooLarge beyond), for a single PUT; with PartSize, of the whole upload, within
	// api.MaxParts parts.
	Size int64
	// ContentType is the Content-Type the client sends and the object
	// keeps; empty means none.
	ContentType string
	// Metadata is the user metadata the client sends and the object
	// keeps (see api.TicketRequest.Metadata); nil means none.
	Metadata map[string]string
	// PartSize, when not zero, asks for a multipart ticket: an upload
	// created and bound through the gateway, and a ticket per part of
	// PartSize bytes (the last may be smaller), api.MinPartSize to
	// api.MaxPartSize.
	PartSize int64
}

// IssuedTicket is the engine's answer to a TicketRequest.
type IssuedTicket struct {
	// Resource and Token are what the ticket writes, and with.
	Resource api.Resource `json:"resource"`
	Token    api.Token    `json:"token"`
	// Ticket is the request that writes the object, for a single PUT;
	// zero for a multipart ticket.
	api.Ticket
	// ReplacesETag is the ETag the write is conditional on (If-Match);
	// empty when the object did not exist (If-None-Match: *).
	ReplacesETag string `json:"replaces_etag,omitempty"`
	// UploadID is, for a multipart ticket, the id of the upload to
	// complete through the gateway (the creator's capability, see
	// api.UploadBinding.Capability); Parts the tickets of its parts, in
	// order from part 1.
	UploadID string       `json:"upload_id,omitempty"`
	Parts    []api.Ticket `json:"parts,omitempty"`
}

// Ticket runs a fenced write's checks up to the write, and answers a
// ticket for the write instead of making it: authorization (Write), the
// token (zero is api.ErrMissingToken), the fast reject, a real
// observation of the object (a HEAD, never the ETag cache), the refusal
// of a token below the one the object records, and the fence check,
// which raises the mark (observeAndFence: the same order, for the same
// reason, as a PUT). Only then does it ask the store to sign a PUT
// conditional on the version observed (If-Match its ETag, or
// If-None-Match: * when absent), carrying the token as the object's
// recorded token, the size, the content type and the metadata. The
// package doc says why such a ticket cannot let a stale token land.
//
// Its refusals are a PUT's, and nothing is raised before the request is
// known to be one a store can sign: a bucket whose store signs no
// tickets is api.ErrNotImplemented, a size above Config.MaxBodyBytes or
// S3's single PUT (api.MaxTicketSize) api.ErrBodyTooLarge, a malformed request api.ErrInvalidRequest.
//
// The ETag cache forgets the object, and learns nothing of it until the
// ticket has expired (etagCache.hold): a ticket's write is not seen by
// the engine, so no version the cache could learn meanwhile is known to
// be current.
//
// With in.PartSize, it creates and binds a fenced multipart upload
// (CreateUpload, whose checks are the same), and answers a ticket per
// part; the completion goes through the engine (CompleteUpload), fenced
// as every completion is.
func (e *Engine) Ticket(ctx context.Context, in TicketRequest) (IssuedTicket, error) {
	if in.PartSize != 0 {
		return e.multipartTicket(ctx, in)
	}
	fr, err := e.Admit(ctx, Write, in.Path, in.Token)
	if err != nil {
		return IssuedTicket{}, err
	}
	if err := e.ticketsFor(in.Path); err != nil {
		return IssuedTicket{}, err
	}
	if limit := min(e.cfg.MaxBodyBytes, api.MaxTicketSize); in.Size > limit {
		return IssuedTicket{}, fmt.Errorf("%w: %d bytes, limit %d in one PUT: ask for a multipart ticket (part_size)", api.ErrBodyTooLarge, in.Size, limit)
	}
	req := api.TicketRequest{Path: in.Path, Replaces: api.ObjectVersion{}, Token: in.Token, Size: in.Size,
		ContentType: in.ContentType, Metadata: in.Metadata, Expires: e.cfg.TicketExpiry,
		UnsafeUnconditional: e.cfg.Hooks.UnsafeUnconditionalTicket}
	if err := req.Validate(); err != nil { // before the mark is raised
		return IssuedTicket{}, err
	}
	// Held before the observation: a version this engine learns from
	// now on may be older than the ticket's write.
	e.etags.hold(fr.Resource, e.cfg.Now().Add(e.ticketHold()))
	seen, _, err := e.observeAndFence(ctx, fr, observeHead, raiseOnAbsent)
	if err != nil {
		return IssuedTicket{}, err
	}
	req.Replaces = seen
	t, err := e.tickets.PresignPut(ctx, req)
	if err != nil {
		return IssuedTicket{}, fmt.Errorf("ticket: %w", err)
	}
	issued := IssuedTicket{Resource: fr.Resource, Token: fr.Token, Ticket: t, ReplacesETag: seen.ETag}
	e.monitor.TicketIssued(ctx, issued)
	return issued, nil
}

// ticketHold is how long the ETag cache holds off a ticket's object:
// the ticket's life, and a minute more for the store's clock, which
// decides the expiry, running behind the engine's.
func (e *Engine) ticketHold() time.Duration {
	expires := e.cfg.TicketExpiry
	if expires == 0 {
		expires = api.DefaultTicketExpiry
	}
	return expires + time.Minute
}

// ticketsFor refuses a ticket for path when the engine has no signer,
// or path's bucket is not in S3: api.ErrNotImplemented.
func (e *Engine) ticketsFor(path api.ObjectPath) error {
	if e.tickets == nil || e.StoreOf(path.Bucket) != api.StoreS3 {
		return fmt.Errorf("%w: %w", api.ErrNotImplemented, errNoTickets)
	}
	return nil
}

// multipartTicket is Ticket with in.PartSize: the upload is created and
// bound as CreateUpload does (authorization, fast reject, observation,
// fence check), then each part is signed. An upload whose parts cannot be
// signed is abandoned.
func (e *Engine) multipartTicket(ctx context.Context, in TicketRequest) (IssuedTicket, error) {
	if err := e.access.Authorize(ctx, Write, in.Path.Resource()); err != nil {
		return IssuedTicket{}, err
	}
	if in.Token == 0 {
		return IssuedTicket{}, api.ErrMissingToken
	}
	if err := e.ticketsFor(in.Path); err != nil {
		return IssuedTicket{}, err
	}
	parts, err := ticketParts(in.Size, in.PartSize)
	if err != nil {
		return IssuedTicket{}, err
	}
	meta := api.ObjectMetadata{User: in.Metadata}
	b, err := e.CreateUpload(ctx, in.Path, in.Token, in.ContentType, meta)
	if err != nil {
		return IssuedTicket{}, err
	}
	issued := IssuedTicket{Resource: b.Resource, Token: b.Token, UploadID: b.Capability(), Parts: make([]api.Ticket, 0, len(parts))}
	path, _ := e.multipartPath(in.Path)
	for i, size := range parts {
		t, err := e.tickets.PresignUploadPart(ctx, api.PartTicketRequest{Path: path, UploadID: b.UploadID,
			PartNumber: int32(i + 1), Size: size, Expires: e.cfg.TicketExpiry})
		if err != nil {
			e.Abandon(ctx, path, b, AbortFailed, "a part's ticket was not signed")
			return IssuedTicket{}, fmt.Errorf("ticket: %w", err)
		}
		issued.Parts = append(issued.Parts, t)
	}
	issued.ExpiresAt = issued.Parts[0].ExpiresAt
	e.monitor.TicketIssued(ctx, issued)
	return issued, nil
}

// ticketParts splits size into parts of partSize (the last smaller), or
// refuses sizes S3's multipart limits do not allow.
func ticketParts(size, partSize int64) ([]int64, error) {
	switch {
	case partSize < api.MinPartSize || partSize > api.MaxPartSize:
		return nil, fmt.Errorf("%w: part_size %d: must be %d to %d", api.ErrInvalidRequest, partSize, int64(api.MinPartSize), int64(api.MaxPartSize))
	case size < 1:
		return nil, fmt.Errorf("%w: size %d: must be at least 1", api.ErrInvalidRequest, size)
	case (size+partSize-1)/partSize > api.MaxParts:
		return nil, fmt.Errorf("%w: %d bytes in parts of %d: more than %d parts", api.ErrBodyTooLarge, size, partSize, api.MaxParts)
	}
	var parts []int64
	for left := size; left > 0; left -= partSize {
		parts = append(parts, min(left, partSize))
	}
	return parts, nil
}
