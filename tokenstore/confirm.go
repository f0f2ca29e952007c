package tokenstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	// confirmInFlight is how many confirmation transactions may be in
	// flight at once. A confirmation that finds them all busy waits and
	// goes with the next one, together with every other that waited.
	confirmInFlight = 2
	// confirmBatchMax is the most marks one transaction reads; etcd's
	// default --max-txn-ops is 128.
	confirmBatchMax = 64
)

// confirmer reads high-water marks for confirmMark, several in one
// read-only transaction when confirmations come in faster than etcd
// answers them:
//
//	Txn().Then(Get(hwm1), Get(hwm2), ...)
//
// etcd serves a read-only transaction as one linearizable read, so each
// mark is read at a point after every confirmation of the batch began:
// what a transaction of its own would have read. While fewer than
// confirmInFlight transactions are in flight, a confirmation sends its
// own at once (a lone writer waits for nothing); otherwise it queues, and
// the transaction that ends first sends the queue as the next one, bounded
// by timeout. A queued confirmation whose request ends stops waiting, so
// a fence check never waits longer than its own context allows.
type confirmer struct {
	client  *clientv3.Client
	timeout time.Duration // of the transactions that serve a queue

	mu       sync.Mutex
	inFlight int
	queue    []*confirmation

	// transactions counts the transactions sent, for tests.
	transactions atomic.Int64
}

// confirmation is one mark to read and, once done is closed, what was
// read.
type confirmation struct {
	key, value string
	done       chan struct{}
	// equal is true when the mark was value; revision is etcd's revision
	// of the read (0 when the transaction failed).
	equal    bool
	revision int64
}

func newConfirmer(client *clientv3.Client, timeout time.Duration) *confirmer {
	return &confirmer{client: client, timeout: timeout}
}

// confirm reads key and reports whether its value is value, and etcd's
// revision at the read. It reports false, having learnt nothing, when
// etcd failed or did not answer in time, or ctx ended first.
func (c *confirmer) confirm(ctx context.Context, key, value string) (equal bool, revision int64) {
	cf := &confirmation{key: key, value: value, done: make(chan struct{})}
	c.mu.Lock()
	if c.inFlight < confirmInFlight {
		c.inFlight++
		c.mu.Unlock()
		c.send(ctx, []*confirmation{cf}) // its own batch: its own ctx
		c.next()
		return cf.equal, cf.revision
	}
	c.queue = append(c.queue, cf)
	c.mu.Unlock()
	select {
	case <-cf.done:
		return cf.equal, cf.revision
	case <-ctx.Done():
		// The batch goes on without this one; its answer is dropped.
		return false, 0
	}
}

// next is called when a transaction has ended: it sends the queue, from
// a goroutine of its own so that the caller returns, or frees the slot.
func (c *confirmer) next() {
	c.mu.Lock()
	if len(c.queue) == 0 {
		c.inFlight--
		c.mu.Unlock()
		return
	}
	n := min(len(c.queue), confirmBatchMax)
	batch := c.queue[:n:n]
	c.queue = c.queue[n:]
	if len(c.queue) == 0 {
		c.queue = nil // let the batch's array go
	}
	c.mu.Unlock()
	go func() {
		// The transaction serves every confirmation of the batch, so no
		// one request's cancellation may end it.
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		c.send(ctx, batch)
		cancel()
		c.next()
	}()
}

// send reads every mark of batch in one transaction and completes them.
func (c *confirmer) send(ctx context.Context, batch []*confirmation) {
	c.transactions.Add(1)
	ops := make([]clientv3.Op, len(batch))
	for i, cf := range batch {
		ops[i] = clientv3.OpGet(cf.key)
	}
	resp, err := c.client.Txn(ctx).Then(ops...).Commit()
	for i, cf := range batch {
		if err == nil && len(resp.Responses) == len(batch) {
			kvs := resp.Responses[i].GetResponseRange().GetKvs()
			cf.equal = len(kvs) == 1 && string(kvs[0].Value) == cf.value
			cf.revision = resp.Header.Revision
		}
		close(cf.done)
	}
}
