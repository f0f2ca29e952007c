package logging

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	// logFlushDelay is how long a log line may wait before it is written:
	// the first line after a quiet spell starts a flush this much later,
	// which writes every line that came in between. It bounds what a
	// crash can lose (a clean shutdown loses nothing).
	logFlushDelay = 10 * time.Millisecond
	// logBudgetBytes bounds the bytes of lines and records that wait for
	// the flusher (records count the bytes of their values, before
	// escaping: see deferrable). A line or record that would go past it
	// is dropped and counted, never waited for: see logWriter.
	logBudgetBytes = 8 << 20
	// logKeepBytes is the most buffer the flusher keeps between batches:
	// a larger one, left by a burst, is let go once written, so that one
	// burst does not hold its memory for the life of the process.
	logKeepBytes = 256 << 10
	// logKeepRecords is the same bound on the slice of queued records.
	logKeepRecords = 4096
	// logDroppedMessage is the msg of the line that reports drops.
	logDroppedMessage = "log records dropped"
)

// logWriter writes log lines to w from a goroutine of its own, a batch at
// a time, so that a request does not wait on the log's write(2): under
// load one system call writes the lines of logFlushDelay instead of one
// each. The slog handlers write each record with one Write call, so lines
// stay whole. Close writes what is left; Writes after Close go straight
// to w.
//
// Records whose values are all plain scalars (see deferrable) are not
// even formatted by the request that logs them: handler queues them, and
// the flusher formats them, in their place among the lines, just before
// it writes the batch.
//
// What waits is bounded in bytes (budget, logBudgetBytes), and past the
// budget lines and records are dropped, at every level, not waited for.
// Waiting would make stderr the gateway's limit: when the reader of
// stderr is slow or stuck, every request that logs (every request) would
// queue behind it, /healthz included. Audit lines (WARN) are dropped too
// rather than waited for: a refused write held until stderr drains would
// keep its goroutine and connection for as long as stderr is stuck, and
// the audit's count of refused writes is its metric
// (fencegate_refused_writes_total), which no drop touches. Each drop is
// counted (fencegate_log_records_dropped_total) and reported by a line in
// the next batch written, so that no gap in the log is silent. Memory is
// bounded by the budget that waits plus the batch being written.
type logWriter struct {
	w      io.Writer
	delay  time.Duration
	budget int // bytes: logBudgetBytes, smaller in tests

	mu          sync.Mutex
	pending     []byte         // lines not yet taken by the flusher
	records     []queuedRecord // records to format, in order among pending
	recordBytes int            // the records' sizes (deferrable)
	unreported  uint64         // drops not yet reported by a line
	closed      bool
	// report formats the line that reports drops; nil until handler is
	// called, and without it the report is a plain line.
	report slog.Handler

	// dropped counts every line and record dropped.
	dropped atomic.Uint64

	// batch is where the flusher formats queued records, between the
	// lines of pending. Only the flusher uses it, or Close once the
	// flusher has returned.
	batch bytes.Buffer
	// spareLines and spareRecords are the flusher's buffers of the
	// previous batch, which the next one reuses (up to logKeepBytes and
	// logKeepRecords).
	spareLines   []byte
	spareRecords []queuedRecord

	wake     chan struct{} // the first line or record into an empty queue
	stop     chan struct{} // Close
	stopOnce sync.Once
	done     chan struct{} // the flusher returned
}

// queuedRecord is a record waiting to be formatted by h, after the lines
// in pending[:after].
type queuedRecord struct {
	after int
	h     slog.Handler
	r     slog.Record
}

// newLogWriter starts a logWriter that writes to w once a line has waited
// delay.
func newLogWriter(w io.Writer, delay time.Duration) *logWriter {
	lw := &logWriter{
		w:      w,
		delay:  delay,
		budget: logBudgetBytes,
		wake:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go lw.flusher()
	return lw
}

// Write queues p, or drops it when the queue would go past its budget.
// It never waits for the flusher, and never fails: a dropped line is
// counted, as slog drops a handler's write error.
func (lw *logWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	if lw.closed {
		// Written under the lock, so that late lines keep their order.
		defer lw.mu.Unlock()
		return lw.w.Write(p)
	}
	if !lw.roomLocked(len(p)) {
		lw.mu.Unlock()
		return len(p), nil
	}
	first := len(lw.pending) == 0 && len(lw.records) == 0
	lw.pending = append(lw.pending, p...)
	lw.mu.Unlock()
	if first {
		lw.wakeFlusher()
	}
	return len(p), nil
}

// roomLocked reports whether n more bytes fit the budget, and counts a
// drop when they do not; the flusher is woken to report it, should the
// queue be empty (a line over the whole budget). lw.mu is held.
func (lw *logWriter) roomLocked(n int) bool {
	if len(lw.pending)+lw.recordBytes+n <= lw.budget {
		return true
	}
	lw.unreported++
	lw.dropped.Add(1)
	lw.wakeFlusher()
	return false
}

// queue queues r, of size bytes (recordBytes), for later to format, or
// drops it when the queue would go past its budget. It reports false,
// having queued nothing, once the writer is closed.
func (lw *logWriter) queue(later slog.Handler, r slog.Record, size int) bool {
	lw.mu.Lock()
	if lw.closed {
		lw.mu.Unlock()
		return false
	}
	if !lw.roomLocked(size) {
		lw.mu.Unlock()
		return true
	}
	first := len(lw.pending) == 0 && len(lw.records) == 0
	lw.records = append(lw.records, queuedRecord{after: len(lw.pending), h: later, r: r})
	lw.recordBytes += size
	lw.mu.Unlock()
	if first {
		lw.wakeFlusher()
	}
	return true
}

// queuedBytes is what the queue holds against its budget.
func (lw *logWriter) queuedBytes() int {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return len(lw.pending) + lw.recordBytes
}

func (lw *logWriter) wakeFlusher() {
	select {
	case lw.wake <- struct{}{}:
	default:
	}
}

// flusher writes the pending lines delay after the first of them came in.
// A failed write is dropped, as slog drops a handler's write error.
func (lw *logWriter) flusher() {
	defer close(lw.done)
	timer := time.NewTimer(lw.delay)
	timer.Stop()
	for {
		select {
		case <-lw.wake:
		case <-lw.stop:
			return
		}
		timer.Reset(lw.delay)
		select {
		case <-timer.C:
		case <-lw.stop:
			timer.Stop()
			return // Close writes what is pending
		}
		lw.mu.Lock()
		lines, records, dropped := lw.takeLocked(lw.spareLines[:0], lw.spareRecords[:0])
		lw.mu.Unlock()
		if out := lw.format(lines, records, dropped); len(out) > 0 {
			_, _ = lw.w.Write(out)
		}
		clear(records) // let the records' values go
		lw.spareLines, lw.spareRecords = keep(lines, records)
		if lw.batch.Cap() > logKeepBytes {
			lw.batch = bytes.Buffer{}
		}
	}
}

// takeLocked takes the queue, and the count of drops to report, and
// leaves lines and records, emptied, as the next queue. lw.mu is held.
func (lw *logWriter) takeLocked(lines []byte, records []queuedRecord) ([]byte, []queuedRecord, uint64) {
	lines, lw.pending = lw.pending, lines
	records, lw.records = lw.records, records
	lw.recordBytes = 0
	dropped := lw.unreported
	lw.unreported = 0
	return lines, records, dropped
}

// keep returns the buffers of a written batch for the next one to reuse,
// or nil for those over logKeepBytes or logKeepRecords.
func keep(lines []byte, records []queuedRecord) ([]byte, []queuedRecord) {
	if cap(lines) > logKeepBytes {
		lines = nil
	}
	if cap(records) > logKeepRecords {
		records = nil
	}
	return lines, records
}

// format returns lines with records formatted in their places, in batch,
// and then, when dropped is not zero, the line that reports the drops.
func (lw *logWriter) format(lines []byte, records []queuedRecord, dropped uint64) []byte {
	if len(records) == 0 && dropped == 0 {
		return lines
	}
	lw.batch.Reset()
	from := 0
	for _, q := range records {
		lw.batch.Write(lines[from:q.after])
		from = q.after
		_ = q.h.Handle(context.Background(), q.r)
	}
	lw.batch.Write(lines[from:])
	if dropped > 0 {
		lw.reportDropped(dropped)
	}
	return lw.batch.Bytes()
}

// reportDropped writes the line that reports dropped lines and records
// to batch, formatted as the log's other lines are.
func (lw *logWriter) reportDropped(dropped uint64) {
	if lw.report == nil {
		fmt.Fprintf(&lw.batch, "%s: %d (log queue over %d bytes)\n", logDroppedMessage, dropped, lw.budget)
		return
	}
	r := slog.NewRecord(time.Now(), slog.LevelWarn, logDroppedMessage, 0)
	r.AddAttrs(slog.Uint64("dropped", dropped), slog.Int("budget_bytes", lw.budget))
	_ = lw.report.Handle(context.Background(), r)
}

// Close stops the flusher and writes every line still pending, then
// returns; later Writes are written at once.
func (lw *logWriter) Close() error {
	lw.stopOnce.Do(func() { close(lw.stop) })
	<-lw.done // the flusher's last write has returned
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.closed = true
	lines, records, dropped := lw.takeLocked(nil, nil)
	var err error
	if out := lw.format(lines, records, dropped); len(out) > 0 {
		_, err = lw.w.Write(out)
	}
	return err
}

// handler returns a slog.Handler that writes through lw. now formats
// records at once and writes them to lw; later, the same handler but
// writing to lw's batch, formats the records lw queues.
func (lw *logWriter) handler(now, later slog.Handler) slog.Handler {
	lw.mu.Lock()
	lw.report = later
	lw.mu.Unlock()
	return &queueHandler{now: now, later: later, lw: lw}
}

// queueHandler hands records whose values cannot change (deferrable) to
// its logWriter to format later, and formats the others at once.
type queueHandler struct {
	now, later slog.Handler
	lw         *logWriter
}

func (h *queueHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.now.Enabled(ctx, level)
}

func (h *queueHandler) Handle(ctx context.Context, r slog.Record) error {
	if size, ok := deferrable(r); ok && h.lw.queue(h.later, r.Clone(), size) {
		return nil
	}
	return h.now.Handle(ctx, r)
}

func (h *queueHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &queueHandler{now: h.now.WithAttrs(attrs), later: h.later.WithAttrs(attrs), lw: h.lw}
}

func (h *queueHandler) WithGroup(name string) slog.Handler {
	return &queueHandler{now: h.now.WithGroup(name), later: h.later.WithGroup(name), lw: h.lw}
}

// deferrable reports whether r can be formatted later with the same
// result: every value is a string, number, bool, duration or time, which
// nothing can change after the call that logged it (an Any, a group or a
// LogValuer may hold something that changes). It returns the bytes that
// r counts against the queue's budget: its message, keys and string
// values, and a little for the rest.
func deferrable(r slog.Record) (size int, ok bool) {
	const recordOverhead, scalarBytes = 64, 24 // time, level, quotes...; a number or time
	size, ok = recordOverhead+len(r.Message), true
	r.Attrs(func(a slog.Attr) bool {
		size += len(a.Key) + 2
		switch a.Value.Kind() {
		case slog.KindString:
			size += len(a.Value.String())
			return true
		case slog.KindInt64, slog.KindUint64, slog.KindFloat64,
			slog.KindBool, slog.KindDuration, slog.KindTime:
			size += scalarBytes
			return true
		}
		ok = false
		return false
	})
	return size, ok
}

// droppedCounter is fencegate_log_records_dropped_total, read from lw.
func (lw *logWriter) droppedCounter() prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "fencegate_log_records_dropped_total",
		Help: "Log lines and records dropped because the queue to stderr was over its byte budget (8 MiB): stderr did not keep up. Each batch written after a drop has a \"" + logDroppedMessage + "\" line with their count.",
	}, func() float64 { return float64(lw.dropped.Load()) })
}
