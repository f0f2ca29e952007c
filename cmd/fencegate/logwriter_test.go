package main

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"fencegate/internal/testenv"
)

// recordingWriter records every Write it gets, and can be made to block.
type recordingWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	gate   chan struct{} // when not nil, Write waits until it is closed
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	if w.gate != nil {
		<-w.gate
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.buf.Write(p)
}

func (w *recordingWriter) snapshot() (string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String(), w.writes
}

// TestLogWriterKeepsEveryLineWholeAndInOrder writes lines from many
// goroutines at once and checks, after Close, that every line is there
// once, whole, and in each writer's order, and that they took far fewer
// writes than lines.
func TestLogWriterKeepsEveryLineWholeAndInOrder(t *testing.T) {
	const writers, lines = 8, 500
	out := &recordingWriter{}
	lw := newLogWriter(out, logFlushDelay)
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range lines {
				line := fmt.Sprintf("writer=%d line=%d %s\n", g, i, strings.Repeat("x", i%97))
				if n, err := lw.Write([]byte(line)); n != len(line) || err != nil {
					t.Errorf("Write = %d, %v; want %d, nil", n, err, len(line))
				}
			}
		})
	}
	wg.Wait()
	if err := lw.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	text, writes := out.snapshot()
	got := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines written, want %d", len(got), writers*lines)
	}
	next := make([]int, writers)
	for _, line := range got {
		var g, i int
		if _, err := fmt.Sscanf(line, "writer=%d line=%d", &g, &i); err != nil || g < 0 || g >= writers {
			t.Fatalf("line %q is not one of the lines written (%v)", line, err)
		}
		if i != next[g] {
			t.Fatalf("writer %d: line %d after line %d", g, i, next[g]-1)
		}
		if want := fmt.Sprintf("writer=%d line=%d %s", g, i, strings.Repeat("x", i%97)); line != want {
			t.Fatalf("line %q, want %q", line, want)
		}
		next[g]++
	}
	if writes >= writers*lines/10 {
		t.Errorf("%d lines took %d writes: they were not batched", writers*lines, writes)
	}
}

// TestLogWriterWritesWithoutClose checks that a line reaches the writer
// by itself, without a Close or more lines.
func TestLogWriterWritesWithoutClose(t *testing.T) {
	out := &recordingWriter{}
	lw := newLogWriter(out, logFlushDelay)
	defer lw.Close()
	if _, err := lw.Write([]byte("only line\n")); err != nil {
		t.Fatal(err)
	}
	testenv.WaitUntil(t, 10*time.Second, "the writer has the line", func() bool {
		text, _ := out.snapshot()
		return text == "only line\n"
	})
}

// TestLogWriterBlocksWhenFull checks that a full queue makes Write wait
// for the slow writer instead of dropping lines.
func TestLogWriterBlocksWhenFull(t *testing.T) {
	out := &recordingWriter{gate: make(chan struct{})}
	lw := newLogWriter(out, time.Millisecond)
	// The flusher takes the first line and blocks in the writer's Write.
	first := "first\n"
	if _, err := lw.Write([]byte(first)); err != nil {
		t.Fatal(err)
	}
	for {
		lw.mu.Lock()
		taken := len(lw.pending) == 0
		lw.mu.Unlock()
		if taken {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// Fill the queue to the brim, then one line more.
	full := bytes.Repeat([]byte("f"), logBufferMax-1)
	full = append(full, '\n')
	if _, err := lw.Write(full); err != nil {
		t.Fatal(err)
	}
	over := make(chan struct{})
	go func() {
		defer close(over)
		_, _ = lw.Write([]byte("over\n"))
	}()
	select {
	case <-over:
		t.Fatal("Write past a full queue returned while the writer was blocked: it cannot have kept the line")
	case <-time.After(50 * time.Millisecond):
	}
	close(out.gate) // the writer drains
	<-over
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	text, _ := out.snapshot()
	if want := first + string(full) + "over\n"; text != want {
		t.Errorf("written %d bytes, want %d: first, the full queue, then the line past it", len(text), len(want))
	}
}

// TestLogWriterAfterClose checks that lines written after Close are
// written at once, after the ones pending at Close.
func TestLogWriterAfterClose(t *testing.T) {
	out := &recordingWriter{}
	lw := newLogWriter(out, time.Hour) // nothing is flushed but by Close
	if _, err := lw.Write([]byte("before\n")); err != nil {
		t.Fatal(err)
	}
	if text, _ := out.snapshot(); text != "" {
		t.Fatalf("written before its delay: %q", text)
	}
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := lw.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := lw.Write([]byte("after\n")); err != nil {
		t.Fatal(err)
	}
	if text, _ := out.snapshot(); text != "before\nafter\n" {
		t.Errorf("written %q, want the pending line at Close, then the late one", text)
	}
}
