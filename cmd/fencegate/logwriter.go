package main

import (
	"io"
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
)

// logWriter writes log lines to w from a goroutine of its own, a batch at
// a time, so that a request does not wait on the log's write(2): under
// load one system call writes the lines of logFlushDelay instead of one
// each. The slog handlers write each record with one Write call, so lines
// stay whole. Close writes what is left; Writes after Close go straight
// to w.
type logWriter struct {
	w     io.Writer
	delay time.Duration

	mu      sync.Mutex
	pending []byte     // lines not yet taken by the flusher
	taken   *sync.Cond // broadcast when the flusher takes pending
	closed  bool

	wake     chan struct{} // the first line into an empty pending
	stop     chan struct{} // Close
	stopOnce sync.Once
	done     chan struct{} // the flusher returned
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
	first := len(lw.pending) == 0
	lw.pending = append(lw.pending, p...)
	lw.mu.Unlock()
	if first {
		select {
		case lw.wake <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// flusher writes the pending lines delay after the first of them came in.
// A failed write is dropped, as slog drops a handler's write error.
func (lw *logWriter) flusher() {
	defer close(lw.done)
	var batch []byte
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
		batch, lw.pending = lw.pending, batch[:0]
		lw.taken.Broadcast()
		lw.mu.Unlock()
		if len(batch) > 0 {
			_, _ = lw.w.Write(batch)
		}
	}
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
	if len(lw.pending) > 0 {
		_, err = lw.w.Write(lw.pending)
		lw.pending = nil
	}
	return err
}
