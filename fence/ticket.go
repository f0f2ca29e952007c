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
	// PresignUploadParts returns a ticket for each part of parts, in
	// order: parts of one multipart upload (see api.PartTicketRequest),
	// signed at one time, with the same errors.
	PresignUploadParts(ctx context.Context, parts []api.PartTicketRequest) ([]api.Ticket, error)
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
	// PartCount, with PartSize, is how many part tickets to answer, from
	// part 1: 1 to api.MaxPartTickets, the rest asked for later
	// (Engine.PartTickets). Zero means every part, up to api.MaxParts.
	PartCount int32
}

// PartTicketsRequest is a front door's request for fresh tickets of parts
// of an upload that a multipart ticket created, as it parsed it.
type PartTicketsRequest struct {
	// Path is the upload's object.
	Path api.ObjectPath
	// Token is the upload's token, which the request must send; zero is
	// api.ErrMissingToken.
	Token api.Token
	// UploadID names the upload: the ticket's upload_id (the creator's
	// capability), or the store's id (see Engine.PartTickets).
	UploadID string
	// FirstPart and PartCount are the parts: FirstPart, 1 or more, and
	// the PartCount - 1 after it, 1 to api.MaxPartTickets, all among the
	// upload's.
	FirstPart int32
	PartCount int32
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
	// order from part FirstPart (1 in a multipart ticket's first
	// answer), each for the next part number.
	UploadID  string       `json:"upload_id,omitempty"`
	FirstPart int32        `json:"first_part,omitempty"`
	Parts     []api.Ticket `json:"parts,omitempty"`

	// memory is what the answer's parts hold of the budget of buffered
	// bodies (reserveAnswer); nil for a ticket of one PUT.
	memory *bufferedBody
}

// Release gives back the memory reserved for the ticket's answer, once
// the caller has written it: a multipart ticket's parts are built whole
// in memory (reserveAnswer). A ticket of one PUT holds none.
func (t IssuedTicket) Release() { t.memory.release() }

// partTicketBytes is the memory one part's ticket is reckoned to take
// while the engine answers it: the signed ticket (its URL, about 500
// bytes with short names, its header and expiry) and its JSON in the
// answer (545 bytes on versitygw with a 12-byte bucket and a 3-byte key),
// each once more for every byte of the bucket and of the key, up to three
// for a key's byte that the URL escapes.
func partTicketBytes(path api.ObjectPath) int64 {
	return 2 * (1024 + int64(len(path.Bucket)) + 3*int64(len(path.Key)))
}

// reserveAnswer reserves, from the budget of buffered bodies, the memory
// that the tickets of parts parts of path take to answer
// (partTicketBytes): 20 MB for 10,000 parts with short names, and many
// such answers at once would otherwise be memory that no limit counts.
// It is called before anything is raised or created, so that a refusal
// changes nothing: an answer larger than the whole budget, which could
// never fit, is api.ErrInvalidRequest (ask for fewer parts at a time);
// one that does not fit what other requests hold now is
// api.ErrGatewayBusy (503, retryable), counted as a body refused.
func (e *Engine) reserveAnswer(path api.ObjectPath, parts int32) (*bufferedBody, error) {
	n := int64(parts) * partTicketBytes(path)
	if n > e.bodies.limit {
		return nil, fmt.Errorf("%w: the tickets of %d parts take about %d bytes of memory to answer, more than the gateway's budget of buffered bodies (%d bytes): ask for fewer at a time (part_count)",
			api.ErrInvalidRequest, parts, n, e.bodies.limit)
	}
	if !e.bodies.reserve(n) {
		e.monitor.BodyRefused()
		return nil, errBudgetExhausted
	}
	return &bufferedBody{budget: e.bodies, reserved: n}, nil
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
// fence check), with its size and part size, then the parts asked for
// are signed (all of them, or in.PartCount from part 1). An upload whose
// parts cannot be signed is abandoned.
func (e *Engine) multipartTicket(ctx context.Context, in TicketRequest) (IssuedTicket, error) {
	if err := e.admitMultipartTicket(ctx, in.Path, in.Token); err != nil {
		return IssuedTicket{}, err
	}
	parts, err := ticketParts(in.Size, in.PartSize)
	if err != nil {
		return IssuedTicket{}, err
	}
	count := parts
	if in.PartCount != 0 {
		if err := partRange(parts, 1, in.PartCount); err != nil {
			return IssuedTicket{}, err
		}
		count = in.PartCount
	}
	memory, err := e.reserveAnswer(in.Path, count)
	if err != nil {
		return IssuedTicket{}, err
	}
	b, err := e.createUpload(ctx, api.CreateUploadInput{Path: in.Path, Token: in.Token, ContentType: in.ContentType,
		Metadata: api.ObjectMetadata{User: in.Metadata}}, in.Size, in.PartSize)
	if err != nil {
		memory.release()
		return IssuedTicket{}, err
	}
	path, _ := e.multipartPath(in.Path)
	issued, err := e.signParts(ctx, path, b, 1, count)
	if err != nil {
		memory.release()
		e.Abandon(ctx, path, b, AbortFailed, "a part's ticket was not signed")
		return IssuedTicket{}, err
	}
	issued.UploadID, issued.memory = b.Capability(), memory
	e.monitor.TicketIssued(ctx, issued)
	return issued, nil
}

// PartTickets answers fresh tickets of parts of an upload that a
// multipart ticket created, for its creator to send parts whose first
// tickets expired (or were never asked for: TicketRequest.PartCount).
// A ticket's life stays short (Config.TicketExpiry: a leaked part ticket
// lets its holder replace that part's bytes until the completion), and
// an upload of gigabytes takes longer: its creator asks for the next
// parts' tickets as it goes.
//
// The checks are a part's (partBinding), as if the parts were sent
// through the gateway, and the completion's way of naming the upload:
// authorization (Write), the token, which must be sent (zero is
// api.ErrMissingToken) and be the upload's (boundUpload, by the
// capability or by the store's id: the creator's request, as for the
// completion), an upload of this object that the gateway bound and has
// not finished (api.ErrNotFound otherwise), and the upload's token not
// below the mark, read linearizably: a stale upload can never complete,
// so it is refused (*api.StaleTokenError, 409) and aborted, with no
// ticket signed. Then the parts must be the upload's: in.FirstPart and
// the in.PartCount-1 after it (1 to api.MaxPartTickets), all within the
// parts of the size and part size the ticket bound (api.ErrInvalidRequest
// otherwise, and for an upload that no multipart ticket created, whose
// parts the gateway does not know). No mark is raised and nothing is
// written: the completion is the write, fenced as ever. The tickets are
// the first answer's, from the same signer with the same sizes (the last
// part smaller), the upload named by the id the request sent.
func (e *Engine) PartTickets(ctx context.Context, in PartTicketsRequest) (IssuedTicket, error) {
	if err := e.admitMultipartTicket(ctx, in.Path, in.Token); err != nil {
		return IssuedTicket{}, err
	}
	if err := partRange(api.MaxParts, in.FirstPart, in.PartCount); err != nil {
		return IssuedTicket{}, err // before the upload is looked up
	}
	memory, err := e.reserveAnswer(in.Path, in.PartCount)
	if err != nil {
		return IssuedTicket{}, err // before a stale upload is aborted
	}
	issued, err := e.partTickets(ctx, in)
	if err != nil {
		memory.release()
		return IssuedTicket{}, err
	}
	issued.memory = memory
	return issued, nil
}

// partTickets is PartTickets once the answer's memory is reserved.
func (e *Engine) partTickets(ctx context.Context, in PartTicketsRequest) (IssuedTicket, error) {
	path, b, err := e.partBinding(ctx, in.Path, in.UploadID, in.Token, in.FirstPart)
	if err != nil {
		return IssuedTicket{}, err
	}
	if b.Size == 0 || b.PartSize == 0 {
		return IssuedTicket{}, fmt.Errorf("%w: upload of %s: %w", api.ErrInvalidRequest, b.Resource, errNotTicketUpload)
	}
	parts, err := ticketParts(b.Size, b.PartSize)
	if err != nil {
		return IssuedTicket{}, err
	}
	if err := partRange(parts, in.FirstPart, in.PartCount); err != nil {
		return IssuedTicket{}, err
	}
	issued, err := e.signParts(ctx, path, b, in.FirstPart, in.PartCount)
	if err != nil {
		return IssuedTicket{}, err
	}
	issued.UploadID = in.UploadID
	return issued, nil
}

// errNotTicketUpload refuses part tickets of an upload that no multipart
// ticket created: the gateway does not know its parts' sizes.
var errNotTicketUpload = errors.New("not created by a multipart ticket (POST /v1/tickets with part_size): its parts' sizes are not known, so no part ticket can sign them")

// signParts signs the tickets of count parts of b's upload from part
// first, with their sizes (the upload's part size, the last part what is
// left of its size), each with the engine's ticket expiry.
func (e *Engine) signParts(ctx context.Context, path api.ObjectPath, b api.UploadBinding, first, count int32) (IssuedTicket, error) {
	parts := make([]api.PartTicketRequest, 0, count)
	for n := first; n < first+count; n++ {
		size := min(b.PartSize, b.Size-int64(n-1)*b.PartSize)
		parts = append(parts, api.PartTicketRequest{Path: path, UploadID: b.UploadID, PartNumber: n, Size: size, Expires: e.cfg.TicketExpiry})
	}
	tickets, err := e.tickets.PresignUploadParts(ctx, parts)
	if err != nil {
		return IssuedTicket{}, fmt.Errorf("ticket: %w", err)
	}
	if len(tickets) != len(parts) {
		return IssuedTicket{}, fmt.Errorf("ticket: %w: %d tickets signed for %d parts", api.ErrUpstream, len(tickets), len(parts))
	}
	issued := IssuedTicket{Resource: b.Resource, Token: b.Token, FirstPart: first, Parts: tickets}
	issued.ExpiresAt = tickets[0].ExpiresAt
	return issued, nil
}

// admitMultipartTicket runs the checks of a request for part tickets
// that come before its body is looked at: authorization (Write), the
// token (zero is api.ErrMissingToken), and a store that signs tickets
// (ticketsFor).
func (e *Engine) admitMultipartTicket(ctx context.Context, path api.ObjectPath, token api.Token) error {
	if err := e.access.Authorize(ctx, Write, path.Resource()); err != nil {
		return err
	}
	if token == 0 {
		return api.ErrMissingToken
	}
	return e.ticketsFor(path)
}

// ticketParts returns how many parts of partSize (the last smaller) size
// takes, or refuses sizes S3's multipart limits do not allow.
func ticketParts(size, partSize int64) (int32, error) {
	switch {
	case partSize < api.MinPartSize || partSize > api.MaxPartSize:
		return 0, fmt.Errorf("%w: part_size %d: must be %d to %d", api.ErrInvalidRequest, partSize, int64(api.MinPartSize), int64(api.MaxPartSize))
	case size < 1:
		return 0, fmt.Errorf("%w: size %d: must be at least 1", api.ErrInvalidRequest, size)
	case (size+partSize-1)/partSize > api.MaxParts:
		return 0, fmt.Errorf("%w: %d bytes in parts of %d: more than %d parts", api.ErrBodyTooLarge, size, partSize, api.MaxParts)
	}
	return int32((size + partSize - 1) / partSize), nil
}

// partRange refuses tickets of count parts from part first unless count
// is 1 to api.MaxPartTickets and they are among the parts 1 to parts of
// an upload: api.ErrInvalidRequest.
func partRange(parts, first, count int32) error {
	last := int64(first) + int64(count) - 1
	switch {
	case first < 1:
		return fmt.Errorf("%w: first_part %d: parts are numbered from 1", api.ErrInvalidRequest, first)
	case count < 1 || count > api.MaxPartTickets:
		return fmt.Errorf("%w: part_count %d: must be 1 to %d", api.ErrInvalidRequest, count, api.MaxPartTickets)
	case last > int64(parts):
		return fmt.Errorf("%w: parts %d to %d: the upload has parts 1 to %d", api.ErrInvalidRequest, first, last, parts)
	}
	return nil
}
