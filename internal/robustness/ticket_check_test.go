package robustness

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"fencegate/api"
)

// The ticket shape on constructed histories of object "k": u (token 5)
// creates it; holder 6 asks for a ticket (its fence check raises the mark
// to 6), lets its lock go, and later sends its bytes straight to the store
// on the ticket. The checkers must judge the ticket's write like any
// other, and say when one landed that must not have.

// ticketT0 is the wall clock of the constructed histories' tickets.
var ticketT0 = time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)

// ticketRequestOp is holder token's ticket request "id-ticket", answered
// status (201 issued, 409 stale with mark hwm).
func ticketRequestOp(id string, process int, token api.Token, call, ret int64, status int, hwm api.Token) Op {
	op := Op{ID: id + "-ticket", Process: process, Kind: OpTicket, Key: "k", Token: token, Call: call, Return: ret, Status: status,
		Ticket: &TicketUse{Plan: ticketPaused, Request: id + "-ticket", ExpiresAt: ticketT0.Add(2 * time.Second)}}
	switch status {
	case http.StatusCreated:
		op.Outcome = Acked
	case http.StatusConflict:
		op.Outcome, op.ProblemType, op.HighWaterMark = RefusedStale, api.ProblemTypePrefix+"stale-token", hwm
	default:
		op.Outcome = Ambiguous
	}
	return op
}

// ticketWriteOp is write id, sent on the ticket of request "req-ticket"
// sent seconds after ticketT0 (the ticket expires at 2 s), answered
// status by the store, conditional on replaced ("" for absent).
func ticketWriteOp(id, req string, process int, token api.Token, call, ret int64, status int, replaced string, sent float64) Op {
	op := writeOp(id, process, token, call, ret, status, replaced)
	op.ReplacedKnown = status == http.StatusOK
	op.Created = op.ReplacedKnown && replaced == ""
	if status == http.StatusPreconditionFailed || status == http.StatusForbidden {
		op.Outcome = Refused
	}
	op.Ticket = &TicketUse{Plan: ticketPaused, Request: req + "-ticket", ExpiresAt: ticketT0.Add(2 * time.Second),
		SentAt: ticketT0.Add(time.Duration(sent * float64(time.Second)))}
	return op
}

// ticketStoreWrite is the store's record of a write on a ticket.
func ticketStoreWrite(seq int64, op string, token api.Token, condition string, status int) StoreWrite {
	w := StoreWrite{Seq: seq, Key: Bucket + "/k", Op: op, Token: token, Condition: condition, Forwarded: true, Status: status, Ticket: true}
	if status == http.StatusOK {
		w.Committed, w.ETag = true, "e-"+op
	}
	return w
}

// ticketEvidence is u's creation, then ops, with the store's record
// writes after u's, ending with final; extraMarks are marks raised by
// fence checks that wrote nothing (a ticket never used).
func ticketEvidence(ops []Op, writes []StoreWrite, final ObjectState, extraMarks ...api.Token) Evidence {
	u := writeOp("u", 0, 5, 0, 10, http.StatusCreated, "")
	uw := s3Write(1, "u", 5)
	uw.Condition = "If-None-Match: *"
	ev := seededEvidence(append([]Op{u}, ops...), append([]StoreWrite{uw}, writes...), final)
	for _, token := range extraMarks {
		events := ev.HWMEvents["k"]
		ev.HWMEvents["k"] = append(events, HWMEvent{Revision: events[len(events)-1].Revision + 1, Token: token})
		ev.FinalHWM["k"] = token
	}
	return ev
}

func TestCheckTicketWrites(t *testing.T) {
	x := writeOp("x", 2, 7, 30, 40, http.StatusOK, "e-u")
	xw := s3Write(2, "x", 7)
	xw.Condition = "If-Match: e-u"
	newerTicket := ticketRequestOp("tk7", 3, 7, 30, 35, http.StatusCreated, 0)
	for _, tc := range []struct {
		name string
		ev   Evidence
		want []string
	}{
		{"paused past a newer write, refused 412", ticketEvidence(
			[]Op{ticketRequestOp("tk6", 1, 6, 20, 25, http.StatusCreated, 0), x,
				ticketWriteOp("tk6", "tk6", 1, 6, 50, 60, http.StatusPreconditionFailed, "e-u", 1), readOp(4, 70, 80, "x", 7)},
			[]StoreWrite{xw, ticketStoreWrite(3, "tk6", 6, "If-Match: e-u", http.StatusPreconditionFailed)},
			ObjectState{Exists: true, Op: "x", Token: 7},
		), nil},
		{"paused past a newer write, landed without a condition", ticketEvidence(
			[]Op{ticketRequestOp("tk6", 1, 6, 20, 25, http.StatusCreated, 0), x,
				ticketWriteOp("tk6", "tk6", 1, 6, 50, 60, http.StatusOK, "e-u", 1), readOp(4, 70, 80, "tk6", 6)},
			[]StoreWrite{xw, ticketStoreWrite(3, "tk6", 6, "", http.StatusOK)},
			ObjectState{Exists: true, Op: "tk6", Token: 6},
		), []string{"acked-committed", "linearizability", "versions-monotonic"}},
		{"paused past a newer fence check without a write, landed", ticketEvidence(
			[]Op{ticketRequestOp("tk6", 1, 6, 20, 25, http.StatusCreated, 0), newerTicket,
				ticketWriteOp("tk6", "tk6", 1, 6, 50, 60, http.StatusOK, "e-u", 1), readOp(4, 70, 80, "tk6", 6)},
			[]StoreWrite{ticketStoreWrite(2, "tk6", 6, "If-Match: e-u", http.StatusOK)},
			ObjectState{Exists: true, Op: "tk6", Token: 6}, 7,
		), nil},
		{"used after its expiry, refused 403", ticketEvidence(
			[]Op{ticketRequestOp("tk6", 1, 6, 20, 25, http.StatusCreated, 0),
				ticketWriteOp("tk6", "tk6", 1, 6, 50, 60, http.StatusForbidden, "e-u", 2.6), readOp(4, 70, 80, "u", 5)},
			[]StoreWrite{ticketStoreWrite(2, "tk6", 6, "If-Match: e-u", http.StatusForbidden)},
			ObjectState{Exists: true, Op: "u", Token: 5},
		), nil},
		{"used after its expiry, landed", ticketEvidence(
			[]Op{ticketRequestOp("tk6", 1, 6, 20, 25, http.StatusCreated, 0),
				ticketWriteOp("tk6", "tk6", 1, 6, 50, 60, http.StatusOK, "e-u", 2.6), readOp(4, 70, 80, "tk6", 6)},
			[]StoreWrite{ticketStoreWrite(2, "tk6", 6, "If-Match: e-u", http.StatusOK)},
			ObjectState{Exists: true, Op: "tk6", Token: 6},
		), []string{"ticket-expired"}},
		{"used a second time, refused 412", ticketEvidence(
			[]Op{ticketRequestOp("tk6", 1, 6, 20, 25, http.StatusCreated, 0),
				ticketWriteOp("tk6", "tk6", 1, 6, 30, 40, http.StatusOK, "e-u", 0.5),
				reuse(ticketWriteOp("tk6r", "tk6", 1, 6, 50, 60, http.StatusPreconditionFailed, "e-u", 0.6)), readOp(4, 70, 80, "tk6", 6)},
			[]StoreWrite{ticketStoreWrite(2, "tk6", 6, "If-Match: e-u", http.StatusOK), ticketStoreWrite(3, "tk6r", 6, "If-Match: e-u", http.StatusPreconditionFailed)},
			ObjectState{Exists: true, Op: "tk6", Token: 6},
		), nil},
		{"used a second time after a newer write, landed without a condition", ticketEvidence(
			[]Op{ticketRequestOp("tk6", 1, 6, 20, 25, http.StatusCreated, 0),
				ticketWriteOp("tk6", "tk6", 1, 6, 26, 28, http.StatusOK, "e-u", 0.5),
				writeOp("x", 2, 7, 30, 40, http.StatusOK, "e-tk6"),
				reuse(ticketWriteOp("tk6r", "tk6", 1, 6, 50, 60, http.StatusOK, "e-u", 0.6)), readOp(4, 70, 80, "tk6r", 6)},
			[]StoreWrite{ticketStoreWrite(2, "tk6", 6, "If-Match: e-u", http.StatusOK), s3Write(3, "x", 7), ticketStoreWrite(4, "tk6r", 6, "", http.StatusOK)},
			ObjectState{Exists: true, Op: "tk6r", Token: 6},
		), []string{"acked-committed", "linearizability", "versions-monotonic"}},
		{"a stale ticket request refused with a mark a write carried", ticketEvidence(
			[]Op{x, ticketRequestOp("tk6", 1, 6, 50, 55, http.StatusConflict, 7), readOp(4, 70, 80, "x", 7)},
			[]StoreWrite{xw},
			ObjectState{Exists: true, Op: "x", Token: 7},
		), nil},
		{"a stale ticket request refused with a mark nothing carried", ticketEvidence(
			[]Op{x, ticketRequestOp("tk6", 1, 6, 50, 55, http.StatusConflict, 9), readOp(4, 70, 80, "x", 7)},
			[]StoreWrite{xw},
			ObjectState{Exists: true, Op: "x", Token: 7},
		), []string{"refusal-grounded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(tc.ev, CheckConfig{ArtifactDir: t.TempDir(), LinearizabilityTimeout: 10 * time.Second})
			if got := checkNames(res); !slices.Equal(got, tc.want) {
				t.Errorf("checkers that failed: %v; want %v (%v)", got, tc.want, res.Violations)
			}
		})
	}
}

// reuse marks op as the second write on its ticket.
func reuse(op Op) Op {
	use := *op.Ticket
	use.Reuse, use.Plan = true, ticketReused
	op.Ticket = &use
	return op
}

// TestCheckNamesTicketABA: a write on a ticket that landed by the ETag ABA
// shape (its holder paused; the object went back to the bytes it
// observed) is the etag-aba finding, told as a ticket's, not a violation.
func TestCheckNamesTicketABA(t *testing.T) {
	ev := abaEvidence("E")
	for i, op := range ev.Ops {
		if op.ID == "stale" {
			ticketed := ticketWriteOp("stale", "stale", op.Process, 6, op.Call, op.Return, http.StatusOK, "E", 1)
			ticketed.ETag = op.ETag
			ev.Ops[i] = ticketed
		}
	}
	ev.Ops = append(ev.Ops, ticketRequestOp("stale", 5, 6, 15, 18, http.StatusCreated, 0))
	for i, w := range ev.Writes {
		if w.Op == "stale" {
			ev.Writes[i].Ticket = true
		}
	}
	res := Check(ev, CheckConfig{ArtifactDir: t.TempDir(), LinearizabilityTimeout: 10 * time.Second})
	if len(res.Violations) > 0 {
		t.Errorf("violations: %v; want none", res.Violations)
	}
	if len(res.Findings) != 1 || res.Findings[0].Name != "etag-aba" || !res.Findings[0].Ticket {
		t.Fatalf("findings: %+v; want one etag-aba, a ticket's", res.Findings)
	}
	if got := ticketFigures(ev.Ops, res.Findings); got.ABA != 1 || got.Uploads != 1 || got.Landed != 1 {
		t.Errorf("ticketFigures = %+v; want 1 upload, landed, by the ETag ABA shape", got)
	}
}

func TestTicketFigures(t *testing.T) {
	abandoned := ticketRequestOp("tk8", 5, 8, 90, 95, http.StatusCreated, 0)
	gcs := ticketRequestOp("tk9", 6, 9, 90, 95, http.StatusNotImplemented, 0)
	gcs.Outcome = Refused
	pastWrite := ticketWriteOp("tk6", "tk6", 1, 6, 50, 60, http.StatusPreconditionFailed, "e-u", 1)
	pastWrite.Ticket.PastWrite = true
	pastFence := ticketWriteOp("tk7", "tk7", 3, 7, 50, 60, http.StatusOK, "e-u", 1)
	pastFence.Ticket.PastFence = true
	expired := ticketWriteOp("tk10", "tk10", 7, 10, 50, 60, http.StatusForbidden, "e-u", 2.6)
	ops := []Op{
		ticketRequestOp("tk6", 1, 6, 20, 25, http.StatusCreated, 0), pastWrite,
		ticketRequestOp("tk7", 3, 7, 20, 25, http.StatusCreated, 0), pastFence,
		reuse(ticketWriteOp("tk7r", "tk7", 3, 7, 70, 80, http.StatusPreconditionFailed, "e-u", 1.1)),
		ticketRequestOp("tk5", 4, 5, 20, 25, http.StatusConflict, 7),
		ticketRequestOp("tk10", 7, 10, 20, 25, http.StatusCreated, 0), expired,
		abandoned, gcs,
		writeOp("w", 8, 11, 100, 110, http.StatusOK, "e-tk7"),
	}
	want := TicketFigures{Requests: 6, Issued: 4, StaleRefused: 1, NotImplemented: 1, Uploads: 4, Landed: 1,
		PastWrite: 1, PastWriteRefused: 1, PastFence: 1, PastFenceLanded: 1, Expired: 1, ExpiredRefused: 1,
		Reused: 1, ReuseRefused: 1, Abandoned: 1}
	if got := ticketFigures(ops, nil); got != want {
		t.Errorf("ticketFigures =\n%+v; want\n%+v", got, want)
	}
}

func TestTicketOutcome(t *testing.T) {
	notImplemented := api.ProblemTypePrefix + "not-implemented"
	for _, tc := range []struct {
		store    string
		status   int
		typ      string
		want     Outcome
		expected bool
	}{
		{api.StoreS3, 201, "", Acked, true},
		{api.StoreS3, 409, api.ProblemTypePrefix + "stale-token", RefusedStale, true},
		{api.StoreS3, 503, api.ProblemTypePrefix + "fence-unavailable", Refused, true},
		{api.StoreS3, 502, api.ProblemTypePrefix + "upstream-error", Ambiguous, true},
		{api.StoreS3, 501, notImplemented, Ambiguous, false},
		{api.StoreS3, 400, api.ProblemTypePrefix + "invalid-request", Ambiguous, false},
		{api.StoreGCS, 501, notImplemented, Refused, true},
		{api.StoreGCS, 201, "", Acked, false},
		{api.StoreGCS, 409, api.ProblemTypePrefix + "stale-token", RefusedStale, true},
		{api.StoreGCS, 503, api.ProblemTypePrefix + "fence-unavailable", Refused, false},
	} {
		got, expected := ticketOutcome(tc.store, tc.status, tc.typ)
		if got != tc.want || expected != tc.expected {
			t.Errorf("ticketOutcome(%s, %d, %q) = %s, %t; want %s, %t", tc.store, tc.status, tc.typ, got, expected, tc.want, tc.expected)
		}
	}
}

func TestUploadOutcome(t *testing.T) {
	for _, tc := range []struct {
		status   int
		code     string
		want     Outcome
		expected bool
	}{
		{200, "", Acked, true},
		{412, "PreconditionFailed", Refused, true},
		{409, "ConditionalRequestConflict", Refused, true},
		{404, "NoSuchKey", Refused, true},
		{403, "AccessDenied", Refused, true},
		{403, "SignatureDoesNotMatch", Ambiguous, false},
		{400, "InvalidRequest", Ambiguous, false},
		{500, "InternalError", Ambiguous, true},
		{503, "SlowDown", Ambiguous, true},
		{502, "", Ambiguous, true},
	} {
		got, expected := uploadOutcome(tc.status, tc.code)
		if got != tc.want || expected != tc.expected {
			t.Errorf("uploadOutcome(%d, %q) = %s, %t; want %s, %t", tc.status, tc.code, got, expected, tc.want, tc.expected)
		}
	}
}

// TestStoreProxyTellsTicketWrites: the S3 proxy records a presigned PUT
// of an object (a write on a ticket) as a write, and says it came on a
// ticket; a presigned part is no object write.
func TestStoreProxyTellsTicketWrites(t *testing.T) {
	const signed = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=a%2F20261207%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261207T060000Z&X-Amz-Expires=2&X-Amz-SignedHeaders=content-length%3Bhost%3Bif-match&X-Amz-Signature=00"
	for _, tc := range []struct {
		target        string
		write, ticket bool
	}{
		{"/robustness/h1/obj-1?x-id=PutObject", true, false},
		{"/robustness/h1/obj-1?" + signed + "&x-id=PutObject", true, true},
		{"/robustness/h1/obj-1?" + signed + "&partNumber=1&uploadId=u&x-id=UploadPart", false, true},
		{"/robustness/h1/obj-1?tagging", false, false},
	} {
		r := httptest.NewRequest(http.MethodPut, tc.target, nil)
		if got := isObjectWrite(r); got != tc.write {
			t.Errorf("isObjectWrite(%s) = %t; want %t", tc.target, got, tc.write)
		}
		if got := presigned(r); got != tc.ticket {
			t.Errorf("presigned(%s) = %t; want %t", tc.target, got, tc.ticket)
		}
	}
}
