package logging

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

	"github.com/prometheus/client_golang/prometheus"

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
// through a logWriter to out, as New builds it, and the writer.
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

// TestLogWriterDropsPastItsByteBudget writes lines and records of four
// times the queue's byte budget while the log's writer is blocked, and
// checks that the writes return (nothing waits on a stuck stderr), that
// the queue stays within its budget, that every line and record is either
// written or counted as dropped (in the metric too), and that the batch
// after the drops reports them.
func TestLogWriterDropsPastItsByteBudget(t *testing.T) {
	const budget = 512 << 10 // logBudgetBytes, scaled down
	out := &recordingWriter{gate: make(chan struct{})}
	h, lw := newQueued(out, "text", time.Millisecond)
	lw.budget = budget
	log := slog.New(h)
	reg := prometheus.NewRegistry()
	if err := RegisterMetrics(reg, log.With("component", "test")); err != nil {
		t.Fatal(err)
	}
	log.Info("first")
	waitTaken(t, lw) // the flusher holds "first", blocked in the writer
	value := strings.Repeat("v", 16<<10)
	line := []byte(strings.Repeat("w", 16<<10-1) + "\n")
	const rounds = 4 * budget / (32 << 10) // 4 budgets' worth
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		for i := range rounds {
			log.Info("big", "i", i, "value", value)
			_, _ = lw.Write(line)
		}
	}()
	testenv.WaitUntil(t, 10*time.Second, "writes past the budget returned while the writer is blocked", func() bool {
		select {
		case <-returned:
			return true
		default:
			return false
		}
	})
	if queued := lw.queuedBytes(); queued > budget || queued < budget/2 {
		t.Errorf("%d bytes queued; want the budget's worth, at most %d", queued, budget)
	}
	dropped := lw.dropped.Load()
	if dropped == 0 {
		t.Fatalf("nothing dropped of %d bytes written past a %d-byte budget", rounds*32<<10, budget)
	}
	if got := gathered(t, reg, "fencegate_log_records_dropped_total"); got != float64(dropped) {
		t.Errorf("fencegate_log_records_dropped_total = %g; want %d", got, dropped)
	}
	close(out.gate)
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	text, _ := out.snapshot()
	written := strings.Count(text, "msg=big ") + strings.Count(text, "wwww\n")
	if written+int(dropped) != 2*rounds {
		t.Errorf("%d written + %d dropped = %d; want %d, every line and record", written, dropped, written+int(dropped), 2*rounds)
	}
	if report := fmt.Sprintf("msg=%q dropped=%d budget_bytes=%d\n", logDroppedMessage, dropped, budget); !strings.Contains(text, report) {
		t.Errorf("no line %q reports the drops; the log ends %q", report, text[max(0, len(text)-200):])
	}
}

// gathered is the value of the counter name in reg.
func gathered(tb testing.TB, reg *prometheus.Registry, name string) float64 {
	tb.Helper()
	families, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	tb.Fatalf("no metric %s", name)
	return 0
}

// TestLogWriterReleasesLargeBatches checks that the flusher does not keep
// the buffers of a large batch once it is written.
func TestLogWriterReleasesLargeBatches(t *testing.T) {
	out := &recordingWriter{gate: make(chan struct{})}
	h, lw := newQueued(out, "text", time.Millisecond)
	log := slog.New(h)
	log.Info("first")
	waitTaken(t, lw) // the flusher holds "first": what follows is one batch
	value := strings.Repeat("v", 16<<10)
	line := []byte(strings.Repeat("w", 16<<10-1) + "\n")
	for i := range 64 { // 2 MiB in one batch
		log.Info("big", "i", i, "value", value)
		_, _ = lw.Write(line)
	}
	close(out.gate)
	want := 64 * (len(line) + len(fmt.Sprintf("time=2026-12-03T18:00:00.000Z level=INFO msg=big i=10 value=%s\n", value)))
	testenv.WaitUntil(t, 10*time.Second, "every line written", func() bool {
		out.mu.Lock()
		defer out.mu.Unlock()
		return out.buf.Len() >= want-64 // i is one digit below 10
	})
	if err := lw.Close(); err != nil { // the flusher returned: its buffers can be read
		t.Fatal(err)
	}
	if c := lw.batch.Cap(); c > logKeepBytes {
		t.Errorf("the batch buffer keeps %d bytes after its batch was written; want at most %d", c, logKeepBytes)
	}
	if c := cap(lw.spareLines); c > logKeepBytes {
		t.Errorf("the lines buffer keeps %d bytes after its batch was written; want at most %d", c, logKeepBytes)
	}
}
