package robustness

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"fencegate/api"
)

// The unit tests of the ETag-less and partner shapes: histories that the
// checkers must pass, and histories that they must flag.

// seedOp, writeOp and readOp build operations of one object "k".
func seedOp(id string) Op {
	return Op{ID: id, Client: -1, Process: 90, Kind: OpSeed, Key: "k", Call: -2, Return: -1}
}

func writeOp(id string, process int, token api.Token, call, ret int64, status int, replaced string) Op {
	op := Op{ID: id, Process: process, Kind: OpWrite, Key: "k", Token: token, Call: call, Return: ret, Status: status, ETag: "e-" + id}
	switch {
	case status == http.StatusOK || status == http.StatusCreated:
		op.Outcome = Acked
		op.ReplacedKnown, op.Created, op.Replaced = true, status == http.StatusCreated, replaced
	default:
		op.Outcome = Ambiguous
	}
	return op
}

func deleteOp(id string, process int, token api.Token, call, ret int64, status int) Op {
	op := Op{ID: id, Process: process, Kind: OpDelete, Key: "k", Token: token, Call: call, Return: ret, Status: status, Outcome: Ambiguous}
	if status == http.StatusNoContent {
		op.Outcome = Acked
	}
	return op
}

func readOp(process int, call, ret int64, value string, token api.Token) Op {
	return Op{ID: fmt.Sprintf("read-%d", call), Process: process, Kind: OpRead, Key: "k", Call: call, Return: ret,
		ReadExists: value != "", ReadValue: value, ReadToken: token}
}

func TestRegisterModelEtagless(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []Op
		want porcupine.CheckResult
	}{
		{"a seed reads as itself, token 0", []Op{
			seedOp("seed"),
			readOp(0, 0, 10, "seed", 0),
		}, porcupine.Ok},
		{"a seed is not absent", []Op{
			seedOp("seed"),
			readOp(0, 0, 10, "", 0),
		}, porcupine.Illegal},
		{"a 502 on a seed wrote nothing", []Op{
			seedOp("seed"),
			writeOp("a", 0, 5, 0, 10, http.StatusBadGateway, ""),
			readOp(1, 20, 30, "seed", 0),
		}, porcupine.Ok},
		{"a 502 on a seed that landed", []Op{
			seedOp("seed"),
			writeOp("a", 0, 5, 0, 10, http.StatusBadGateway, ""),
			readOp(1, 20, 30, "a", 5),
		}, porcupine.Illegal},
		{"a 504 on a seed stays ambiguous", []Op{
			seedOp("seed"),
			writeOp("a", 0, 5, 0, 10, http.StatusGatewayTimeout, ""),
			readOp(1, 20, 30, "a", 5),
		}, porcupine.Ok},
		{"a 502 once the object has an ETag stays ambiguous", []Op{
			seedOp("seed"),
			writeOp("a", 0, 5, 0, 10, http.StatusOK, ""),
			writeOp("b", 1, 6, 20, 30, http.StatusBadGateway, ""),
			readOp(2, 40, 50, "b", 6),
		}, porcupine.Ok},
		{"a write acked on top of a seed", []Op{
			seedOp("seed"),
			writeOp("a", 0, 5, 0, 10, http.StatusOK, ""),
			writeOp("b", 1, 7, 20, 30, http.StatusOK, "e-a"),
			readOp(2, 40, 50, "b", 7),
		}, porcupine.Ok},
		{"a held stale write lands on a blind write (today's ETag-less race)", []Op{
			seedOp("seed"),
			writeOp("stale", 0, 5, 0, 100, http.StatusOK, ""),
			writeOp("newer", 1, 7, 20, 30, http.StatusOK, ""),
			readOp(2, 110, 120, "stale", 5),
		}, porcupine.Illegal},
		{"a held stale delete lands on a blind write (today's ETag-less race)", []Op{
			seedOp("seed"),
			deleteOp("stale", 0, 5, 0, 100, http.StatusNoContent),
			writeOp("newer", 1, 7, 20, 30, http.StatusOK, ""),
			readOp(2, 110, 120, "", 0),
		}, porcupine.Illegal},
		{"a delete of a seed refused with 502", []Op{
			seedOp("seed"),
			deleteOp("a", 0, 5, 0, 10, http.StatusBadGateway),
			readOp(1, 20, 30, "seed", 0),
		}, porcupine.Ok},
		{"a seed deleted, then created again with a larger token", []Op{
			seedOp("seed"),
			deleteOp("a", 0, 5, 0, 10, http.StatusNoContent),
			readOp(1, 15, 18, "", 0),
			writeOp("b", 1, 7, 20, 30, http.StatusCreated, ""),
			readOp(2, 40, 50, "b", 7),
		}, porcupine.Ok},
		{"created again below the delete's token", []Op{
			seedOp("seed"),
			deleteOp("a", 0, 7, 0, 10, http.StatusNoContent),
			writeOp("b", 1, 5, 20, 30, http.StatusCreated, ""),
		}, porcupine.Illegal},
		{"the same race, both refused with 502", []Op{
			seedOp("seed"),
			writeOp("stale", 0, 5, 0, 100, http.StatusBadGateway, ""),
			writeOp("newer", 1, 7, 20, 30, http.StatusBadGateway, ""),
			readOp(2, 110, 120, "seed", 0),
		}, porcupine.Ok},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperationsTimeout(registerModel, porcupineOps(tc.ops), 10*time.Second); got != tc.want {
				t.Errorf("porcupine = %s; want %s", got, tc.want)
			}
		})
	}
}

// seededEvidence is the evidence of one seeded object "k" after ops, with
// S3's record writes, and final what versitygw holds at the end.
func seededEvidence(ops []Op, writes []StoreWrite, final ObjectState) Evidence {
	ev := Evidence{
		Ops: ops, Keys: []string{"k"}, Writes: writes,
		HWMEvents: map[string][]HWMEvent{}, FinalHWM: map[string]api.Token{},
		MemberHWM: map[string]map[string]api.Token{}, Final: map[string]ObjectState{"k": final},
	}
	// Each token's fence check raised the mark, in token order.
	var tokens []api.Token
	for _, w := range writes {
		tokens = append(tokens, w.Token)
	}
	slices.Sort(tokens)
	for i, token := range slices.Compact(tokens) {
		ev.HWMEvents["k"] = append(ev.HWMEvents["k"], HWMEvent{Revision: int64(i + 2), Token: token})
		ev.FinalHWM["k"] = token
	}
	return ev
}

func s3Write(seq int64, op string, token api.Token) StoreWrite {
	return StoreWrite{Seq: seq, Key: Bucket + "/k", Op: op, Token: token, Condition: "If-Match: ", Forwarded: true, Status: 200, Committed: true, ETag: "e-" + op}
}

func checkNames(res CheckResult) []string {
	var names []string
	for _, v := range res.Violations {
		if !slices.Contains(names, v.Check) {
			names = append(names, v.Check)
		}
	}
	slices.Sort(names)
	return names
}

func TestCheckSeededObjects(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   Evidence
		want []string
	}{
		{"a seed never written holds its body", seededEvidence(
			[]Op{seedOp("seed"), readOp(0, 0, 10, "seed", 0)}, nil,
			ObjectState{Exists: true, Op: "seed"},
		), nil},
		{"every write refused with 502, nothing sent", seededEvidence(
			[]Op{seedOp("seed"), writeOp("a", 0, 5, 0, 10, http.StatusBadGateway, ""), readOp(1, 20, 30, "seed", 0)}, nil,
			ObjectState{Exists: true, Op: "seed"},
		), nil},
		{"written over once, then as usual", seededEvidence(
			[]Op{seedOp("seed"), writeOp("a", 0, 5, 0, 10, http.StatusOK, ""), writeOp("b", 1, 7, 20, 30, http.StatusOK, "e-a"), readOp(2, 40, 50, "b", 7)},
			[]StoreWrite{s3Write(1, "a", 5), s3Write(2, "b", 7)},
			ObjectState{Exists: true, Op: "b", Token: 7},
		), nil},
		{"S3 holds something else than the seed", seededEvidence(
			[]Op{seedOp("seed")}, nil,
			ObjectState{Exists: true, Op: "other"},
		), []string{"final-state"}},
		{"a 502 on a seed that S3 committed", seededEvidence(
			[]Op{seedOp("seed"), writeOp("a", 0, 5, 0, 10, http.StatusBadGateway, ""), readOp(1, 20, 30, "a", 5)},
			[]StoreWrite{s3Write(1, "a", 5)},
			ObjectState{Exists: true, Op: "a", Token: 5},
		), []string{"linearizability"}},
		{"deleted, and S3 holds nothing", seededEvidence(
			[]Op{seedOp("seed"), deleteOp("a", 0, 5, 0, 10, http.StatusNoContent), readOp(1, 20, 30, "", 0)},
			[]StoreWrite{{Seq: 1, Key: Bucket + "/k", Deleted: true, Forwarded: true, Status: 204, Committed: true}},
			ObjectState{},
		), nil},
		{"deleted, yet S3 holds the seed", seededEvidence(
			[]Op{seedOp("seed"), deleteOp("a", 0, 5, 0, 10, http.StatusNoContent), readOp(1, 20, 30, "", 0)},
			[]StoreWrite{{Seq: 1, Key: Bucket + "/k", Deleted: true, Forwarded: true, Status: 204, Committed: true}},
			ObjectState{Exists: true, Op: "seed"},
		), []string{"final-state"}},
		{"a held stale write lands on a blind write (today's ETag-less race)", seededEvidence(
			[]Op{seedOp("seed"), writeOp("stale", 0, 5, 0, 100, http.StatusOK, ""), writeOp("newer", 1, 7, 20, 30, http.StatusOK, ""), readOp(2, 110, 120, "stale", 5)},
			[]StoreWrite{s3Write(1, "newer", 7), s3Write(2, "stale", 5)},
			ObjectState{Exists: true, Op: "stale", Token: 5},
		), []string{"acked-committed", "linearizability", "versions-monotonic"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkNames(Check(tc.ev, CheckConfig{ArtifactDir: t.TempDir(), LinearizabilityTimeout: 10 * time.Second}))
			if !slices.Equal(got, tc.want) {
				t.Errorf("checkers that failed: %v; want %v", got, tc.want)
			}
		})
	}
}

func TestShapeFiguresCountEtaglessRefusals(t *testing.T) {
	ops := []Op{
		seedOp("seed"),
		writeOp("refused", 0, 5, 0, 10, http.StatusBadGateway, ""),
		writeOp("s3-failed", 1, 6, 0, 10, http.StatusBadGateway, ""),
		writeOp("acked", 2, 7, 20, 30, http.StatusOK, ""),
	}
	ev := Evidence{Ops: ops, Writes: []StoreWrite{{Op: "s3-failed", Fault: "s3-error-before"}, s3Write(2, "acked", 7)}}
	got := shapeFigures(ev, 1, nil)
	if want := (ShapeFigures{Etagless: 1, EtaglessHeld: 1, EtaglessRefused: 1}); got != want {
		t.Errorf("shapeFigures = %+v; want %+v", got, want)
	}
}

// partnerOp builds a request with one attempt per status (0: no answer).
func partnerOp(id, account string, token api.Token, statuses ...int) PartnerOp {
	op := PartnerOp{ID: id, Account: account, Token: token, Implausible: token >= implausibleBase}
	for _, status := range statuses {
		a := PartnerAttempt{Gateway: "gateway-1", Status: status}
		switch status {
		case http.StatusConflict:
			a.ProblemType = api.ProblemTypePrefix + "stale-token"
		case http.StatusBadRequest:
			a.ProblemType = api.ProblemTypePrefix + "implausible-token"
		case http.StatusServiceUnavailable:
			a.ProblemType = api.ProblemTypePrefix + "resource-busy"
		case http.StatusUnprocessableEntity:
			a.ProblemType = api.ProblemTypePrefix + "idempotency-mismatch"
			a.Err = "unexpected answer 422"
		}
		op.Attempts = append(op.Attempts, a)
	}
	return op
}

func partnerCall(seq int64, account, request string, token api.Token) PartnerCall {
	return PartnerCall{Seq: seq, Account: account, Request: request, Token: token}
}

func TestCheckPartners(t *testing.T) {
	const big = implausibleBase + 17
	good := func() PartnerEvidence {
		return PartnerEvidence{
			Accounts: []string{"a1", "a2"},
			Ops: []PartnerOp{
				partnerOp("r1", "a1", 10, http.StatusCreated),
				partnerOp("r2", "a1", 12, 0, http.StatusCreated), // retried after no answer: a replay or the first forward
				partnerOp("r3", "a1", 11, http.StatusConflict),   // stale
				partnerOp("r4", "a2", 9, http.StatusServiceUnavailable),
				partnerOp("r5", "a2", big, http.StatusBadRequest), // implausible, refused
				partnerOp("r6", "a2", 13, http.StatusCreated),
			},
			Calls: []PartnerCall{
				partnerCall(1, "a1", "r1", 10),
				partnerCall(2, "a2", "r6", 13),
				partnerCall(3, "a1", "r2", 12),
			},
			HWM:       map[string]api.Token{"a1": 12, "a2": 13},
			HWMEvents: map[string][]HWMEvent{"a1": {{Revision: 11, Token: 10}, {Revision: 13, Token: 12}}, "a2": {{Revision: 14, Token: 13}}},
			Revision:  20,
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*PartnerEvidence)
		want   []string
	}{
		{"requests one at a time, tokens growing, refusals not forwarded", func(*PartnerEvidence) {}, nil},
		{"two requests for one account in progress at once", func(ev *PartnerEvidence) {
			ev.Calls[2].Overlapped, ev.Calls[2].OverlapWith = true, "r1"
		}, []string{"partner-exclusive"}},
		{"a smaller token after a larger one", func(ev *PartnerEvidence) {
			ev.Ops[2] = partnerOp("r3", "a1", 11, http.StatusCreated)
			ev.Calls = append(ev.Calls, partnerCall(4, "a1", "r3", 11))
		}, []string{"partner-tokens-monotonic"}},
		{"an implausible token forwarded and made the mark (today's partner routes)", func(ev *PartnerEvidence) {
			ev.Ops[4] = partnerOp("r5", "a2", big, http.StatusCreated)
			ev.Ops[5] = partnerOp("r6", "a2", 13, http.StatusConflict)
			ev.Calls = []PartnerCall{partnerCall(1, "a1", "r1", 10), partnerCall(2, "a2", "r5", big), partnerCall(3, "a1", "r2", 12)}
			ev.HWM["a2"] = big
			ev.HWMEvents["a2"] = []HWMEvent{{Revision: 14, Token: big}}
		}, []string{"partner-plausible"}},
		{"a mark raised by an implausible token that was not forwarded", func(ev *PartnerEvidence) {
			ev.HWMEvents["a2"] = append(ev.HWMEvents["a2"], HWMEvent{Revision: 15, Token: big})
			ev.HWM["a2"] = big
		}, []string{"partner-plausible"}},
		{"a retried request forwarded twice", func(ev *PartnerEvidence) {
			ev.Calls = append(ev.Calls, partnerCall(4, "a1", "r2", 12))
		}, []string{"partner-at-most-once"}},
		{"a request the workload never sent", func(ev *PartnerEvidence) {
			ev.Calls = append(ev.Calls, partnerCall(4, "a1", "", 12))
		}, []string{"partner-at-most-once"}},
		{"a stale refusal that was forwarded", func(ev *PartnerEvidence) {
			ev.Ops[2].Token = 12
			ev.Calls = append(ev.Calls, partnerCall(4, "a1", "r3", 12))
		}, []string{"partner-refused-not-forwarded"}},
		{"an acked request the partner never saw", func(ev *PartnerEvidence) {
			ev.Calls = ev.Calls[:2]
		}, []string{"partner-acked-forwarded"}},
		{"an answer the route never gives", func(ev *PartnerEvidence) {
			ev.Ops[3] = partnerOp("r4", "a2", 9, http.StatusUnprocessableEntity)
		}, []string{"partner-unexpected-answer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := good()
			tc.mutate(&ev)
			got := checkNames(CheckResult{Violations: checkPartners(ev)})
			if !slices.Equal(got, tc.want) {
				t.Errorf("checkers that failed: %v; want %v (violations: %v)", got, tc.want, checkPartners(ev))
			}
		})
	}
}

func TestPartnerOutcome(t *testing.T) {
	for _, tc := range []struct {
		status int
		typ    string
		want   Outcome
	}{
		{201, "", Acked},
		{200, "", Acked},
		{409, "stale-token", RefusedStale},
		{400, "implausible-token", Refused},
		{503, "fence-unavailable", Refused},
		{503, "resource-busy", Refused},
		{409, "idempotency-in-flight", Refused},
		{502, "upstream-error", Ambiguous},
		{504, "upstream-timeout", Ambiguous},
		{422, "idempotency-mismatch", Failed},
		{500, "internal", Failed},
	} {
		if got := partnerOutcome(tc.status, api.ProblemTypePrefix+tc.typ); got != tc.want {
			t.Errorf("partnerOutcome(%d, %q) = %s; want %s", tc.status, tc.typ, got, tc.want)
		}
	}
}

// TestPartnerServerRecordsOverlap: the partner records each call's
// account, token and request id, and flags a call that arrives while
// another for the same account is in progress, not one for another
// account.
func TestPartnerServerRecordsOverlap(t *testing.T) {
	p, err := NewPartnerServer(1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	gate := make(chan struct{})
	p.mu.Lock()
	p.gate = gate
	p.mu.Unlock()
	var wg sync.WaitGroup
	send := func(account, request string, token api.Token) {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, p.URL()+"/accounts/"+account+"/charges", strings.NewReader("req="+request+" more\n"))
			req.Header.Set(api.HeaderFenceToken, token.String())
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("request %s: %v", request, err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Errorf("request %s: %s; want 201", request, resp.Status)
			}
		})
		for deadline := time.Now().Add(10 * time.Second); len(p.Calls("")) == 0 || p.Calls("")[len(p.Calls(""))-1].Request != request; {
			if time.Now().After(deadline) {
				t.Fatalf("request %s never reached the partner", request)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	send("a1", "r1", 5)
	send("a2", "r2", 6)
	send("a1", "r3", 7)
	close(gate)
	wg.Wait()
	send("a1", "r4", 8) // after the others are done

	want := []PartnerCall{
		{Seq: 1, Account: "a1", Token: 5, Request: "r1"},
		{Seq: 2, Account: "a2", Token: 6, Request: "r2"},
		{Seq: 3, Account: "a1", Token: 7, Request: "r3", Overlapped: true, OverlapWith: "r1"},
		{Seq: 4, Account: "a1", Token: 8, Request: "r4"},
	}
	wg.Wait()
	got := p.Calls("")
	for i := range got {
		got[i].Start, got[i].Done = time.Time{}, time.Time{}
	}
	if !slices.Equal(got, want) {
		t.Errorf("calls:\n%+v\nwant\n%+v", got, want)
	}
	if n := len(p.Calls("a2")); n != 1 {
		t.Errorf("Calls(a2) has %d calls; want 1", n)
	}
}

// TestPauseControllerArmResource: a controller armed for one resource
// holds the next write to it, and answers writes to other resources at
// once; the hold is used up.
func TestPauseControllerArmResource(t *testing.T) {
	c, err := NewPauseController(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	holding, goOn := make(chan api.Token, 1), make(chan struct{})
	c.ArmResource("s3/b/k", func(_ api.Resource, token api.Token, _ <-chan struct{}) {
		holding <- token
		<-goOn
	})
	ask := func(line string) <-chan string {
		answer := make(chan string, 1)
		go func() {
			conn, err := net.Dial("tcp", c.Addr())
			if err != nil {
				answer <- err.Error()
				return
			}
			defer conn.Close()
			_, _ = conn.Write([]byte(line + "\n"))
			got, _ := bufio.NewReader(conn).ReadString('\n')
			answer <- got
		}()
		return answer
	}
	if got := <-ask("after-fence 4 s3/b/other"); got != "go\n" {
		t.Fatalf("a write to another resource got %q; want go at once", got)
	}
	held := ask("after-fence 5 s3/b/k")
	if token := <-holding; token != 5 {
		t.Fatalf("held token %d; want 5", token)
	}
	select {
	case got := <-held:
		t.Fatalf("the held write got %q before its hold ended", got)
	default:
	}
	close(goOn)
	if got := <-held; got != "go\n" {
		t.Fatalf("the held write got %q; want go", got)
	}
	if got := <-ask("after-fence 6 s3/b/k"); got != "go\n" || c.Held() != 1 {
		t.Fatalf("the next write to the resource got %q (held %d); want go at once, one hold in all", got, c.Held())
	}
}

func TestWorkloadShapesPerHistory(t *testing.T) {
	off := DefaultWorkload.forHistory(rand.New(rand.NewPCG(1, 2)))
	if off.EtaglessObjects != 0 || off.PartnerClients != 0 {
		t.Errorf("DefaultWorkload has shapes on: %+v", off)
	}
	var etagless, partners int
	for seed := range uint64(200) {
		cfg := DefaultWorkload.WithShapes(true, true).forHistory(rand.New(rand.NewPCG(seed, 0x5ba9e)))
		if cfg.EtaglessObjects > 0 {
			etagless++
		}
		if cfg.PartnerClients > 0 {
			partners++
		}
	}
	if etagless < 60 || etagless > 140 || partners < 60 || partners > 140 {
		t.Errorf("of 200 histories, %d have ETag-less objects and %d partner clients; want about half each", etagless, partners)
	}
}

func TestSummarizeLeavesSeedsOut(t *testing.T) {
	got := Summarize([]Op{seedOp("seed"), writeOp("a", 0, 5, 0, 10, http.StatusOK, ""), readOp(1, 20, 30, "a", 5)})
	if got.Ops != 2 || got.Writes != 1 || got.Acked != 1 || got.Reads != 1 {
		t.Errorf("Summarize = %+v; want 2 ops: 1 acked write, 1 read", got)
	}
}
