package api

import (
	"fmt"
	"strings"
	"time"
)

// A ticket is a fenced, conditional, short-lived permission for a client
// to send one write straight to the object store, without its bytes
// passing through the gateway. The engine asks a store for one
// (TicketRequest, PartTicketRequest) only after the write's fence check
// passed, with the version it observed before that check; the store
// answers a presigned request (Ticket) that carries the write's condition
// and token in its signature, so that the store itself refuses the write
// once the object is no longer the version observed, once the ticket has
// expired, or when the client changes what was signed. What each store
// enforces, measured, is in docs/tickets.md.

// Ticket expiries. A store counts a ticket's life in whole seconds.
const (
	// DefaultTicketExpiry is a ticket's life when its request names none:
	// seconds, not minutes, because the write's window for S3's ABA
	// exception (docs/guarantees.md) lasts as long as the ticket.
	DefaultTicketExpiry = 15 * time.Second
	// MaxTicketExpiry is the longest life of a ticket: SigV4's limit on a
	// presigned URL (X-Amz-Expires at most 604800 seconds).
	MaxTicketExpiry = 7 * 24 * time.Hour
)

// MaxTicketSize is the largest object a ticket for one PUT may write:
// S3's limit on a single PUT, 5 GiB. Larger objects take a multipart
// upload, one PartTicketRequest per part.
const MaxTicketSize = 5 << 30

// MaxPartTickets is the most part tickets one answer holds when its
// request names how many it wants (part_count): enough parts for a
// client to send before they expire, few enough to sign in a fraction of
// a second and answer in half a megabyte.
const MaxPartTickets = 1000

// TicketRequest is what the engine asks a store for: a ticket to write
// Path once, as the gateway's own conditional write would have.
type TicketRequest struct {
	Path ObjectPath
	// Replaces is the version observed before the fence check: the write
	// lands only if it is still current (If-Match its ETag, or, when it
	// did not exist, If-None-Match: *). It must be Named.
	Replaces ObjectVersion
	// Token is recorded on the object as MetadataFenceToken. It is never
	// zero.
	Token Token
	// Size is the exact length of the body the client will send, 1 to
	// MaxTicketSize. An empty object takes no ticket (it has no bytes to
	// keep off the gateway, and a presigned request signs no zero
	// length, see docs/tickets.md): write it through the gateway.
	Size int64
	// ContentType is the Content-Type the client must send and the object
	// keeps. Empty means none: the client sends none, and the store
	// records its default.
	ContentType string
	// Metadata is the user metadata the client must send and the object
	// keeps: NAME to value, NAME lower case without the store's prefix
	// (x-amz-meta-), never MetadataFenceToken. Nil means none.
	Metadata map[string]string
	// Expires is how long the ticket may be used, from its signing, in
	// whole seconds from 1 s to MaxTicketExpiry. Zero means
	// DefaultTicketExpiry.
	Expires time.Duration
	// UnsafeUnconditional signs the write with no condition at all, so
	// that it overwrites whatever version is current when it arrives, and
	// Replaces is ignored. It is wrong for a ticket, and exists only for
	// the gateway's UnsafeUnconditionalTicket test hook, which shows that
	// the condition matters. False, the zero value, means a conditional
	// write.
	UnsafeUnconditional bool
}

// PartTicketRequest is what the engine asks a store for to let a client
// send one part of a multipart upload straight to the store. The upload
// was created, fenced and bound through the gateway; its completion goes
// through the gateway too, with its fence check, so a part carries no
// condition and no token.
type PartTicketRequest struct {
	Path ObjectPath
	// UploadID is the store's id of the upload (never the gateway's
	// capability, which the store does not know).
	UploadID string
	// PartNumber is 1 to MaxParts.
	PartNumber int32
	// Size is the exact length of the part, 1 to MaxPartSize.
	Size int64
	// Expires is as for TicketRequest: zero means DefaultTicketExpiry.
	Expires time.Duration
}

// Ticket is a store's answer to a TicketRequest or a PartTicketRequest:
// the request the client sends, with its body of exactly the size asked
// for. Nothing of it may be left out or changed.
type Ticket struct {
	// Method is the HTTP method, "PUT".
	Method string `json:"method"`
	// URL is the request's URL, with its signature in the query. Its host
	// is the Host the client sends; Headers does not repeat it.
	URL string `json:"url"`
	// Headers are every header the client must send, by canonical name,
	// exactly as given (Content-Length among them when the body is not
	// empty). Nil means none but Host.
	Headers map[string]string `json:"headers"`
	// ExpiresAt is when the store stops accepting the ticket.
	ExpiresAt time.Time `json:"expires_at"`
}

// Validate reports whether r is a request a store can sign as it is, as
// an ErrInvalidRequest that says what is wrong.
func (r TicketRequest) Validate() error {
	switch {
	case r.Size == 0:
		return fmt.Errorf("%w: ticket for an empty object: write it through the gateway", ErrInvalidRequest)
	case r.Token == 0:
		return fmt.Errorf("%w: ticket without a fencing token", ErrInvalidRequest)
	case !r.Replaces.Named():
		return fmt.Errorf("%w: ticket replaces a version without an ETag, which no condition can name", ErrInvalidRequest)
	}
	if err := validateTicketBase(r.Size, MaxTicketSize, r.Expires); err != nil {
		return err
	}
	if r.ContentType != "" {
		if err := validateSignedValue("Content-Type", r.ContentType); err != nil {
			return err
		}
	}
	for name, value := range r.Metadata {
		if err := validateMetadataName(name); err != nil {
			return err
		}
		if err := validateSignedValue("metadata "+name, value); err != nil {
			return err
		}
	}
	return nil
}

// Validate reports whether r is a request a store can sign as it is, as
// an ErrInvalidRequest that says what is wrong.
func (r PartTicketRequest) Validate() error {
	switch {
	case r.UploadID == "":
		return fmt.Errorf("%w: part ticket without an upload id", ErrInvalidRequest)
	case r.PartNumber < 1 || r.PartNumber > MaxParts:
		return fmt.Errorf("%w: part number %d, want 1 to %d", ErrInvalidRequest, r.PartNumber, MaxParts)
	case r.Size == 0:
		return fmt.Errorf("%w: empty part", ErrInvalidRequest)
	}
	return validateTicketBase(r.Size, MaxPartSize, r.Expires)
}

// validateTicketBase checks what both kinds of ticket have: a size up to
// maxSize and an expiry of whole seconds within MaxTicketExpiry, or
// zero.
func validateTicketBase(size, maxSize int64, expires time.Duration) error {
	switch {
	case size < 0 || size > maxSize:
		return fmt.Errorf("%w: ticket size %d, want 0 to %d", ErrInvalidRequest, size, maxSize)
	case expires == 0:
		return nil
	case expires < time.Second || expires > MaxTicketExpiry || expires%time.Second != 0:
		return fmt.Errorf("%w: ticket expiry %v, want whole seconds from 1s to %v", ErrInvalidRequest, expires, MaxTicketExpiry)
	}
	return nil
}

// validateMetadataName accepts a user metadata name as S3 keeps it: lower
// case letters, digits, '-', '_' and '.', and never the token's own entry.
func validateMetadataName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty metadata name", ErrInvalidRequest)
	}
	if name == MetadataFenceToken {
		return fmt.Errorf("%w: metadata %q is the fencing token's", ErrInvalidRequest, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%w: metadata name %q: only a-z, 0-9, '-', '_' and '.'", ErrInvalidRequest, name)
		}
	}
	return nil
}

// validateSignedValue accepts a header value whose SigV4 canonical form is
// itself: printable ASCII, no space at either end, no run of spaces. SigV4
// signs a value trimmed and with its runs of spaces made one, so a value
// that is not its own canonical form would let a client send another
// value under the same signature.
func validateSignedValue(what, value string) error {
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("%w: %s: only printable ASCII", ErrInvalidRequest, what)
		}
	}
	if strings.TrimSpace(value) != value || strings.Contains(value, "  ") {
		return fmt.Errorf("%w: %s: spaces at an end or in a run", ErrInvalidRequest, what)
	}
	return nil
}
