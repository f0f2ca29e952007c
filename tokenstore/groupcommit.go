package tokenstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	// groupCommitInFlight is how many group-commit transactions may be in
	// flight at once. A fence check that finds them all busy queues and
	// goes with the next one, together with every other that queued.
	groupCommitInFlight = 4
	// groupCommitBatchMax is the most fence checks one transaction
	// carries. etcd refuses a transaction with more than --max-txn-ops
	// operations (default 128), and counts them level by level
	// (server/etcdserver/api/v3rpc/key.go, checkTxnRequest): a level
	// counts the largest of its compares, its Then ops and its Else ops,
	// and each nested transaction is checked the same way against what
	// its parents left. A batch of n checks is one level of n nested
	// transactions, each one compare and one op per branch (a fence op),
	// or three such levels deep (heldTxn around a fence op): it needs
	// n + 3 <= --max-txn-ops at worst (the fence op is checked against
	// what n and two held levels left). 64, as the confirmer's batches,
	// works with any --max-txn-ops from 67 up; a test sends a full batch
	// of held checks to an etcd with the default.
	groupCommitBatchMax = 64
)

// groupCommitter sends the fence checks that must write (raise a mark or
// create it), several in one etcd transaction when they come in faster
// than etcd answers them. Each check brings its own transaction, nested
// whole in the batch's, with its own compares and branches:
//
//	Txn().Then(
//	    Txn(If(Value(hwm1) > t1) Then(Get(hwm1)) Else(Put(hwm1, t1))),
//	    Txn(If(Value(hwm2) > t2) Then(Get(hwm2)) Else(Put(hwm2, t2))),
//	    ...)
//
// and gets back its own response: exactly what its transaction alone
// would have answered had it run at the batch's revision, for three
// reasons. etcd evaluates every compare of a transaction, nested ones
// included, against the store as it was before the transaction, and only
// then runs the chosen branches (server/etcdserver/txn/txn.go,
// compareToPath). No two checks of a batch write the same key: the queue
// holds at most one check per high-water mark (see below; etcd would
// refuse two puts of one key anyway), and a check under CheckHeld only
// reads its lock's queue. So no check of a batch reads what another
// writes, and the batch is the checks run one after the other at one
// revision, in any order. And that revision is applied after every check
// of the batch began (it was queued or sending) and before any returns:
// each check takes effect at a point within its own call, which is what
// linearizability asks.
//
// A check of a mark that a queued check already writes does not queue:
// it sends its own transaction at once, as every check did before group
// commit, whatever the number in flight. Its transaction and the queued
// check's batch are two etcd transactions, each applied at one revision
// between its checks' start and end, in whichever order etcd applies
// them; both checks are running, so either order is a valid
// linearization, and each answer is its own transaction's. This keeps one
// hot mark from being served one batch at a time: were the second check
// to wait for the next batch, the checks of one mark would go one per
// batch, groupCommitInFlight batches at a time, where without group
// commit they all go to etcd at once, and under a burst of them they
// would wait past their deadline. Checks of distinct marks still share
// batches; merging the checks of one mark into one nested transaction
// would save etcd work on a hot mark, but answer several accepted checks
// with a single write of the mark.
//
// While fewer than groupCommitInFlight transactions are in flight, a check
// sends its own at once, so a lone writer waits for nothing; otherwise it
// queues, and the transaction that ends first sends the queue as the next
// one. Like the confirmer (confirm.go), whose shape this is, a batch runs
// under a context of its own, bounded by timeout, so that no one request's
// cancellation ends it for the others; a queued check whose request ends
// stops waiting and gets an error, its outcome unknown.
type groupCommitter struct {
	client  *clientv3.Client
	timeout time.Duration // of the transactions that serve a queue
	// observe is Config.ObserveFenceBatch: nil, or called with each
	// transaction's number of checks.
	observe func(size int)

	mu       sync.Mutex
	inFlight int
	queue    []*groupWrite
	// queuedMarks holds the marks of the checks in queue, abandoned ones
	// included until takeBatch drops them: one check per mark at most.
	queuedMarks map[string]struct{}

	// transactions counts the transactions sent, for tests and the bench.
	transactions atomic.Int64
}

// groupWrite is one fence check's transaction and, once done is closed,
// its answer.
type groupWrite struct {
	// key is the high-water mark that op may write; op is the check's
	// transaction (an OpTxn).
	key string
	op  clientv3.Op
	// abandoned is set when the check stopped waiting: a batch not yet
	// sent leaves it out.
	abandoned atomic.Bool
	done      chan struct{}
	// resp is op's response and revision the batch's revision, when err
	// is nil; err is the batch's failure, when its outcome is unknown.
	resp     *etcdserverpb.TxnResponse
	revision int64
	err      error
}

func newGroupCommitter(client *clientv3.Client, timeout time.Duration, observe func(size int)) *groupCommitter {
	return &groupCommitter{client: client, timeout: timeout, observe: observe, queuedMarks: make(map[string]struct{})}
}

// commit runs op, a transaction (clientv3.OpTxn) that writes no key other
// than key, alone or in a batch, and returns its response and etcd's
// revision. An error means the outcome is unknown: etcd failed or did not
// answer in time, or ctx ended first; op may or may not have been applied.
func (g *groupCommitter) commit(ctx context.Context, key string, op clientv3.Op) (*etcdserverpb.TxnResponse, int64, error) {
	w := &groupWrite{key: key, op: op, done: make(chan struct{})}
	g.mu.Lock()
	if g.inFlight < groupCommitInFlight {
		g.inFlight++
		g.mu.Unlock()
		g.send(ctx, []*groupWrite{w}) // its own batch: its own ctx
		g.next()
		return w.resp, w.revision, w.err
	}
	if _, dup := g.queuedMarks[key]; dup {
		// A queued check writes this mark: a batch may not carry both.
		// Its own transaction at once, outside the slots (see
		// groupCommitter).
		g.mu.Unlock()
		g.send(ctx, []*groupWrite{w})
		return w.resp, w.revision, w.err
	}
	g.queue = append(g.queue, w)
	g.queuedMarks[key] = struct{}{}
	g.mu.Unlock()
	select {
	case <-w.done:
		return w.resp, w.revision, w.err
	case <-ctx.Done():
		// The batch goes on without this check, or leaves it out if not
		// yet sent; either way its caller must take the outcome as
		// unknown.
		w.abandoned.Store(true)
		return nil, 0, fmt.Errorf("waiting for a group commit: %w", ctx.Err())
	}
}

// next is called when a transaction has ended: it sends the queue, from a
// goroutine of its own so that the caller returns, or frees the slot.
func (g *groupCommitter) next() {
	g.mu.Lock()
	batch := g.takeBatch()
	if len(batch) == 0 {
		g.inFlight--
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	go func() {
		// The transaction serves every check of the batch, so no one
		// request's cancellation may end it.
		ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
		g.send(ctx, batch)
		cancel()
		g.next()
	}()
}

// takeBatch takes from the queue, in order, up to groupCommitBatchMax
// checks, of distinct marks since the queue holds one check per mark; the
// rest stay queued, in order, for the next batch. Abandoned checks are
// dropped. The caller holds g.mu.
func (g *groupCommitter) takeBatch() []*groupWrite {
	var batch []*groupWrite
	taken := 0
	for _, w := range g.queue {
		if len(batch) == groupCommitBatchMax {
			break
		}
		taken++
		delete(g.queuedMarks, w.key)
		if !w.abandoned.Load() {
			batch = append(batch, w)
		}
	}
	if taken == len(g.queue) {
		g.queue = nil // let the old array go
	} else {
		clear(g.queue[:taken]) // the array stays: let the taken go
		g.queue = g.queue[taken:]
	}
	return batch
}

// send runs every check of batch in one transaction and completes them.
// A check alone is sent as its own transaction, not nested: what it was
// before group commit, and less for etcd to check and apply. The batch's
// size is observed (Config.ObserveFenceBatch) as it is sent.
func (g *groupCommitter) send(ctx context.Context, batch []*groupWrite) {
	g.transactions.Add(1)
	if g.observe != nil {
		g.observe(len(batch))
	}
	if len(batch) == 1 {
		w := batch[0]
		cmps, then, els := w.op.Txn()
		resp, err := g.client.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
		if err != nil {
			w.err = err
		} else {
			w.resp, w.revision = (*etcdserverpb.TxnResponse)(resp), resp.Header.Revision
		}
		close(w.done)
		return
	}
	ops := make([]clientv3.Op, len(batch))
	for i, w := range batch {
		ops[i] = w.op
	}
	resp, err := g.client.Txn(ctx).Then(ops...).Commit()
	if err == nil && len(resp.Responses) != len(batch) {
		err = fmt.Errorf("group commit of %d checks: etcd answered %d responses", len(batch), len(resp.Responses))
	}
	for i, w := range batch {
		switch {
		case err != nil:
			w.err = err
		case resp.Responses[i].GetResponseTxn() == nil:
			w.err = fmt.Errorf("group commit: etcd answered no transaction response for %s", w.key)
		default:
			w.resp = resp.Responses[i].GetResponseTxn()
			w.revision = resp.Header.Revision
		}
		close(w.done)
	}
}
