package robustness

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"fencegate/api"
)

// The ticket shape (docs/tickets.md), in every history: some lock holders
// write by ticket. The holder asks a random gateway for a ticket with its
// token (POST /v1/tickets: a PUT's checks up to the write, whose fence
// check raises the mark), and sends the bytes itself to the URL it was
// answered: the store address the gateway was configured with, that is
// the gateway's S3 link and the S3 proxy, which records the write in the
// store's order like the gateways' own (StoreWrite.Ticket). The ticket
// request is an OpTicket, each write on the ticket an OpWrite, judged by
// porcupine and every invariant like any other write: a 412, 404 or 403
// from the store is a write refused, a 5xx or a lost connection an
// ambiguous one. What the holder does with its ticket is its plan
// (ticketPlan): send at once; send, then send other bytes on the same
// ticket; let its lock go and send once a newer holder's fence check has
// passed (and, half the time, once a newer write was acked); let its lock
// go and send after the ticket expired; or never send. A GCS bucket
// answers a ticket request 501 (after the fast reject, which may refuse a
// stale token first), and the holder then writes through the gateway.

// ticketExpiry is every gateway's --ticket-expiry (objects.ticket_expiry
// in its config file): short, so that the expired plan waits little and
// the ETag ABA window of a ticket's write stays small. The ticket's life
// counts from X-Amz-Date, in whole seconds: 1 to 2 s from the answer.
const ticketExpiry = 2 * time.Second

// ticketExpiryMargin is how long after its expiry the expired plan sends
// its write: the store checks the expiry when the body has arrived, on
// the same clock, so a write sent that late must be refused
// (checkTicketExpiry).
const ticketExpiryMargin = 500 * time.Millisecond

// ticketSendMargin is how long before its expiry the paused plan sends
// its write at the latest, so that the store judges its condition, not
// its expiry.
const ticketSendMargin = 300 * time.Millisecond

// ticketBodySize is the length of a write's body on a ticket in a history
// of distinct bytes: its op, padded, so that a second write on the same
// ticket (whose length is signed) can name an op of its own.
const ticketBodySize = 96

// ticketPlan is what a holder does with its ticket.
type ticketPlan string

const (
	// ticketPlain sends the bytes at once, holding the lock.
	ticketPlain ticketPlan = "plain"
	// ticketReused sends the bytes, then other bytes of the same length,
	// naming an op of their own, on the same ticket: the store must
	// refuse the second (its condition names the version the first
	// replaced). Histories of identical bytes have none: there the op is
	// named by the signed Content-Type, so a second write could not be
	// told from the first.
	ticketReused ticketPlan = "reused"
	// ticketPaused lets the lock go, waits until a newer holder's fence
	// check has raised the mark above its token (and, half the time,
	// until a newer write is acked), then sends: past a newer write the
	// store must refuse it (412), past a fence check alone it may land.
	ticketPaused ticketPlan = "paused"
	// ticketExpired lets the lock go and sends after the ticket's expiry
	// (by ticketExpiryMargin): the store must refuse it (403).
	ticketExpired ticketPlan = "expired"
	// ticketAbandoned lets the lock go and never sends: its fence check
	// raised the mark, and nothing is written.
	ticketAbandoned ticketPlan = "abandoned"
)

// ticketPlans are the plans a ticket holder draws, with their weights.
var ticketPlans = []struct {
	plan   ticketPlan
	weight int
}{{ticketPlain, 20}, {ticketReused, 20}, {ticketPaused, 35}, {ticketExpired, 15}, {ticketAbandoned, 10}}

// drawTicketPlan draws a holder's plan.
func (w *Workload) drawTicketPlan(cs *clientState) ticketPlan {
	total := 0
	for _, p := range ticketPlans {
		total += p.weight
	}
	n := cs.rnd.IntN(total)
	for _, p := range ticketPlans {
		if n < p.weight {
			if p.plan == ticketReused && w.cfg.SameBytes {
				return ticketPlain
			}
			return p.plan
		}
		n -= p.weight
	}
	panic("unreachable")
}

// issuedTicket is the part of the gateway's answer to a ticket request
// (fence.IssuedTicket) that the workload reads.
type issuedTicket struct {
	api.Ticket
	Token        api.Token `json:"token"`
	ReplacesETag string    `json:"replaces_etag"`
}

// ticketWrite is a lock holder's write by ticket (see the shape's comment
// above). release lets the holder's lock go (a stale holder's is gone
// already). It reports whether the holder is done: false after a GCS
// bucket's 501, when it is to write through the gateway instead.
func (w *Workload) ticketWrite(ctx context.Context, cs *clientState, key string, token api.Token, stale bool, release func(), stop <-chan struct{}) bool {
	plan := w.drawTicketPlan(cs)
	cs.ops++
	id := fmt.Sprintf("%sc%d-%d", strings.ReplaceAll(w.prefix, "/", "-"), cs.id, cs.ops)
	body, contentType := w.ticketBody(cs, id, token)
	g := w.gateway(cs.rnd)
	request, t := w.requestTicket(ctx, cs, g, key, token, id, plan, stale, int64(len(body)), contentType)
	if request.Status == http.StatusNotImplemented && w.cfg.gcs() {
		return false
	}
	if request.Outcome != Acked {
		return true
	}
	use := TicketUse{Plan: plan, Request: request.ID, ExpiresAt: t.ExpiresAt}
	switch plan {
	case ticketPlain:
		w.sendOnTicket(ctx, cs, g, key, token, id, stale, t, body, use)
	case ticketReused:
		w.sendOnTicket(ctx, cs, g, key, token, id, stale, t, body, use)
		cs.ops++
		again := fmt.Sprintf("%sc%d-%d", strings.ReplaceAll(w.prefix, "/", "-"), cs.id, cs.ops)
		body, _ = w.ticketBody(cs, again, token)
		use.Reuse = true
		w.sendOnTicket(ctx, cs, g, key, token, again, stale, t, body, use)
	case ticketPaused:
		release()
		deadline := t.ExpiresAt.Add(-ticketSendMargin)
		if w.awaitMarkAbove(ctx, key, token, deadline, stop) && cs.rnd.IntN(2) == 0 {
			w.awaitAckedAbove(key, token, deadline, stop)
		}
		w.sendOnTicket(ctx, cs, g, key, token, id, true, t, body, use)
	case ticketExpired:
		release()
		select {
		case <-time.After(time.Until(t.ExpiresAt.Add(ticketExpiryMargin))):
			w.sendOnTicket(ctx, cs, g, key, token, id, true, t, body, use)
		case <-stop: // the history is ending: the ticket goes unused
		case <-ctx.Done():
		}
	case ticketAbandoned:
		release()
	}
	return true
}

// ticketBody returns the body of write id on a ticket, and the content
// type its ticket signs: in a history of identical bytes one of the two
// bodies, the op named by the Content-Type; else the op named by a body
// of ticketBodySize bytes.
func (w *Workload) ticketBody(cs *clientState, id string, token api.Token) ([]byte, string) {
	if w.cfg.SameBytes {
		return []byte(sameBytes[cs.rnd.IntN(len(sameBytes))]), mime.FormatMediaType("text/plain", map[string]string{"op": id})
	}
	line := fmt.Sprintf("op=%s token=%d client=%d ticket=true", id, token, cs.id)
	return []byte(fmt.Sprintf("%-*s\n", ticketBodySize-1, line)), "text/plain"
}

// ticketURL is key's ticket route at gateway g.
func (w *Workload) ticketURL(g *Gateway, key string) string {
	return g.URL + "/v1/tickets/" + w.cfg.bucket() + "/" + key
}

// requestTicket asks g for a ticket to write size bytes of contentType to
// key with token, and records the request as an OpTicket "id-ticket". It
// returns the op and, when it was answered 201, the ticket.
func (w *Workload) requestTicket(ctx context.Context, cs *clientState, g *Gateway, key string, token api.Token, id string, plan ticketPlan, stale bool, size int64, contentType string) (Op, issuedTicket) {
	op := Op{ID: id + "-ticket", Client: cs.id, Process: cs.process, Kind: OpTicket, Key: key, Token: token, Gateway: g.Name, Stale: stale,
		Ticket: &TicketUse{Plan: plan, Request: id + "-ticket"}}
	payload, err := json.Marshal(map[string]any{"size": size, "content_type": contentType})
	if err != nil {
		panic(err) // a bug in the workload
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.ticketURL(g, key), bytes.NewReader(payload))
	if err != nil {
		panic(err) // a bug in the workload
	}
	req.Header.Set(api.HeaderFenceToken, token.String())
	req.Header.Set("X-Request-Id", op.ID)
	req.Header.Set("Content-Type", "application/json")
	op.Call = w.history.Now()
	w.history.Invoke(token, op.Call)
	resp, err := w.http.Do(req)
	op.Return = w.history.Now()
	var t issuedTicket
	if err != nil {
		op.Outcome, op.Err = Ambiguous, err.Error()
		cs.process = w.history.Add(op)
		return op, t
	}
	data := readAnswer(&op, resp)
	outcome, expected := ticketOutcome(w.cfg.store(), resp.StatusCode, op.ProblemType)
	op.Outcome = outcome
	if !expected {
		op.Outcome, op.Err = Ambiguous, fmt.Sprintf("unexpected answer %d to a ticket request: %.300s", resp.StatusCode, data)
	}
	if op.Outcome == Acked {
		if err := json.Unmarshal(data, &t); err != nil {
			op.Outcome, op.Err = Ambiguous, fmt.Sprintf("unexpected answer: a ticket that does not decode: %v", err)
		} else if problem := w.ticketProblem(g, token, size, t); problem != "" {
			op.Outcome, op.Err = Ambiguous, "unexpected answer: "+problem
		}
		op.Ticket.ExpiresAt = t.ExpiresAt
	}
	cs.process = w.history.Add(op)
	return op, t
}

// ticketProblem says what is wrong with ticket t, issued by g for size
// bytes with token; "" if nothing. It does not look at the condition the
// ticket signs: what the store does with it is the checkers' to judge.
func (w *Workload) ticketProblem(g *Gateway, token api.Token, size int64, t issuedTicket) string {
	switch {
	case t.Token != token:
		return fmt.Sprintf("ticket for token %d, asked with %d", t.Token, token)
	case t.Method != http.MethodPut:
		return fmt.Sprintf("ticket method %q, want PUT", t.Method)
	case !strings.HasPrefix(t.URL, g.S3Link.URL()+"/"+w.cfg.bucket()+"/"):
		return fmt.Sprintf("ticket URL %.100q is not at the store address %s was configured with (%s)", t.URL, g.Name, g.S3Link.URL())
	case t.Headers["Content-Length"] != fmt.Sprint(size):
		return fmt.Sprintf("ticket signs Content-Length %q, asked for %d", t.Headers["Content-Length"], size)
	case t.ExpiresAt.IsZero():
		return "ticket without expires_at"
	}
	return ""
}

// ticketOutcome classifies a gateway's answer to a ticket request on a
// bucket of store, and says whether the gateway can give it: an S3
// bucket's as a PUT's, never 501; a GCS bucket's 501 not-implemented,
// before any observation or fence check, or 409 stale-token for a token
// that the gateway's cache already knows to be stale (the fast reject
// comes first), and nothing else.
func ticketOutcome(store string, status int, problemType string) (Outcome, bool) {
	outcome := writeOutcome(status, problemType)
	if store == api.StoreGCS {
		switch {
		case status == http.StatusNotImplemented && problemType == api.ProblemTypePrefix+"not-implemented":
			return Refused, true
		case outcome == RefusedStale:
			return outcome, true
		}
		return outcome, false
	}
	switch {
	case status == http.StatusOK || status == http.StatusNotImplemented:
		return Ambiguous, false
	case outcome == Ambiguous && status < 500:
		return Ambiguous, false
	}
	return outcome, true
}

// sendOnTicket sends body on ticket t, as write id of key with token,
// and records it: an OpWrite with use, whose Gateway is g, the issuer.
func (w *Workload) sendOnTicket(ctx context.Context, cs *clientState, g *Gateway, key string, token api.Token, id string, stale bool, t issuedTicket, body []byte, use TicketUse) Op {
	op := Op{ID: id, Client: cs.id, Process: cs.process, Kind: OpWrite, Key: key, Token: token, Gateway: g.Name, Stale: stale, ETag: bodyETag(body)}
	req, err := http.NewRequestWithContext(ctx, t.Method, t.URL, bytes.NewReader(body))
	if err != nil {
		panic(err) // the ticket's URL was checked (ticketProblem)
	}
	for name, value := range t.Headers {
		if name != "Content-Length" {
			req.Header.Set(name, value)
		}
	}
	req.ContentLength = int64(len(body))
	if use.Plan == ticketPaused {
		use.PastWrite = w.history.AckedAbove(key, token)
		use.PastFence = !use.PastWrite && w.markAbove(ctx, key, token)
	}
	use.SentAt = time.Now()
	op.Ticket = &use
	op.Call = w.history.Now()
	resp, err := w.s3http.Do(req)
	op.Return = w.history.Now()
	if err != nil {
		op.Outcome, op.Err = Ambiguous, err.Error()
		cs.process = w.history.Add(op)
		return op
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	op.Status = resp.StatusCode
	var e struct {
		Code string `xml:"Code"`
	}
	_ = xml.Unmarshal(data, &e)
	outcome, expected := uploadOutcome(resp.StatusCode, e.Code)
	op.Outcome = outcome
	switch {
	case !expected:
		op.Err = fmt.Sprintf("unexpected answer %d %s from the store to a write on a ticket: %.300s", resp.StatusCode, e.Code, data)
	case outcome == Acked && resp.Header.Get("ETag") != op.ETag:
		op.Err = fmt.Sprintf("unexpected answer: ETag %s, want the MD5 of the body %s", resp.Header.Get("ETag"), op.ETag)
	case outcome == Acked:
		op.ReplacedKnown, op.Created, op.Replaced = true, t.ReplacesETag == "", t.ReplacesETag
	}
	cs.process = w.history.Add(op)
	return op
}

// uploadOutcome classifies the store's answer to a write on a ticket,
// and says whether the store can give it: 200 landed; 412 (the object
// changed), 409 (a racing conditional write), 404 (an If-Match on an
// object since deleted) and 403 AccessDenied (expired) wrote nothing; a
// 5xx may have written. Another answer, such as 403
// SignatureDoesNotMatch, says the ticket or its use was wrong.
func uploadOutcome(status int, code string) (Outcome, bool) {
	switch {
	case status == http.StatusOK:
		return Acked, true
	case status == http.StatusPreconditionFailed, status == http.StatusConflict && code == "ConditionalRequestConflict",
		status == http.StatusNotFound && code == "NoSuchKey", status == http.StatusForbidden && code == "AccessDenied":
		return Refused, true
	case status >= 500:
		return Ambiguous, true
	}
	return Ambiguous, false
}

// markKey is the etcd key of key's high-water mark.
func (w *Workload) markKey(key string) string { return HWMPrefix + w.resourcePrefix() + key }

// markAbove reports whether key's mark is above token, by a linearizable
// read (false if etcd does not answer within 300 ms).
func (w *Workload) markAbove(ctx context.Context, key string, token api.Token) bool {
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	resp, err := w.cluster.Client.Get(rctx, w.markKey(key))
	if err != nil || len(resp.Kvs) != 1 {
		return false
	}
	mark, err := decodeStoredToken(resp.Kvs[0].Value)
	return err == nil && mark > token
}

// awaitMarkAbove waits until key's mark is above token (a newer holder's
// fence check passed), until deadline, and reports whether it is.
func (w *Workload) awaitMarkAbove(ctx context.Context, key string, token api.Token, deadline time.Time, stop <-chan struct{}) bool {
	for {
		if w.markAbove(ctx, key, token) {
			return true
		}
		if !time.Now().Add(20 * time.Millisecond).Before(deadline) {
			return false
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-stop:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// awaitAckedAbove waits until a write of key with a token above token was
// acked, until deadline.
func (w *Workload) awaitAckedAbove(key string, token api.Token, deadline time.Time, stop <-chan struct{}) {
	for !w.history.AckedAbove(key, token) && time.Now().Add(10*time.Millisecond).Before(deadline) {
		select {
		case <-time.After(10 * time.Millisecond):
		case <-stop:
			return
		}
	}
}

// TicketFigures counts what the ticket shape did (ticketFigures).
type TicketFigures struct {
	// Requests counts the ticket requests, Issued those answered 201,
	// StaleRefused those refused 409 stale-token, NotImplemented those a
	// GCS bucket answered 501.
	Requests, Issued, StaleRefused, NotImplemented int
	// Uploads counts the writes sent on tickets, Landed those the store
	// took (200).
	Uploads, Landed int
	// PastWrite counts the writes sent once a write with a larger token
	// had been acked, PastWriteRefused those the store refused.
	PastWrite, PastWriteRefused int
	// PastFence counts the writes sent once only a fence check with a
	// larger token had passed, PastFenceLanded those that landed.
	PastFence, PastFenceLanded int
	// Expired counts the writes sent after their ticket expired,
	// ExpiredRefused those the store refused 403.
	Expired, ExpiredRefused int
	// Reused counts the second writes on a ticket, ReuseRefused those the
	// store refused.
	Reused, ReuseRefused int
	// Abandoned counts the tickets issued on which nothing was sent.
	Abandoned int
	// ABA counts the etag-aba findings whose write was sent on a ticket.
	ABA int
}

// ticketFigures counts the ticket shape's requests and writes in ops, and
// the etag-aba findings of writes on tickets.
func ticketFigures(ops []Op, findings []Finding) TicketFigures {
	var f TicketFigures
	used := make(map[string]bool)
	for _, op := range ops {
		if op.Ticket != nil && op.Kind == OpWrite {
			used[op.Ticket.Request] = true
		}
	}
	for _, op := range ops {
		if op.Ticket == nil {
			continue
		}
		if op.Kind == OpTicket {
			f.Requests++
			switch {
			case op.Outcome == Acked:
				f.Issued++
				if !used[op.ID] {
					f.Abandoned++
				}
			case op.Outcome == RefusedStale:
				f.StaleRefused++
			case op.Status == http.StatusNotImplemented:
				f.NotImplemented++
			}
			continue
		}
		u, landed, refused := op.Ticket, op.Outcome == Acked, op.Outcome == Refused
		f.Uploads++
		f.Landed += count(landed)
		if u.PastWrite {
			f.PastWrite++
			f.PastWriteRefused += count(refused)
		}
		if u.PastFence {
			f.PastFence++
			f.PastFenceLanded += count(landed)
		}
		if u.expired() {
			f.Expired++
			f.ExpiredRefused += count(refused && op.Status == http.StatusForbidden)
		}
		if u.Reuse {
			f.Reused++
			f.ReuseRefused += count(refused)
		}
	}
	for _, finding := range findings {
		if finding.Name == "etag-aba" && finding.Ticket {
			f.ABA++
		}
	}
	return f
}

// count is 1 for true.
func count(b bool) int {
	if b {
		return 1
	}
	return 0
}

// add adds o's counts to f's.
func (f *TicketFigures) add(o TicketFigures) {
	f.Requests += o.Requests
	f.Issued += o.Issued
	f.StaleRefused += o.StaleRefused
	f.NotImplemented += o.NotImplemented
	f.Uploads += o.Uploads
	f.Landed += o.Landed
	f.PastWrite += o.PastWrite
	f.PastWriteRefused += o.PastWriteRefused
	f.PastFence += o.PastFence
	f.PastFenceLanded += o.PastFenceLanded
	f.Expired += o.Expired
	f.ExpiredRefused += o.ExpiredRefused
	f.Reused += o.Reused
	f.ReuseRefused += o.ReuseRefused
	f.Abandoned += o.Abandoned
	f.ABA += o.ABA
}

// String is the figures, for a history's line and the run's last line
// (the ABA count is with the other findings').
func (f TicketFigures) String() string {
	return fmt.Sprintf("tk_requests=%d tk_issued=%d tk_stale_refused=%d tk_501=%d tk_uploads=%d tk_landed=%d tk_past_write=%d tk_past_write_refused=%d "+
		"tk_past_fence=%d tk_past_fence_landed=%d tk_expired=%d tk_expired_refused=%d tk_reused=%d tk_reuse_refused=%d tk_abandoned=%d",
		f.Requests, f.Issued, f.StaleRefused, f.NotImplemented, f.Uploads, f.Landed, f.PastWrite, f.PastWriteRefused,
		f.PastFence, f.PastFenceLanded, f.Expired, f.ExpiredRefused, f.Reused, f.ReuseRefused, f.Abandoned)
}
