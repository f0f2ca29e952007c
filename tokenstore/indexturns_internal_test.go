package tokenstore

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
	"fencegate/internal/testenv"
)

// TestIndexTurns: a turn is held by one caller at a time, per index; a
// waiter whose context ends gets its error and holds nothing; the turns
// of other indexes are free meanwhile; and no index stays in the map
// once nobody holds or waits for its turn.
func TestIndexTurns(t *testing.T) {
	turns := newIndexTurns()
	ctx := context.Background()
	release, err := turns.take(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}

	other, err := turns.take(ctx, "b")
	if err != nil {
		t.Fatalf("another index's turn: %v", err)
	}
	other()

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := turns.take(short, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("take of a held turn until the deadline: %v; want %v", err, context.DeadlineExceeded)
	}

	got := make(chan error, 1)
	go func() {
		r, err := turns.take(ctx, "a")
		if err == nil {
			r()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("take of a held turn returned (%v) before the holder gave it back", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	if err := <-got; err != nil {
		t.Fatalf("take once the turn was given back: %v", err)
	}

	turns.mu.Lock()
	defer turns.mu.Unlock()
	if len(turns.turns) != 0 {
		t.Fatalf("%d indexes still in the map with nobody holding or waiting; want 0", len(turns.turns))
	}
}

// TestAcquireTakesNoTurnBehindAnotherIdentity: acquires that name a
// session they do not own (another identity guessing its id) never make
// its owner's acquires wait. The turn they would wait for is held here,
// as a flood of such acquires would hold it, each until etcd refuses it;
// the owner's acquire must still be granted. A session's acquires take
// turns with those of the same caller only.
func TestAcquireTakesNoTurnBehindAnotherIdentity(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newTestStore(t, etcd.Client(t), "test/", nil)
	ctx := context.Background()
	sess, err := s.CreateSession(ctx, 30, "alice")
	if err != nil {
		t.Fatal(err)
	}
	mallory := "mallory"
	release, err := s.limited.take(ctx, s.turnOf(s.sessionLocks(sess.ID), &mallory))
	if err != nil {
		t.Fatal(err)
	}

	// A deadlock detector, not a measure: the acquire takes milliseconds.
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	alice := "alice"
	if _, err := s.Acquire(actx, "l", sess.ID, &alice, 0); err != nil {
		release()
		t.Fatalf("the owner's acquire while another identity's acquires of its session hold their turn: %v", err)
	}
	release()
	if _, err := s.Acquire(actx, "m", sess.ID, &mallory, 0); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("another identity's acquire: %v; want %v", err, api.ErrForbidden)
	}
}

// TestTurnWaitEndedIsUnavailable: a creation whose request ends while it
// waits for its turn fails as etcd's unavailability does (503, try
// again), having written nothing, not as an internal error.
func TestTurnWaitEndedIsUnavailable(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	s := newTestStore(t, etcd.Client(t), "test/", nil)
	ctx := context.Background()
	alice := "alice"
	sess, err := s.CreateSession(ctx, 30, alice)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		turn   string
		create func(ctx context.Context) error
	}{
		{"session", s.turnOf(s.ownerSessions(alice), &alice), func(ctx context.Context) error {
			_, err := s.CreateSession(ctx, 30, alice)
			return err
		}},
		{"place in a queue", s.turnOf(s.sessionLocks(sess.ID), &alice), func(ctx context.Context) error {
			_, err := s.Acquire(ctx, "l", sess.ID, &alice, 0)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release, err := s.limited.take(ctx, tt.turn)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			if err := tt.create(short); !errors.Is(err, api.ErrUnavailable) {
				t.Fatalf("creation whose request ended waiting for its turn: %v; want %v", err, api.ErrUnavailable)
			}
		})
	}
	resp, err := etcd.Client(t).Get(ctx, "test/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 2 { // the first session's record and its owner's index key
		t.Fatalf("%d keys under the prefix; want 2 (the first session's): a creation that never had its turn wrote", resp.Count)
	}
}
