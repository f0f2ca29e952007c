package tokenstore

import (
	"context"
	"errors"
	"testing"
	"time"
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
