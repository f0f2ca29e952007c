package tokenstore

import (
	"context"
	"sync"
)

// indexTurns makes one caller's creations under one limited index (an
// identity's sessions, a session's places in queues: see locks.go) take
// turns within this store: one counts and commits while the others wait
// (turnOf says why the caller is part of the turn).
//
// The limits are checked optimistically, and a commit fails the compare
// of every creation under the same index that counted before it. Were n
// creations of one index sent at once, each round would commit one and
// fail the rest, which count again and try again: about n²/2
// transactions for n creations, each a Raft entry and an fsync, so a
// client with n requests in flight could make etcd do n/2 times the work
// it asked for. Taking turns, each creation counts after the one before
// it committed, and commits at its first try; n creations cost n
// transactions, and take no longer than the rounds did (each round
// committed only one). Creations through other gateways can still race
// this one; each such lost race is still another's success.
type indexTurns struct {
	mu    sync.Mutex
	turns map[string]*indexTurn // by index; only while someone holds or waits
}

type indexTurn struct {
	held  chan struct{} // has an element while the turn is taken
	users int           // holders and waiters, under indexTurns.mu
}

func newIndexTurns() *indexTurns { return &indexTurns{turns: make(map[string]*indexTurn)} }

// take waits for index's turn, or for ctx to end (then it returns
// ctx.Err()), and returns the function that gives the turn back.
func (t *indexTurns) take(ctx context.Context, index string) (release func(), err error) {
	t.mu.Lock()
	turn := t.turns[index]
	if turn == nil {
		turn = &indexTurn{held: make(chan struct{}, 1)}
		t.turns[index] = turn
	}
	turn.users++
	t.mu.Unlock()
	select {
	case turn.held <- struct{}{}:
		return func() {
			<-turn.held
			t.leave(index, turn)
		}, nil
	case <-ctx.Done():
		t.leave(index, turn)
		return nil, ctx.Err()
	}
}

// leave drops a holder or waiter of index's turn, and the turn with the
// last one, so that the map holds only the indexes in use.
func (t *indexTurns) leave(index string, turn *indexTurn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if turn.users--; turn.users == 0 {
		delete(t.turns, index)
	}
}

// turnOf is the turn that caller's creations under index take: the
// caller's identity (nil for an operator, who may act for any) is part of
// it. A session's index is named by the session's id, which any caller
// can send, and guess; were the turn the index's alone, another
// identity's acquires naming the session would hold it, each until etcd
// refuses it as not the owner's, and the owner's acquires would wait
// behind them. Only the owner's creations can commit under its index, so
// they are the only ones that need to take turns.
func (s *Store) turnOf(index string, caller *string) string {
	if caller == nil {
		return index + "\x00*"
	}
	return index + "\x00=" + *caller
}
