package api

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Partner APIs: the vocabulary of fenced, serialized and idempotent
// forwarding to third-party HTTP APIs (ANY /v1/partners/{route}/{path...}),
// shared by the gateway, the token store and the partner backend.

// Header names of the partner routes.
const (
	// HeaderIdempotencyKey carries the client's idempotency key (as in
	// Stripe's API and the IETF httpapi draft).
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderIdempotentReplayed is "true" on an answer replayed from the
	// stored response of an earlier request with the same key.
	HeaderIdempotentReplayed = "Idempotent-Replayed"
	// HeaderIdempotentBodyOmitted is "true" on a replayed answer whose
	// original body is not available: it was larger than the route's
	// limit, or than what etcd keeps when no answer store is configured,
	// or the answer store could not take it, or it is gone from there
	// (expired, deleted, or not the bytes stored). The replay has the
	// status and headers, and an empty body; nothing is forwarded again.
	HeaderIdempotentBodyOmitted = "Idempotent-Body-Omitted"
)

// MaxIdempotencyKeyBytes is the longest idempotency key.
const MaxIdempotencyKeyBytes = 255

// MaxPartnerResourceBytes is the longest resource id of a partner route
// (from its template or the X-Fence-Resource header).
const MaxPartnerResourceBytes = 512

// Errors of the partner routes. Their HTTP statuses are in the error table
// (errors.go).
var (
	// ErrIdempotencyInFlight means an earlier request with the same
	// idempotency key is still in flight (or its gateway died and its
	// record has not expired yet): its outcome is unknown, so this one is
	// not forwarded. Retry later to get the stored response.
	ErrIdempotencyInFlight = errors.New("request with this idempotency key in flight")
	// ErrIdempotencyMismatch means the idempotency key was used before
	// for a different request (method, path, query, body or token).
	ErrIdempotencyMismatch = errors.New("idempotency key reused for a different request")
	// ErrResourceBusy means another request for the same partner resource
	// stayed in flight for longer than the route lets a request wait.
	// Nothing was forwarded.
	ErrResourceBusy = errors.New("resource busy")
	// ErrIdempotencyBudgetExhausted means the completed idempotency
	// records of the request's route, or of its identity, hold as many
	// records or bytes in the token store as their budget allows (see
	// IdempotencyBudget). Nothing was forwarded and nothing was written; a
	// retry with a key that has a record is still answered from it. Retry
	// later, when records have expired.
	ErrIdempotencyBudgetExhausted = errors.New("idempotency budget exhausted")
	// ErrMissingIdempotencyKey means the route requires an
	// Idempotency-Key header and the request had none.
	ErrMissingIdempotencyKey = errors.New("missing idempotency key")
	// ErrMalformedIdempotencyKey means the Idempotency-Key header is not
	// exactly one value of 1 to 255 printable ASCII characters.
	ErrMalformedIdempotencyKey = errors.New("malformed idempotency key")

	// ErrNotForwarded is not an error class: it is wrapped, with
	// ErrUpstream, around failures that happened before any byte of the
	// request reached the partner (such as a refused connection), so
	// that the outcome is known: nothing happened there.
	ErrNotForwarded = errors.New("request not forwarded")
	// ErrIdempotencyRecordLost is not an error class either: Finish wraps
	// it, with ErrUnavailable, when the request's in-flight idempotency
	// record was no longer its own (its lease expired while the request
	// was upstream), so nothing was stored. The gateway then deletes the
	// copy of the answer's body it wrote for that record.
	ErrIdempotencyRecordLost = errors.New("idempotency record expired before the request finished")
)

// PartnerResource returns the resource name of a partner route's resource:
// "partner/<route>/<id>".
func PartnerResource(route, id string) Resource {
	return Resource("partner/" + route + "/" + id)
}

// IdempotencyKey is a client's Idempotency-Key: 1 to 255 printable ASCII
// characters (0x20 to 0x7e), taken verbatim. The empty key means "none".
type IdempotencyKey string

// ParseIdempotencyKey parses the values of the Idempotency-Key header, as
// found in http.Header. No header gives the empty key and no error; more
// than one, or a value that is empty, too long or holds anything but
// printable ASCII, is ErrMalformedIdempotencyKey.
func ParseIdempotencyKey(values []string) (IdempotencyKey, error) {
	switch len(values) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", fmt.Errorf("%w: %d %s headers, want at most one", ErrMalformedIdempotencyKey, len(values), HeaderIdempotencyKey)
	}
	v := values[0]
	if v == "" || len(v) > MaxIdempotencyKeyBytes {
		return "", fmt.Errorf("%w: must be 1 to %d characters", ErrMalformedIdempotencyKey, MaxIdempotencyKeyBytes)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", fmt.Errorf("%w: only printable ASCII characters are allowed", ErrMalformedIdempotencyKey)
		}
	}
	return IdempotencyKey(v), nil
}

// Fingerprint identifies a request for idempotency: a retry with the same
// key must have the same fingerprint.
type Fingerprint [sha256.Size]byte

// String returns the fingerprint in hexadecimal.
func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// NewFingerprint returns the fingerprint of a request: a SHA-256 over its
// method, its target (path and query, as forwarded), the SHA-256 of its
// body and its token, each length-prefixed so that no two requests share
// an encoding.
func NewFingerprint(method, target string, body []byte, token Token) Fingerprint {
	bodySum := sha256.Sum256(body)
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte(method))
	field([]byte(target))
	field(bodySum[:])
	field([]byte(token.String()))
	var f Fingerprint
	h.Sum(f[:0])
	return f
}

// NewHeaderFingerprint returns the fingerprint of the request headers a
// partner request forwards (the caller picks them): a SHA-256 over the
// headers sorted by name, names compared case aside (lower-cased), each
// with its values in the order they came, every field length-prefixed.
// So "Content-Type" and "content-type" are one header, while two lines
// of a header, or one line with both values, or the same values in
// another order, are not the same request. Names that differ only in
// case have their values joined in sorted order of the names as given.
func NewHeaderFingerprint(header map[string][]string) Fingerprint {
	byName := make(map[string][]string, len(header))
	names := make([]string, 0, len(header))
	given := make([]string, 0, len(header))
	for name := range header {
		given = append(given, name)
	}
	slices.Sort(given)
	for _, name := range given {
		lower := strings.ToLower(name)
		if _, ok := byName[lower]; !ok {
			names = append(names, lower)
		}
		byName[lower] = append(byName[lower], header[name]...)
	}
	slices.Sort(names)
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte(strconv.Itoa(len(names))))
	for _, name := range names {
		field([]byte(name))
		values := byName[name]
		field([]byte(strconv.Itoa(len(values))))
		for _, v := range values {
			field([]byte(v))
		}
	}
	var f Fingerprint
	h.Sum(f[:0])
	return f
}

// PartnerPath is the validated part of a partner request's path after
// /v1/partners/{route}/: the path forwarded below the route's upstream URL.
type PartnerPath struct {
	// Segments are the percent-decoded path segments. None is empty, "."
	// or "..", and none holds '/', '\\', '%' or a control character.
	Segments []string
}

// ParsePartnerPath validates the escaped path that follows a route's
// prefix, such as "accounts/acct_1/charges" (no leading slash; empty for
// the upstream's base path itself). It refuses anything an upstream server
// could resolve outside the route's base path or read differently from the
// gateway: empty segments ("//"), "." and ".." segments (also when
// percent-encoded), encoded slashes and backslashes (%2F, %5C), a decoded
// '%' (double encoding), control characters, and invalid escapes. Failures
// are ErrInvalidRequest.
func ParsePartnerPath(escaped string) (PartnerPath, error) {
	if escaped == "" {
		return PartnerPath{}, nil
	}
	if len(escaped) > 8<<10 {
		return PartnerPath{}, fmt.Errorf("%w: partner path longer than 8 KiB", ErrInvalidRequest)
	}
	raw := strings.Split(escaped, "/")
	p := PartnerPath{Segments: make([]string, 0, len(raw))}
	for _, r := range raw {
		seg, err := url.PathUnescape(r)
		if err != nil {
			return PartnerPath{}, fmt.Errorf("%w: partner path has an invalid escape", ErrInvalidRequest)
		}
		switch {
		case seg == "":
			return PartnerPath{}, fmt.Errorf("%w: partner path may not have empty segments (\"//\", or a leading or trailing '/')", ErrInvalidRequest)
		case seg == "." || seg == "..":
			return PartnerPath{}, fmt.Errorf("%w: partner path may not have %q segments", ErrInvalidRequest, seg)
		case strings.ContainsAny(seg, "/\\%"):
			return PartnerPath{}, fmt.Errorf("%w: partner path segment may not hold an encoded '/', '\\' or '%%'", ErrInvalidRequest)
		}
		for i := 0; i < len(seg); i++ {
			if seg[i] < 0x20 || seg[i] == 0x7f {
				return PartnerPath{}, fmt.Errorf("%w: partner path holds a control character", ErrInvalidRequest)
			}
		}
		p.Segments = append(p.Segments, seg)
	}
	// The limit holds for the canonical form too, which can be longer
	// than the input (non-ASCII bytes escape to three): whatever parses
	// here must parse again from Escaped().
	if len(p.Escaped()) > 8<<10 {
		return PartnerPath{}, fmt.Errorf("%w: partner path longer than 8 KiB once escaped", ErrInvalidRequest)
	}
	return p, nil
}

// Escaped returns the path in canonical escaped form, without a leading
// slash: each segment escaped with url.PathEscape, joined by '/'.
func (p PartnerPath) Escaped() string {
	escaped := make([]string, len(p.Segments))
	for i, s := range p.Segments {
		escaped[i] = url.PathEscape(s)
	}
	return strings.Join(escaped, "/")
}

// StoredResponse is the response stored under an idempotency key, to be
// replayed to retries.
type StoredResponse struct {
	Status int
	// Header holds Content-Type and the route's allow-listed headers.
	Header map[string][]string // an http.Header
	Body   []byte
	// BodyOmitted is true when the body was not stored (Body is then
	// empty): it was larger than the route's limit, or, for a body that
	// goes to the answer store (BodyRef), that store could not take it.
	BodyOmitted bool
	// BodyRef, when not nil, says that the body is not in Body (which is
	// empty) but in the gateway's answer store, and what it must be
	// there. The token store keeps it with the record, in place of the
	// body.
	BodyRef *BodyRef
}

// BodyRef names a stored response's body that the gateway keeps in its
// answer store rather than in the token store, and says what it is: a
// body read back from there is the stored one only if its size and
// SHA-256 are these.
type BodyRef struct {
	// ID is the admission's (Admission.ID): with the idempotency scope and
	// key, it names the body in the answer store.
	ID     string
	Size   int64
	SHA256 [sha256.Size]byte
}

// PartnerAdmission is what the token store decides on before a request is
// forwarded to a partner: the fence check of Token on Resource, the
// resource's in-flight marker, and the request's idempotency record.
type PartnerAdmission struct {
	Resource Resource
	Token    Token
	// Hold is the longest the request may stay upstream (the route's
	// timeout). The in-flight marker, and the idempotency record while in
	// flight, outlive a gateway that dies by at least this long, so that
	// no second request is forwarded while the first may still be
	// running. Must be above zero.
	Hold time.Duration
	// MaxWait bounds the wait for another request on Resource to finish.
	// Zero means not to wait: a busy resource is refused at once.
	MaxWait time.Duration
	// Idempotency is nil for a request without an idempotency key.
	Idempotency *IdempotencyClaim
}

// IdempotencyClaim is a request's idempotency key and what it stands for.
type IdempotencyClaim struct {
	// Scope is where the key is unique: the route's name (and, once
	// clients authenticate, their identity).
	Scope string
	Key   IdempotencyKey
	// Fingerprint must match on every use of the key.
	Fingerprint Fingerprint
	// HeaderFingerprint (NewHeaderFingerprint of the headers forwarded)
	// must match too; a record written without one, by a gateway from
	// before headers were fingerprinted, is matched on Fingerprint alone.
	HeaderFingerprint Fingerprint
	// Retention is how long a completed response is kept for replays.
	// Zero means 24 hours.
	Retention time.Duration
	// Budgets bound what the completed records of the accounts they name
	// may hold: a claim is refused with ErrIdempotencyBudgetExhausted,
	// unless its key has a record already, while one of them is used up;
	// its record, once complete, counts in each.
	Budgets []IdempotencyBudget
}

// IdempotencyBudget bounds the completed idempotency records of one
// account in the token store.
type IdempotencyBudget struct {
	// Account names what is counted, such as "route/payments" or
	// "identity/alice": records of claims that name the same account
	// count together.
	Account string
	// Records bounds their number, Bytes their size (keys and values).
	// Zero or negative means no bound.
	Records, Bytes int64
}

// IdempotencyUsage is what the completed idempotency records of an
// account hold in the token store.
type IdempotencyUsage struct {
	Records, Bytes int64
}

// Admission is the token store's answer to a PartnerAdmission that was
// neither refused nor failed.
type Admission struct {
	// Replay, when not nil, is the stored response of an earlier request
	// with the same key and fingerprint: answer it and forward nothing.
	// Finish is then nil.
	Replay *StoredResponse
	// Finish ends an admitted request: it stores resp as the idempotency
	// record's response (resp nil: nothing was forwarded, so the record
	// is dropped and the key may be used again) and removes the resource's
	// in-flight marker. It must be called exactly once, with a context
	// that the client's disconnection does not cancel.
	Finish func(ctx context.Context, resp *StoredResponse) error
	// Expires, with Finish, is the earliest instant at which the
	// resource's in-flight marker (and the in-flight idempotency record)
	// may expire, on this process's clock: a lower bound, measured from
	// before the admission's lease was granted or reused. Until then no
	// other request for the resource can be admitted. The caller must not
	// start an upstream call that may outlast it. Zero means unknown:
	// nothing may be sent.
	Expires time.Time
	// ID, with Finish, tells this admission from every other, also from
	// earlier and later ones with the same idempotency key: the gateway
	// names the answer store's copy of the answer's body with it (see
	// BodyRef).
	ID string
}
