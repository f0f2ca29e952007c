package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

const (
	// logFlushDelay is how long a log line may wait before it is written:
	// the first line after a quiet spell starts a flush this much later,
	// which writes every line that came in between. It bounds what a
	// crash can lose (a clean shutdown loses nothing).
	logFlushDelay = 10 * time.Millisecond
	// logBufferMax is how many bytes of lines may wait. A line that would
	// go past it waits for the flush instead (nothing is dropped).
	logBufferMax = 1 << 20
	// logRecordsMax is how many records may wait to be formatted; the
	// next one waits for the flush.
	logRecordsMax = 1 << 13
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
type logWriter struct {
	w     io.Writer
	delay time.Duration

	mu      sync.Mutex
	pending []byte         // lines not yet taken by the flusher
	records []queuedRecord // records to format, in order among pending
	taken   *sync.Cond     // broadcast when the flusher takes the queue
	closed  bool

	// batch is where the flusher formats queued records, between the
	// lines of pending. Only the flusher uses it, or Close once the
	// flusher has returned.
	batch bytes.Buffer

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
		w:     w,
		delay: delay,
		wake:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	lw.taken = sync.NewCond(&lw.mu)
	go lw.flusher()
	return lw
}

// Write queues p. It blocks only while the queue is full.
func (lw *logWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	for !lw.closed && len(lw.pending) > 0 && len(lw.pending)+len(p) > logBufferMax {
		lw.taken.Wait()
	}
	if lw.closed {
		// Written under the lock, so that late lines keep their order.
		defer lw.mu.Unlock()
		return lw.w.Write(p)
	}
	first := len(lw.pending) == 0 && len(lw.records) == 0
	lw.pending = append(lw.pending, p...)
	lw.mu.Unlock()
	if first {
		lw.wakeFlusher()
	}
	return len(p), nil
}

// queue queues r for later to format. It reports false, having queued
// nothing, once the writer is closed.
func (lw *logWriter) queue(later slog.Handler, r slog.Record) bool {
	lw.mu.Lock()
	for !lw.closed && len(lw.records) >= logRecordsMax {
		lw.taken.Wait()
	}
	if lw.closed {
		lw.mu.Unlock()
		return false
	}
	first := len(lw.pending) == 0 && len(lw.records) == 0
	lw.records = append(lw.records, queuedRecord{after: len(lw.pending), h: later, r: r})
	lw.mu.Unlock()
	if first {
		lw.wakeFlusher()
	}
	return true
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
	var lines []byte
	var records []queuedRecord
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
		lines, lw.pending = lw.pending, lines[:0]
		records, lw.records = lw.records, records[:0]
		lw.taken.Broadcast()
		lw.mu.Unlock()
		if out := lw.format(lines, records); len(out) > 0 {
			_, _ = lw.w.Write(out)
		}
		clear(records) // let the records' values go
	}
}

// format returns lines with records formatted in their places, in batch.
func (lw *logWriter) format(lines []byte, records []queuedRecord) []byte {
	if len(records) == 0 {
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
	return lw.batch.Bytes()
}

// Close stops the flusher and writes every line still pending, then
// returns; later Writes are written at once.
func (lw *logWriter) Close() error {
	lw.stopOnce.Do(func() { close(lw.stop) })
	<-lw.done // the flusher's last write has returned
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.closed = true
	lw.taken.Broadcast()
	var err error
	if out := lw.format(lw.pending, lw.records); len(out) > 0 {
		_, err = lw.w.Write(out)
	}
	lw.pending, lw.records = nil, nil
	return err
}

// handler returns a slog.Handler that writes through lw. now formats
// records at once and writes them to lw; later, the same handler but
// writing to lw's batch, formats the records lw queues.
func (lw *logWriter) handler(now, later slog.Handler) slog.Handler {
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
	if deferrable(r) && h.lw.queue(h.later, r.Clone()) {
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
// LogValuer may hold something that changes).
func deferrable(r slog.Record) bool {
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		switch a.Value.Kind() {
		case slog.KindString, slog.KindInt64, slog.KindUint64, slog.KindFloat64,
			slog.KindBool, slog.KindDuration, slog.KindTime:
			return true
		}
		ok = false
		return false
	})
	return ok
}
