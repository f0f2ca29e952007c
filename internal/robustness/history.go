package robustness

import (
	"sort"
	"sync"
	"time"

	"fencegate/api"
)

// OpKind says what an operation did.
type OpKind int

const (
	// OpWrite is a fenced PUT through a gateway.
	OpWrite OpKind = iota
	// OpRead is a GET through a gateway.
	OpRead
	// OpDelete is a fenced DELETE through a gateway.
	OpDelete
	// OpSeed is an object placed in the bucket's directory by the harness,
	// not through a gateway, before the history's first operation: it
	// exists, records no token, and has no ETag (versitygw serves it
	// without one). Its ID starts its body.
	OpSeed
	// OpUploadCreate is a CreateMultipartUpload through a gateway's S3
	// API with the holder's token: its fence check raises the mark to the
	// token, and the gateway binds the upload to it. It writes no object.
	// The upload's completion is an OpWrite with the same ID and Upload.
	OpUploadCreate
	// OpUploadPart is an UploadPart of an upload, by the id its creator
	// was answered (no token: the gateway fences it with the upload's).
	OpUploadPart
	// OpUploadAbort is an AbortMultipartUpload: by the creator's id, or
	// (ByStoreID) by the store's id with the token in X-Fence-Token.
	OpUploadAbort
	// OpTicket is a ticket request (POST /v1/tickets) through a gateway
	// with the holder's token: a PUT's checks up to the write, whose
	// fence check raises the mark to the token; it writes no object. The
	// writes sent on its ticket, straight to the store, are OpWrites
	// whose Ticket names it (Ticket.Request); a ticket never used has
	// none. A GCS bucket answers it 501 (or 409, when the fast reject,
	// which comes first, knows the token stale).
	OpTicket
)

// changes reports whether k is a fenced operation (a write or a delete).
func (k OpKind) changes() bool { return k == OpWrite || k == OpDelete }

// step reports whether k is a step toward a write that changes no object
// itself: a multipart upload's create, part or abort (its completion is
// an OpWrite), or a ticket request (the write sent on the ticket is).
func (k OpKind) step() bool {
	return k == OpUploadCreate || k == OpUploadPart || k == OpUploadAbort || k == OpTicket
}

// Outcome is what the client learned of an operation.
type Outcome int

const (
	// Acked: the write answered 200/201, or the read answered.
	Acked Outcome = iota
	// RefusedStale: 409 stale-token. Nothing was written.
	RefusedStale
	// Refused: another answer that promises nothing was written: 409
	// concurrent-modification, 503 fence-unavailable.
	Refused
	// Ambiguous: the write may or may not have happened (502, 504, a
	// dropped connection, a client timeout). Its effect, if any, can fall
	// at any time after its call: it has no known return time.
	Ambiguous
	// Failed: a read that did not answer. It is left out of the history.
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Acked:
		return "ok"
	case RefusedStale:
		return "stale"
	case Refused:
		return "refused"
	case Ambiguous:
		return "ambiguous"
	}
	return "failed"
}

// Op is one operation of the workload, as its client saw it.
type Op struct {
	// ID is unique in the run; it starts the body of every write.
	ID string
	// Client is the workload client; Process the porcupine client id,
	// which changes after each ambiguous operation (its client moved on
	// while the operation may still be pending).
	Client, Process int
	Kind            OpKind
	// Key is the object key, without the bucket.
	Key     string
	Token   api.Token
	Gateway string
	// Call and Return are nanoseconds since the history started; Return
	// is meaningless for Ambiguous.
	Call, Return int64
	Outcome      Outcome
	// Status and ProblemType are the gateway's answer (0 and "" if none).
	Status      int
	ProblemType string
	// HighWaterMark is the mark a stale refusal reported.
	HighWaterMark api.Token
	// ReadExists, ReadValue and ReadToken are what a read found: the op
	// id that wrote the body, and the token the object records.
	ReadExists bool
	ReadValue  string
	ReadToken  api.Token
	// ETag is the entity tag S3 gives a write's body (the MD5 of a
	// single-part body), known before the write is sent.
	ETag string
	// Replaced is what an acked write reports it replaced: the ETag it
	// was conditional on, or "" with Created when it created the object.
	// ReplacedKnown is false when the answer did not say.
	Replaced      string
	Created       bool
	ReplacedKnown bool
	// Stale says the client wrote after stalling past its lease; Retry
	// that the write retried an ambiguous one with the same token.
	Stale, Retry bool
	Err          string
	// Upload is the store's id of the multipart upload that an upload
	// step, or a write that completed an upload (sent through a gateway's
	// S3 API), acts on; "" for every other op. UploadToken is the token
	// that upload is bound to (its creator's), and ByStoreID says an
	// abort named the upload by the store's id, with Token in
	// X-Fence-Token, not by the id its creator was answered.
	Upload      string
	UploadToken api.Token
	ByStoreID   bool
	// Ticket is, for a ticket request (OpTicket) and for a write sent
	// straight to the store on its ticket (an OpWrite), what the ticket
	// shape did (ticket.go); nil for every other op. A write on a ticket
	// has Gateway the gateway that issued the ticket, Call and Return
	// those of its upload alone, and Status the store's answer.
	Ticket *TicketUse
}

// TicketUse is what an op of the ticket shape did with its ticket.
type TicketUse struct {
	// Plan is what the holder meant to do with the ticket.
	Plan ticketPlan
	// Request is the ID of the OpTicket that asked for the ticket (an
	// OpTicket's own ID).
	Request string
	// ExpiresAt is the ticket's expiry as the gateway answered it; zero
	// when none was issued.
	ExpiresAt time.Time
	// SentAt is when a write on the ticket was sent (zero for the
	// OpTicket).
	SentAt time.Time
	// PastWrite says a write on the ticket was sent once a write with a
	// larger token had been acked; PastFence, once only a fence check
	// with a larger token had passed (the mark was above the ticket's
	// token) and no such write had been acked.
	PastWrite, PastFence bool
	// Reuse says the write was the second sent on its ticket.
	Reuse bool
}

// expired reports whether the write was sent after its ticket expired,
// by ticketExpiryMargin at least: the store must have refused it.
func (u *TicketUse) expired() bool {
	return u != nil && !u.SentAt.IsZero() && !u.SentAt.Before(u.ExpiresAt.Add(ticketExpiryMargin))
}

// History collects a history's operations. It is safe for concurrent use.
type History struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
	// acked[key] is the largest token acked for a write to key.
	acked map[string]api.Token
	// wrote[key] is the largest token of any write to key recorded.
	wrote map[string]api.Token
	// invoked[token] is when a write with token was first invoked.
	invoked     map[api.Token]int64
	nextProcess int
	ambiguous   int
}

// NewHistory starts a history now.
func NewHistory(clients int) *History {
	return &History{start: time.Now(), acked: make(map[string]api.Token), wrote: make(map[string]api.Token), invoked: make(map[api.Token]int64), nextProcess: clients}
}

// Now returns nanoseconds since the history started.
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// Invoke notes that a write with token is about to be sent.
func (h *History) Invoke(token api.Token, at int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.invoked[token]; !ok {
		h.invoked[token] = at
	}
}

// InvokedBefore reports whether a write with token was invoked at or
// before at.
func (h *History) InvokedBefore(token api.Token, at int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.invoked[token]
	return ok && t <= at
}

// Add records op, and returns the porcupine process id the op's client
// uses next.
func (h *History) Add(op Op) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	next := op.Process
	if op.Outcome == Ambiguous {
		h.ambiguous++
		next = h.nextProcess
		h.nextProcess++
	}
	if op.Kind.changes() && op.Outcome == Acked && op.Token > h.acked[op.Key] {
		h.acked[op.Key] = op.Token
	}
	if op.Kind.changes() && op.Token > h.wrote[op.Key] {
		h.wrote[op.Key] = op.Token
	}
	h.ops = append(h.ops, op)
	return next
}

// AckedAbove reports whether a write or delete of key with a token above token has
// been acked.
func (h *History) AckedAbove(key string, token api.Token) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.acked[key] > token
}

// AnsweredAbove reports whether a write or delete of key with a token
// above token has been answered (whatever the answer).
func (h *History) AnsweredAbove(key string, token api.Token) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.wrote[key] > token
}

// NewProcess returns a porcupine process id that no client uses.
func (h *History) NewProcess() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextProcess++
	return h.nextProcess - 1
}

// Seed records that the harness placed an object at key, whose body
// starts with "op=ID", before the history's first operation.
func (h *History) Seed(key, id string) {
	process := h.NewProcess()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, Op{ID: id, Client: -1, Process: process, Kind: OpSeed, Key: key, Call: -2, Return: -1})
}

// Ops returns the operations, by call time.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := append([]Op(nil), h.ops...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Call < out[j].Call })
	return out
}
