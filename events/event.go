package events

import (
	"strconv"
	"strings"
	"time"

	"fencegate/api"
)

// Kinds of decisions (Event.Kind).
const (
	// KindWriteAccepted: an object PUT, or a partner request, was
	// accepted and written (forwarded); Status is the answer's status
	// (the partner's, for a partner request).
	KindWriteAccepted = "write.accepted"
	// KindWriteRefused: a write was refused for a reason an operator
	// must be able to account for (a stale token, a token check,
	// authentication, authorization, an idempotency conflict); Problem
	// names the problem type, and Caught where a stale token was caught.
	KindWriteRefused = "write.refused"
	// KindDeleteAccepted: an object DELETE was accepted.
	KindDeleteAccepted = "delete.accepted"
	// KindLockGranted: a lock was granted; Token is the grant's.
	KindLockGranted = "lock.granted"
	// KindLockReleased: a grant was released by its holder.
	KindLockReleased = "lock.released"
	// KindLockExpired: a grant was lost because its session expired
	// (nobody kept it alive for its TTL), not released nor revoked;
	// Token and Session are the lost grant's, Holder the identity that
	// owned the session. Time is when the gateway learned it.
	KindLockExpired = "lock.expired"
	// KindLockRevoked: a grant was lost because its session was revoked
	// (DELETE /v1/sessions/{id}, through any gateway), not released nor
	// expired; Token, Session, Holder (the session's owner, not who
	// revoked it) and Time as for KindLockExpired.
	KindLockRevoked = "lock.revoked"
	// KindPartnerAdmitted: a partner request was admitted (its fence
	// check passed, its in-flight marker was placed), before its call.
	KindPartnerAdmitted = "partner.admitted"
	// KindPartnerReplayed: a partner request was answered from its
	// idempotency record, without a call; Status is the stored one.
	KindPartnerReplayed = "partner.replayed"
	// KindPartnerBusy: a partner request was refused because another
	// request on its resource was in flight.
	KindPartnerBusy = "partner.busy"
	// KindTicketIssued: a ticket was issued (POST /v1/tickets): its fence
	// check passed and raised the mark (HWM), and the client may write
	// the object straight to the store until the ticket expires. It is
	// not a write: the gateway never learns whether or when the ticket
	// is used, and publishes nothing when it is.
	KindTicketIssued = "ticket.issued"
)

// Where a stale token was caught (Event.Caught).
const (
	CaughtCache  = "cache"  // the gateway's cached high-water mark
	CaughtObject = "object" // the token the object already records
	CaughtEtcd   = "etcd"   // the fence check's transaction
)

// Event is one decision of the gateway. Its JSON form is the data of the
// feed's "decision" events; zero fields are left out, but for seq, time,
// kind and resource. Tokens are JSON strings: they are 64-bit, past what
// a JavaScript number holds exactly.
type Event struct {
	// Seq numbers the Hub's events from 1, in the order subscribers get
	// them (Hub.Publish sets it).
	Seq uint64 `json:"seq"`
	// Time is when the decision was made.
	Time time.Time `json:"time"`
	// Kind is one of the Kind constants.
	Kind string `json:"kind"`
	// Resource is what the decision was about: an object's
	// "s3/<bucket>/<key>", a partner's "partner/<route>/<id>", a lock's
	// name.
	Resource string `json:"resource"`
	// Token is the request's fencing token, or the lock grant's (sent
	// only to subscribers that Filter.SeesGrant allows).
	Token api.Token `json:"token,string,omitempty"`
	// HWMBefore is the high-water mark as this gateway knew it before an
	// accepted write: etcd's mark or a lower bound of it (the gateway's
	// cache). Zero when it knew none.
	HWMBefore api.Token `json:"hwm_before,string,omitempty"`
	// HWM is the high-water mark after an accepted write (its token), or
	// the mark that refused a stale one.
	HWM api.Token `json:"hwm,string,omitempty"`
	// ETag is the new version's, for an accepted object PUT.
	ETag string `json:"etag,omitempty"`
	// Status is the HTTP status answered.
	Status int `json:"status,omitempty"`
	// LatencyMS is how long the request took, in milliseconds, for
	// accepted writes.
	LatencyMS float64 `json:"latency_ms,omitempty"`
	// Identity is the caller's identity ("" without auth).
	Identity string `json:"identity,omitempty"`
	// Problem is the short name of the problem type answered to a
	// refused write, such as "stale-token".
	Problem string `json:"problem,omitempty"`
	// Caught is where a stale token was caught (Caught constants).
	Caught string `json:"caught,omitempty"`
	// Session is the lock grant's session (sent only to subscribers
	// that Filter.SeesGrant allows).
	Session string `json:"session,omitempty"`
	// Holder is, for lock events, the identity that was granted the
	// lock, released it, or whose session expired or was revoked holding
	// it ("" without auth).
	Holder string `json:"holder,omitempty"`
	// Waiters counts the requests queued behind a lock's holder after a
	// grant or release; nil when unknown.
	Waiters *int64 `json:"waiters,omitempty"`
	// SessionOwner is, for a lock event, the identity that owns the
	// grant's session ("" without auth), or one that may see the grant's
	// token anyway (the operator that acted with another identity's
	// session, whose owner the publisher does not learn). It is never
	// sent: it decides which subscribers get the event's Token and
	// Session (Filter.SeesGrant).
	SessionOwner string `json:"-"`
}

// isLock reports whether e is a lock event, whose Token and Session go
// only to the subscribers that Filter.SeesGrant allows.
func (e *Event) isLock() bool { return strings.HasPrefix(e.Kind, "lock.") }

// withoutGrant returns e without its grant's token and session: the
// event a lock event is to a subscriber that may not see them.
func (e *Event) withoutGrant() *Event {
	c := *e
	c.Token, c.Session = 0, ""
	return &c
}

// timeLayout is Event.Time's form: UTC, microseconds.
const timeLayout = "2006-01-02T15:04:05.000000Z07:00"

// appendFields appends e's JSON fields but seq, without braces, each
// led by a comma: ,"time":...,"kind":...
func (e *Event) appendFields(b []byte) []byte {
	b = append(b, `,"time":"`...)
	b = e.Time.UTC().AppendFormat(b, timeLayout)
	b = append(b, `","kind":`...)
	b = api.AppendJSONString(b, e.Kind)
	b = append(b, `,"resource":`...)
	b = api.AppendJSONString(b, e.Resource)
	b = appendToken(b, `,"token":"`, e.Token)
	b = appendToken(b, `,"hwm_before":"`, e.HWMBefore)
	b = appendToken(b, `,"hwm":"`, e.HWM)
	b = appendOptString(b, `,"etag":`, e.ETag)
	if e.Status != 0 {
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(e.Status), 10)
	}
	if e.LatencyMS != 0 {
		b = append(b, `,"latency_ms":`...)
		b = strconv.AppendFloat(b, e.LatencyMS, 'f', 3, 64)
	}
	b = appendOptString(b, `,"identity":`, e.Identity)
	b = appendOptString(b, `,"problem":`, e.Problem)
	b = appendOptString(b, `,"caught":`, e.Caught)
	b = appendOptString(b, `,"session":`, e.Session)
	b = appendOptString(b, `,"holder":`, e.Holder)
	if e.Waiters != nil {
		b = append(b, `,"waiters":`...)
		b = strconv.AppendInt(b, *e.Waiters, 10)
	}
	return b
}

// AppendJSON appends e as its JSON object.
func (e *Event) AppendJSON(b []byte) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = e.appendFields(b)
	return append(b, '}')
}

// appendFrame appends the SSE message of the event numbered seq in the
// run named run whose fields (appendFields) are body:
//
//	id: <run>-<seq>
//	event: decision
//	data: {"seq":<seq>,...}
//	(blank line)
//
// The id is the event's Position, which a subscriber sends back to
// resume after it (Last-Event-ID).
func appendFrame(b []byte, run string, seq uint64, body []byte) []byte {
	b = append(b, "id: "...)
	b = append(b, run...)
	b = append(b, '-')
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, "\nevent: decision\ndata: {\"seq\":"...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, body...)
	return append(b, "}\n\n"...)
}

// AppendDropped appends the SSE message that tells a subscriber it lost
// n events: event: dropped, data: {"dropped":n}.
func AppendDropped(b []byte, n uint64) []byte {
	b = append(b, "event: dropped\ndata: {\"dropped\":"...)
	b = strconv.AppendUint(b, n, 10)
	return append(b, "}\n\n"...)
}

// Keepalive is the SSE comment a stream sends while it has nothing else
// to send, so that proxies and clients see it alive.
const Keepalive = ": keepalive\n\n"

func appendToken(b []byte, field string, t api.Token) []byte {
	if t == 0 {
		return b
	}
	b = append(b, field...)
	b = strconv.AppendUint(b, uint64(t), 10)
	return append(b, '"')
}

func appendOptString(b []byte, field, s string) []byte {
	if s == "" {
		return b
	}
	return api.AppendJSONString(append(b, field...), s)
}
