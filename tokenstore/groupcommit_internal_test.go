package tokenstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
	"fencegate/internal/testenv"
)

// fenceCall is one fence check of a test: a resource and a token.
type fenceCall struct {
	resource api.Resource
	token    api.Token
}

// fenceAnswer is what a fence check answered: accepted, or stale with
// the mark it found.
type fenceAnswer struct {
	stale bool
	hwm   api.Token
}

func (a fenceAnswer) String() string {
	if a.stale {
		return fmt.Sprintf("stale (mark %d)", a.hwm)
	}
	return "accepted"
}

// TestGroupCommitAnswersAsOneTransactionEach starts fence checks
// (equal, larger and smaller tokens, missing marks, one mark several
// times) while every group-commit slot is busy, each once the one before
// has queued or, for a mark already queued, is sending its own
// transaction; then it lets the queue go. The checks of distinct marks go
// out in one batch. The calls are concurrent, so linearizability asks
// that the answers, and every mark afterwards, be those of one
// transaction per check run one after the other in some order that puts
// each call that returned before another began ahead of it: the test
// looks for such an order among all of them (a few calls, a few hundred
// orders). It runs the fence check's transaction in memory (a mark above
// the token refuses it, with the mark; otherwise the token becomes the
// mark), which the queue order checks against etcd: there it runs as one
// transaction each, sent directly on the client, on marks seeded alike
// under another prefix.
func TestGroupCommitAnswersAsOneTransactionEach(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	cases := []struct {
		name  string
		marks map[api.Resource]api.Token // seeded in etcd, unknown to the cache
		calls []fenceCall
		// transactions is how many the checks take: one batch, and one
		// of its own for each check of a mark already queued.
		transactions int64
	}{
		{"missing mark", nil, []fenceCall{{"a", 5}}, 1},
		{"equal token", map[api.Resource]api.Token{"a": 5}, []fenceCall{{"a", 5}}, 1},
		{"larger token", map[api.Resource]api.Token{"a": 5}, []fenceCall{{"a", 6}}, 1},
		{"smaller token", map[api.Resource]api.Token{"a": 5}, []fenceCall{{"a", 4}}, 1},
		{"distinct marks, every kind", map[api.Resource]api.Token{"a": 5, "b": 5, "c": 5},
			[]fenceCall{{"a", 4}, {"b", 5}, {"c", 6}, {"d", 1}}, 1},
		{"same mark, larger then smaller", map[api.Resource]api.Token{"a": 5},
			[]fenceCall{{"a", 7}, {"a", 6}}, 2},
		{"same mark, smaller then larger", map[api.Resource]api.Token{"a": 5},
			[]fenceCall{{"a", 6}, {"a", 7}}, 2},
		{"same mark, equal tokens", map[api.Resource]api.Token{"a": 5},
			[]fenceCall{{"a", 6}, {"a", 6}}, 2},
		{"same mark, both stale", map[api.Resource]api.Token{"a": 9},
			[]fenceCall{{"a", 6}, {"a", 7}}, 2},
		{"same missing mark twice", nil, []fenceCall{{"a", 3}, {"a", 2}}, 2},
		{"same mark three times among others", map[api.Resource]api.Token{"a": 5, "b": 5},
			[]fenceCall{{"a", 8}, {"b", 4}, {"a", 6}, {"a", 9}, {"c", 1}, {"b", 6}}, 4},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			batched := newTestStore(t, client, fmt.Sprintf("batched%d/", i), nil)
			sequential := fmt.Sprintf("sequential%d/hwm/", i)
			for r, token := range tc.marks {
				mustPutMark(t, client, batched.hwmKey(r), token)
				mustPutMark(t, client, sequential+string(r), token)
			}

			// The model is etcd's fence check: the queue order, as one
			// transaction each, answers alike in both.
			queueOrder := make([]int, len(tc.calls))
			for j := range queueOrder {
				queueOrder[j] = j
			}
			model, _ := runSequentially(tc.marks, tc.calls, queueOrder)
			for j, c := range tc.calls {
				if got := oneTransaction(t, client, sequential+string(c.resource), c.token); got != model[j] {
					t.Fatalf("check %d: FenceCheck(%s, %d) as one transaction = %v; the model gives %v", j, c.resource, c.token, got, model[j])
				}
			}

			holdSlots(t, batched.raises)
			times := &callTimes{}
			answerErrs := startFenceChecks(t, batched, tc.calls, times)
			batched.raises.next() // a transaction ended: the queue goes
			answers := make([]fenceAnswer, len(tc.calls))
			for j := range tc.calls {
				answers[j] = fenceAnswerOf(t, <-answerErrs[j])
			}
			marks := make(map[api.Resource]api.Token)
			for _, c := range tc.calls {
				marks[c.resource] = readMark(t, client, batched.hwmKey(c.resource))
			}
			if order, ok := linearization(tc.marks, tc.calls, times, answers, marks); ok {
				t.Logf("answers %v, marks %v: the checks one after the other in the order %v", answers, marks, order)
			} else {
				t.Errorf("answers %v and marks %v: no order of the calls %v, one transaction each, that keeps real-time order (began %v, returned %v) gives them", answers, marks, tc.calls, times.began, times.returned)
			}
			if n := batched.raises.transactions.Load(); n != tc.transactions {
				t.Errorf("%d checks went in %d transactions; want %d", len(tc.calls), n, tc.transactions)
			}
		})
	}
}

// TestGroupCommitQueuedMarkSendsAlone: a check of a mark that a queued
// check already writes does not wait for the queue to go (the slots stay
// busy here until it has answered): it sends a transaction of its own at
// once. The queued check, sent afterwards, then answers from the mark the
// other wrote. Distinct marks still queue, and go in one batch.
func TestGroupCommitQueuedMarkSendsAlone(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	s := newTestStore(t, client, "alone/", nil)
	ctx := context.Background()
	holdSlots(t, s.raises)
	queued := queueFenceChecks(t, s, []fenceCall{{"a", 5}, {"b", 1}})
	if err := s.FenceCheck(ctx, "a", 6); err != nil {
		t.Fatalf("FenceCheck(a, 6) while a check of a is queued and the slots are busy = %v; want accepted at once", err)
	}
	var stale *api.StaleTokenError
	if err := s.FenceCheck(ctx, "a", 4); !errors.As(err, &stale) || stale.HighWaterMark != 6 {
		t.Fatalf("FenceCheck(a, 4) after 6 = %v; want stale with mark 6", err)
	}
	if n := s.raises.queued(); n != 2 {
		t.Errorf("%d checks queued after the checks of a queued mark answered; want the 2 queued before", n)
	}
	s.raises.next()
	if err := <-queued[0]; !errors.As(err, &stale) || stale.HighWaterMark != 6 {
		t.Errorf("the queued FenceCheck(a, 5), sent after a raise to 6 = %v; want stale with mark 6", err)
	}
	if err := <-queued[1]; err != nil {
		t.Errorf("the queued FenceCheck(b, 1) = %v; want accepted", err)
	}
	if hwm := readMark(t, client, s.hwmKey("a")); hwm != 6 {
		t.Errorf("mark of a = %d; want 6", hwm)
	}
	if n := s.raises.transactions.Load(); n != 3 {
		t.Errorf("two checks of a queued mark and one batch took %d transactions; want 3", n)
	}
}

// TestGroupCommitCarriesHeldChecks: checks under CheckHeld (heldTxn
// nesting the fence op) share a batch with each other, for one lock, and
// with plain checks, and each gets its own answer: the holder's token is
// accepted, others are refused as not held and raise nothing. A full
// batch of held checks (the deepest nesting) passes etcd's default
// --max-txn-ops, and a longer queue is split.
func TestGroupCommitCarriesHeldChecks(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	ctx := context.Background()
	s := newTestStore(t, client, "held/", []Policy{{Prefix: "s3/held/", Check: CheckHeld, Lock: "report"}})
	session, err := s.CreateSession(ctx, 60, "")
	if err != nil {
		t.Fatal(err)
	}
	owner := ""
	grant, err := s.Acquire(ctx, "report", session.ID, &owner, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	holder := grant.Token

	holdSlots(t, s.raises)
	calls := []fenceCall{
		{"s3/held/one", holder},
		{"s3/held/two", holder},
		{"s3/held/below", holder - 1},
		{"s3/held/above", holder + 1},
		{"s3/open/plain", 1},
		{"s3/held/one", holder}, // a queued mark: its own transaction
	}
	answers := queueFenceChecks(t, s, calls)
	s.raises.next()
	for j, c := range calls {
		err := <-answers[j]
		var notHeld *api.LockNotHeldError
		switch {
		case c.token == holder || c.resource == "s3/open/plain":
			if err != nil {
				t.Errorf("FenceCheck(%s, %d) = %v; want accepted", c.resource, c.token, err)
			}
		case !errors.As(err, &notHeld) || !notHeld.Held:
			t.Errorf("FenceCheck(%s, %d) = %v; want not held (held by another token)", c.resource, c.token, err)
		}
	}
	if n := s.raises.transactions.Load(); n != 2 {
		t.Errorf("%d checks with one mark twice went in %d transactions; want 2 (a batch, and the second check of the mark alone)", len(calls), n)
	}
	for _, r := range []api.Resource{"s3/held/below", "s3/held/above"} {
		if hwm := readMark(t, client, s.hwmKey(r)); hwm != 0 {
			t.Errorf("mark of %s = %d after a refused check; want none", r, hwm)
		}
	}

	full := make([]fenceCall, groupCommitBatchMax+1)
	for j := range full {
		full[j] = fenceCall{api.Resource(fmt.Sprintf("s3/held/full-%d", j)), holder}
	}
	s.raises.transactions.Store(0)
	holdSlots(t, s.raises)
	answers = queueFenceChecks(t, s, full)
	s.raises.next()
	for j, c := range full {
		if err := <-answers[j]; err != nil {
			t.Fatalf("check %d of a full batch of held checks: FenceCheck(%s) = %v", j, c.resource, err)
		}
	}
	if n := s.raises.transactions.Load(); n != 2 {
		t.Errorf("%d queued checks went in %d transactions; want 2 (at most %d each)", len(full), n, groupCommitBatchMax)
	}
}

// TestGroupCommitEtcdDown: a batch whose outcome is unknown (etcd does
// not answer) answers every check of it unavailable, never accepted; so
// does the check of a queued mark that went alone.
func TestGroupCommitEtcdDown(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newTestStore(t, etcd.Client(t), "down/", nil)
	ctx := context.Background()
	if err := s.FenceCheck(ctx, "a", 5); err != nil {
		t.Fatal(err)
	}
	// The batch gives up long before its checks' own requests would; the
	// check that goes alone gives up at its request's end.
	s.raises.timeout = 300 * time.Millisecond
	s.timeout = 3 * time.Second
	etcd.Stop(t)
	holdSlots(t, s.raises)
	calls := []fenceCall{{"a", 4}, {"a", 6}, {"b", 1}, {"c", 7}}
	answers := queueFenceChecks(t, s, calls)
	if n := s.raises.queued(); n != 3 {
		t.Errorf("%d checks queued; want 3, the second of a alone", n)
	}
	s.raises.next()
	for j, c := range calls {
		if err := <-answers[j]; !errors.Is(err, api.ErrUnavailable) || !strings.Contains(err.Error(), "deadline exceeded") {
			t.Errorf("FenceCheck(%s, %d) etcd never answered = %v; want unavailable (a deadline)", c.resource, c.token, err)
		}
	}
}

// TestGroupCommitNoSpace: under etcd's NOSPACE alarm the whole batch is
// refused (it writes), and each check is answered as FenceCheck answers
// one alone: a token below its mark is still refused as stale, any other
// is unavailable, saying etcd is out of space.
func TestGroupCommitNoSpace(t *testing.T) {
	etcd := testenv.StartEtcdWithQuota(t, 1<<20)
	client := etcd.Client(t)
	s := newTestStore(t, client, "nospace/", nil)
	ctx := context.Background()
	for _, r := range []api.Resource{"a", "b"} {
		if err := s.FenceCheck(ctx, r, 5); err != nil {
			t.Fatal(err)
		}
	}
	testenv.FillUntilNoSpace(t, client)
	holdSlots(t, s.raises)
	calls := []fenceCall{{"a", 4}, {"b", 6}, {"c", 1}}
	answers := queueFenceChecks(t, s, calls)
	s.raises.next()
	var stale *api.StaleTokenError
	if err := <-answers[0]; !errors.As(err, &stale) || stale.HighWaterMark != 5 {
		t.Errorf("FenceCheck(a, 4) under NOSPACE = %v; want stale with mark 5", err)
	}
	for j := 1; j < len(calls); j++ {
		if err := <-answers[j]; !errors.Is(err, api.ErrUnavailable) || !errors.Is(err, api.ErrNoSpace) {
			t.Errorf("FenceCheck(%s, %d) under NOSPACE = %v; want unavailable, out of space", calls[j].resource, calls[j].token, err)
		}
	}
	testenv.RecoverFromNoSpace(t, client, etcd.Endpoints())
}

// TestGroupCommitCancelledMember: a check whose request ends while it
// waits answers unavailable at once, and the others of its batch are
// answered all the same, whether it left before the batch was sent (it
// is left out, its mark untouched) or after.
func TestGroupCommitCancelledMember(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	s := newTestStore(t, client, "cancel/", nil)

	// Leaves before the batch is sent.
	holdSlots(t, s.raises)
	leaving, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() { left <- s.FenceCheck(leaving, "leaves", 3) }()
	testenv.WaitUntil(t, 10*time.Second, "the leaving check is queued", func() bool { return s.raises.queued() == 1 })
	stays := queueFenceChecks(t, s, []fenceCall{{"stays", 3}, {"other", 2}})
	cancel()
	if err := <-left; !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("a queued FenceCheck whose request ended = %v; want unavailable", err)
	}
	s.raises.next()
	for j, ch := range stays {
		if err := <-ch; err != nil {
			t.Errorf("check %d of the batch the cancelled one left = %v; want accepted", j, err)
		}
	}
	if hwm := readMark(t, client, s.hwmKey("leaves")); hwm != 0 {
		t.Errorf("mark of the check that left before its batch was sent = %d; want none", hwm)
	}

	// Leaves once the batch has been taken to be sent.
	holdSlots(t, s.raises)
	leaving, cancel = context.WithCancel(context.Background())
	go func() { left <- s.FenceCheck(leaving, "leaves-late", 3) }()
	testenv.WaitUntil(t, 10*time.Second, "the leaving check is queued", func() bool { return s.raises.queued() == 1 })
	stays = queueFenceChecks(t, s, []fenceCall{{"stays-late", 3}})
	s.raises.next()
	cancel()
	if err := <-stays[0]; err != nil {
		t.Errorf("the check sharing a batch with a cancelled one = %v; want accepted", err)
	}
	if err := <-left; err != nil && !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("the cancelled check = %v; want accepted or unavailable", err)
	}
}

// newTestStore returns a store with group commit, keys under prefix, and
// a request timeout long enough for checks to wait in a queue.
func newTestStore(tb testing.TB, client *clientv3.Client, prefix string, ps []Policy) *Store {
	tb.Helper()
	s, err := New(client, Config{Prefix: prefix, RequestTimeout: 10 * time.Second, Policies: ps})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// queueFenceChecks starts s.FenceCheck for each call, in order, each
// once the one before is queued or, for a mark already queued, sending
// its own transaction, and returns where each will answer. Every
// group-commit slot of s must be busy.
func queueFenceChecks(tb testing.TB, s *Store, calls []fenceCall) []chan error {
	tb.Helper()
	return startFenceChecks(tb, s, calls, nil)
}

// callTimes records when each call of a test began and returned, on a
// clock that counts these events.
type callTimes struct {
	clock           atomic.Int64
	began, returned []int64
}

// startFenceChecks is queueFenceChecks, recording in times, if not nil,
// when each call began and returned; they may be read once it answered.
func startFenceChecks(tb testing.TB, s *Store, calls []fenceCall, times *callTimes) []chan error {
	tb.Helper()
	answers := make([]chan error, len(calls))
	if times != nil {
		times.began, times.returned = make([]int64, len(calls)), make([]int64, len(calls))
	}
	started := func() int { return s.raises.queued() + int(s.raises.transactions.Load()) }
	start := started()
	for j, c := range calls {
		answers[j] = make(chan error, 1)
		go func() {
			if times != nil {
				times.began[j] = times.clock.Add(1)
			}
			err := s.FenceCheck(context.Background(), c.resource, c.token)
			if times != nil {
				times.returned[j] = times.clock.Add(1)
			}
			answers[j] <- err
		}()
		testenv.WaitUntil(tb, 10*time.Second, "the check is queued or sent", func() bool { return started() == start+j+1 })
	}
	return answers
}

// runSequentially runs calls in order, one after the other, as the fence
// check's transaction would, from marks (absent means no mark; marks is
// not changed), and returns their answers and the marks afterwards.
func runSequentially(marks map[api.Resource]api.Token, calls []fenceCall, order []int) ([]fenceAnswer, map[api.Resource]api.Token) {
	now := maps.Clone(marks)
	if now == nil {
		now = make(map[api.Resource]api.Token)
	}
	answers := make([]fenceAnswer, len(calls))
	for _, j := range order {
		c := calls[j]
		if hwm, ok := now[c.resource]; ok && hwm > c.token {
			answers[j] = fenceAnswer{stale: true, hwm: hwm}
			continue
		}
		now[c.resource] = c.token
	}
	return answers, now
}

// linearization looks for an order of calls that puts each call that
// returned before another began ahead of it and that, run one after the
// other from marks (runSequentially), gives answers and leaves after (0
// for no mark). It returns the first it finds.
func linearization(marks map[api.Resource]api.Token, calls []fenceCall, times *callTimes, answers []fenceAnswer, after map[api.Resource]api.Token) ([]int, bool) {
	order := make([]int, 0, len(calls))
	used := make([]bool, len(calls))
	var try func() bool
	try = func() bool {
		if len(order) == len(calls) {
			got, now := runSequentially(marks, calls, order)
			if !slices.Equal(got, answers) {
				return false
			}
			for r, hwm := range after {
				if now[r] != hwm {
					return false
				}
			}
			return true
		}
		for j := range calls {
			if used[j] {
				continue
			}
			// j may come next unless a call not yet placed returned
			// before j began.
			ok := true
			for k := range calls {
				if !used[k] && k != j && times.returned[k] < times.began[j] {
					ok = false
				}
			}
			if !ok {
				continue
			}
			used[j] = true
			order = append(order, j)
			if try() {
				return true
			}
			order = order[:len(order)-1]
			used[j] = false
		}
		return false
	}
	return order, try()
}

// oneTransaction runs the fence check's transaction alone on key, and
// returns its answer.
func oneTransaction(tb testing.TB, client *clientv3.Client, key string, token api.Token) fenceAnswer {
	tb.Helper()
	value := encodeToken(token)
	resp, err := client.Txn(context.Background()).
		If(clientv3.Compare(clientv3.Value(key), ">", value)).
		Then(clientv3.OpGet(key)).
		Else(clientv3.OpPut(key, value)).
		Commit()
	if err != nil {
		tb.Fatal(err)
	}
	if !resp.Succeeded {
		return fenceAnswer{}
	}
	hwm, err := decodeToken(resp.Responses[0].GetResponseRange().GetKvs()[0].Value)
	if err != nil {
		tb.Fatal(err)
	}
	return fenceAnswer{stale: true, hwm: hwm}
}

// fenceAnswerOf reads FenceCheck's error as an answer, failing the test
// on any error other than a refusal as stale.
func fenceAnswerOf(tb testing.TB, err error) fenceAnswer {
	tb.Helper()
	var stale *api.StaleTokenError
	switch {
	case err == nil:
		return fenceAnswer{}
	case errors.As(err, &stale):
		return fenceAnswer{stale: true, hwm: stale.HighWaterMark}
	}
	tb.Fatalf("FenceCheck = %v; want accepted or stale", err)
	return fenceAnswer{}
}

func mustPutMark(tb testing.TB, client *clientv3.Client, key string, token api.Token) {
	tb.Helper()
	if _, err := client.Put(context.Background(), key, encodeToken(token)); err != nil {
		tb.Fatal(err)
	}
}

// readMark reads the mark at key; 0 when there is none.
func readMark(tb testing.TB, client *clientv3.Client, key string) api.Token {
	tb.Helper()
	resp, err := client.Get(context.Background(), key)
	if err != nil {
		tb.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0
	}
	hwm, err := decodeToken(resp.Kvs[0].Value)
	if err != nil {
		tb.Fatal(err)
	}
	return hwm
}

// holdSlots marks every group-commit slot of g busy, as if that many
// transactions were in flight, so that fence checks queue; a test then
// calls g.next() once, as the end of one of them, to send the queue. It
// first waits for the batches of an earlier g.next() to end: in between,
// one slot stays taken.
func holdSlots(tb testing.TB, g *groupCommitter) {
	tb.Helper()
	testenv.WaitUntil(tb, 10*time.Second, "earlier batches end", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.inFlight == groupCommitInFlight {
			return false
		}
		g.inFlight = groupCommitInFlight
		return true
	})
}

// queued returns how many fence checks wait for a group commit.
func (g *groupCommitter) queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}
