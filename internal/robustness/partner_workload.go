package robustness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"fencegate/api"
)

// implausibleBase is where the tokens that no lock issued start: 2^62,
// beyond any revision the suite's etcd reaches.
const implausibleBase = api.Token(1) << 62

// PartnerOp is one partner request of the workload: a request id (the
// body's "req=" and the Idempotency-Key of every attempt), sent once, and
// again with the same key and body after an ambiguous answer.
type PartnerOp struct {
	ID      string
	Client  int
	Account string
	Token   api.Token
	// Implausible says the token came from no lock (implausibleBase and
	// up); Stale that its holder stalled past its lease first.
	Implausible, Stale bool
	Attempts           []PartnerAttempt
}

// PartnerAttempt is one sending of a PartnerOp, and the gateway's answer.
type PartnerAttempt struct {
	Gateway string
	// Status and ProblemType are the answer (0 and "" if none: Err says
	// why).
	Status      int
	ProblemType string
	// Replayed says the answer came from the idempotency record
	// (Idempotent-Replayed: true).
	Replayed bool
	Err      string
}

// PartnerOutcome classifies an attempt's answer.
func (a PartnerAttempt) Outcome() Outcome {
	if a.Status == 0 {
		return Ambiguous
	}
	return partnerOutcome(a.Status, a.ProblemType)
}

// partnerOutcome classifies a gateway's answer to a partner request:
// Acked for the partner's 2xx (forwarded now or replayed), Refused for
// the answers that promise nothing was forwarded, RefusedStale for a
// stale token, Ambiguous for upstream failures, and Failed for anything
// else (an answer the workload never provokes).
func partnerOutcome(status int, problemType string) Outcome {
	switch {
	case status/100 == 2:
		return Acked
	case problemType == api.ProblemTypePrefix+"stale-token":
		return RefusedStale
	case problemType == api.ProblemTypePrefix+"implausible-token",
		problemType == api.ProblemTypePrefix+"fence-unavailable",
		problemType == api.ProblemTypePrefix+"resource-busy",
		problemType == api.ProblemTypePrefix+"idempotency-in-flight":
		return Refused
	case status == http.StatusBadGateway, status == http.StatusGatewayTimeout:
		return Ambiguous
	}
	return Failed
}

// Accounts returns the partner accounts of the history.
func (w *Workload) Accounts() []string {
	var out []string
	for i := range w.cfg.PartnerAccounts {
		out = append(out, fmt.Sprintf("%sa%d", w.accountPrefix(), i+1))
	}
	return out
}

// accountPrefix starts every account of the history: "h3-1234-".
func (w *Workload) accountPrefix() string { return strings.ReplaceAll(w.prefix, "/", "-") }

// PartnerOps returns the partner requests sent so far.
func (w *Workload) PartnerOps() []PartnerOp {
	w.partnerMu.Lock()
	defer w.partnerMu.Unlock()
	return append([]PartnerOp(nil), w.partnerOps...)
}

// partnerClient sends partner requests until stop: mostly as the holder of
// the account's lock (one to three requests, some after stalling past its
// lease), sometimes with a token no lock issued.
func (w *Workload) partnerClient(ctx context.Context, id int, rnd *rand.Rand, stop <-chan struct{}) {
	if w.cfg.PartnerAccounts == 0 {
		return
	}
	cs := &clientState{id: id, rnd: rnd}
	accounts := w.Accounts()
	for cs.ops < w.cfg.MaxOpsPerClient {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		account := accounts[rnd.IntN(len(accounts))]
		if rnd.Float64() < w.cfg.ImplausibleRatio {
			w.partnerRequest(ctx, cs, account, implausibleBase+api.Token(rnd.IntN(1<<20)), true, false)
			continue
		}
		if err := w.lockedPartnerRequests(ctx, cs, account, stop); err != nil {
			select {
			case <-time.After(time.Duration(20+rnd.IntN(80)) * time.Millisecond):
			case <-stop:
			}
		}
	}
}

// lockedPartnerRequests takes the account's lock and sends one to three
// requests with its token; as a stale client, after letting its lease
// expire.
func (w *Workload) lockedPartnerRequests(ctx context.Context, cs *clientState, account string, stop <-chan struct{}) error {
	lockCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	session, mutex, token, err := w.takeLock(lockCtx, "partner/"+account)
	if err != nil {
		return err
	}
	defer session.Close()
	stale := cs.rnd.Float64() < w.cfg.StaleRatio
	if stale {
		session.Orphan()
		w.waitGone(ctx, mutex.Key(), 3*time.Second, stop)
	}
	for range 1 + cs.rnd.IntN(3) {
		if w.partnerRequest(ctx, cs, account, token, false, stale) == RefusedStale {
			break
		}
	}
	if !stale {
		unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = mutex.Unlock(unlockCtx)
		cancel()
	}
	return nil
}

// partnerRequest sends one request through random gateways (again, with
// the same Idempotency-Key and body, after an ambiguous answer, as
// RetryRatio says), records it, and returns its last attempt's outcome.
func (w *Workload) partnerRequest(ctx context.Context, cs *clientState, account string, token api.Token, implausible, stale bool) Outcome {
	cs.ops++
	op := PartnerOp{
		ID:      fmt.Sprintf("%sp%d-%d", w.accountPrefix(), cs.id, cs.ops),
		Client:  cs.id,
		Account: account,
		Token:   token, Implausible: implausible, Stale: stale,
	}
	body := fmt.Sprintf("req=%s token=%d client=%d\n", op.ID, token, cs.id)
	var outcome Outcome
	for attempt := 0; attempt < 2; attempt++ {
		a := w.partnerAttempt(ctx, w.gateway(cs.rnd), op, body)
		op.Attempts = append(op.Attempts, a)
		outcome = a.Outcome()
		if outcome != Ambiguous || !(cs.rnd.Float64() < w.cfg.RetryRatio) {
			break
		}
	}
	w.partnerMu.Lock()
	w.partnerOps = append(w.partnerOps, op)
	w.partnerMu.Unlock()
	return outcome
}

// partnerAttempt POSTs body through g.
func (w *Workload) partnerAttempt(ctx context.Context, g *Gateway, op PartnerOp, body string) PartnerAttempt {
	a := PartnerAttempt{Gateway: g.Name}
	url := fmt.Sprintf("%s/v1/partners/%s/accounts/%s/charges", g.URL, PartnerRoute, op.Account)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		panic(err) // a bug in the workload
	}
	req.Header.Set(api.HeaderFenceToken, op.Token.String())
	req.Header.Set("Idempotency-Key", op.ID)
	req.Header.Set("Content-Type", "text/plain")
	resp, err := w.http.Do(req)
	if err != nil {
		a.Err = err.Error()
		return a
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	a.Status = resp.StatusCode
	a.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	if strings.HasPrefix(resp.Header.Get("Content-Type"), api.ContentTypeProblem) {
		var p problem
		_ = json.Unmarshal(data, &p)
		a.ProblemType = p.Type
	}
	if a.Outcome() == Failed {
		a.Err = fmt.Sprintf("unexpected answer %d: %.300s", resp.StatusCode, data)
	}
	return a
}

// PartnerFences reads each account's high-water mark through a gateway
// (GET /v1/fences/partner/...), linearizably.
func (w *Workload) PartnerFences(ctx context.Context) (map[string]api.Token, error) {
	out := make(map[string]api.Token)
	for _, account := range w.Accounts() {
		g := w.cluster.Gateways[0]
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.URL+"/v1/fences/"+string(PartnerResource(account)), nil)
		if err != nil {
			return nil, err
		}
		resp, err := w.http.Do(req)
		if err != nil {
			return nil, fmt.Errorf("read the mark of %s: %w", account, err)
		}
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		var fence api.Fence
		if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &fence) != nil {
			return nil, fmt.Errorf("read the mark of %s: %d %s", account, resp.StatusCode, data)
		}
		out[account] = fence.HighWaterMark
	}
	return out, nil
}
