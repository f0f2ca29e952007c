package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/slogtest"
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
	waitTaken(t, lw)
	// Fill the queue to the brim, then one line more.
	full := bytes.Repeat([]byte("f"), logBufferMax-1)
	full = append(full, '\n')
	if _, err := lw.Write(full); err != nil {
		t.Fatal(err)
	}
	blocksUntilDrained(t, out, lw, func() { _, _ = lw.Write([]byte("over\n")) })
	text, _ := out.snapshot()
	if want := first + string(full) + "over\n"; text != want {
		t.Errorf("written %d bytes, want %d: first, the full queue, then the line past it", len(text), len(want))
	}
}

// waitTaken waits until lw's flusher has taken every queued line and
// record.
func waitTaken(t *testing.T, lw *logWriter) {
	t.Helper()
	testenv.WaitUntil(t, 10*time.Second, "the flusher took the queue", func() bool {
		lw.mu.Lock()
		defer lw.mu.Unlock()
		return len(lw.pending) == 0 && len(lw.records) == 0
	})
}

// blocksUntilDrained runs write, which goes past lw's full queue while the
// flusher is held in out's gate, and checks that it waits: it must not
// return before the gate opens, and must once it has. Then it closes lw.
func blocksUntilDrained(t *testing.T, out *recordingWriter, lw *logWriter, write func()) {
	t.Helper()
	over := make(chan struct{})
	go func() {
		defer close(over)
		write()
	}()
	select {
	case <-over:
		t.Fatal("a write past a full queue returned while the writer was blocked: it cannot have kept its line")
	case <-time.After(50 * time.Millisecond):
	}
	close(out.gate) // the writer drains
	<-over
	if err := lw.Close(); err != nil {
		t.Fatal(err)
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

// newQueued returns a handler of format ("text" or "json") writing
// through a logWriter to out, as newLogger builds it, and the writer.
func newQueued(out io.Writer, format string, delay time.Duration) (slog.Handler, *logWriter) {
	lw := newLogWriter(out, delay)
	return lw.handler(newFormatHandler(lw, format), newFormatHandler(&lw.batch, format)), lw
}

func newFormatHandler(w io.Writer, format string) slog.Handler {
	opts := &slog.HandlerOptions{Level: slog.LevelDebug}
	if format == "json" {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

// TestQueueHandlerWritesWhatItsHandlerWrites sends the same records, some
// formatted later and some at once, through the queued handler and
// through the plain one, and checks that the bytes are the same.
func TestQueueHandlerWritesWhatItsHandlerWrites(t *testing.T) {
	at := time.Date(2026, 12, 3, 11, 0, 0, 123456789, time.UTC)
	record := func(level slog.Level, msg string, attrs ...slog.Attr) slog.Record {
		r := slog.NewRecord(at, level, msg, 0)
		r.AddAttrs(attrs...)
		return r
	}
	scalars := []slog.Attr{
		slog.String("path", "/v1/objects/b/k with space"), slog.Int("status", 409),
		slog.Uint64("token", 1<<63), slog.Float64("ratio", 0.61), slog.Bool("ok", false),
		slog.Duration("duration", 1500*time.Microsecond), slog.Time("at", at),
		slog.String("detail", "quote \" newline \n and ünïcode"),
	}
	records := []slog.Record{
		record(slog.LevelInfo, "request", scalars...),
		record(slog.LevelWarn, "write refused", scalars[:3]...),
		record(slog.LevelError, "with an error", slog.Any("err", errors.New("boom"))),
		record(slog.LevelInfo, "with a slice", slog.Any("fields", []string{"a", "b"})),
		record(slog.LevelInfo, "with a group", slog.Group("g", slog.Int("n", 1))),
		record(slog.LevelDebug, "no attributes"),
		record(slog.LevelInfo, "request", scalars[3:]...),
	}
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var want bytes.Buffer
			plain := newFormatHandler(&want, format)
			out := &recordingWriter{}
			queued, lw := newQueued(out, format, time.Hour) // written by Close only
			handlers := [][2]slog.Handler{
				{plain, queued},
				{plain.WithAttrs([]slog.Attr{slog.String("component", "etcd")}), queued.WithAttrs([]slog.Attr{slog.String("component", "etcd")})},
				{plain.WithGroup("req").WithAttrs([]slog.Attr{slog.Int("n", 2)}), queued.WithGroup("req").WithAttrs([]slog.Attr{slog.Int("n", 2)})},
			}
			for _, h := range handlers {
				for _, r := range records {
					if err := h[0].Handle(context.Background(), r.Clone()); err != nil {
						t.Fatal(err)
					}
					if err := h[1].Handle(context.Background(), r.Clone()); err != nil {
						t.Fatal(err)
					}
				}
			}
			lw.mu.Lock()
			queuedRecords := len(lw.records)
			lw.mu.Unlock()
			if want := 3 * 4; queuedRecords != want { // each handler's records of scalars (or none)
				t.Errorf("%d records queued to be formatted later, want %d", queuedRecords, want)
			}
			if err := lw.Close(); err != nil {
				t.Fatal(err)
			}
			if got, _ := out.snapshot(); got != want.String() {
				t.Errorf("queued handler wrote\n%s\nthe handler writes\n%s", got, want.String())
			}
		})
	}
}

// TestQueueHandlerFormatsChangeableValuesAtOnce checks that a value that
// may change after the call (here a slice) is written as it was when it
// was logged, and that a record of scalars is formatted later.
func TestQueueHandlerFormatsChangeableValuesAtOnce(t *testing.T) {
	out := &recordingWriter{}
	h, lw := newQueued(out, "text", time.Hour)
	log := slog.New(h)
	fields := []string{"before"}
	log.Info("changeable", "fields", fields)
	fields[0] = "after"
	log.Info("scalars", "n", 1)
	lw.mu.Lock()
	queued := len(lw.records)
	lw.mu.Unlock()
	if queued != 1 {
		t.Errorf("%d records queued, want 1 (the scalar one)", queued)
	}
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	text, _ := out.snapshot()
	if !strings.Contains(text, "fields=[before]") || strings.Contains(text, "after") {
		t.Errorf("written %q, want the slice as it was logged", text)
	}
	if i, j := strings.Index(text, "msg=changeable"), strings.Index(text, "msg=scalars"); i < 0 || j < i {
		t.Errorf("written %q, want both lines in the order they were logged", text)
	}
}

// TestQueueHandlerKeepsEachLoggersOrder logs from many goroutines at once,
// alternating records formatted later and at once, and checks that every
// line is written once, in its goroutine's order.
func TestQueueHandlerKeepsEachLoggersOrder(t *testing.T) {
	const writers, lines = 8, 500
	out := &recordingWriter{}
	h, lw := newQueued(out, "json", logFlushDelay)
	log := slog.New(h)
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range lines {
				if i%2 == 0 {
					log.Info("scalar", "writer", g, "line", i)
				} else {
					log.Info("any", "writer", g, "line", i, "err", errors.New("x"))
				}
			}
		})
	}
	wg.Wait()
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	text, _ := out.snapshot()
	next := make([]int, writers)
	n := 0
	for line := range strings.Lines(text) {
		var rec struct {
			Writer, Line int
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if rec.Line != next[rec.Writer] {
			t.Fatalf("writer %d: line %d after line %d", rec.Writer, rec.Line, next[rec.Writer]-1)
		}
		next[rec.Writer]++
		n++
	}
	if n != writers*lines {
		t.Errorf("%d lines written, want %d", n, writers*lines)
	}
}

// TestQueueHandlerBlocksWhenFull checks that a full queue of records makes
// the next one wait for the slow writer instead of dropping it.
func TestQueueHandlerBlocksWhenFull(t *testing.T) {
	out := &recordingWriter{gate: make(chan struct{})}
	h, lw := newQueued(out, "text", time.Millisecond)
	log := slog.New(h)
	// The flusher takes the first record and blocks in the writer's Write.
	log.Info("first")
	waitTaken(t, lw)
	for i := range logRecordsMax {
		log.Info("queued", "i", i)
	}
	blocksUntilDrained(t, out, lw, func() { log.Info("over") })
	text, _ := out.snapshot()
	if got, want := strings.Count(text, "\n"), logRecordsMax+2; got != want {
		t.Errorf("%d lines written, want %d", got, want)
	}
	if !strings.HasSuffix(text, "msg=over\n") {
		t.Errorf("the last line is not the one past the full queue: %q", text[max(0, len(text)-80):])
	}
}

// TestQueueHandlerAfterClose checks that records logged after Close are
// written at once.
func TestQueueHandlerAfterClose(t *testing.T) {
	out := &recordingWriter{}
	h, lw := newQueued(out, "text", time.Hour)
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	slog.New(h).Info("late", "n", 1)
	if text, _ := out.snapshot(); !strings.Contains(text, "msg=late n=1\n") {
		t.Errorf("written %q, want the late line at once", text)
	}
}

// TestQueueHandlerConforms runs the standard library's handler tests on
// the queued JSON handler, each case read back after Close.
func TestQueueHandlerConforms(t *testing.T) {
	var out *recordingWriter
	var lw *logWriter
	slogtest.Run(t, func(*testing.T) slog.Handler {
		out = &recordingWriter{}
		var h slog.Handler
		h, lw = newQueued(out, "json", time.Hour)
		return h
	}, func(t *testing.T) map[string]any {
		if err := lw.Close(); err != nil {
			t.Fatal(err)
		}
		text, _ := out.snapshot()
		var m map[string]any
		if err := json.Unmarshal([]byte(text), &m); err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		return m
	})
}
