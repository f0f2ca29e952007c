package testenv

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
)

// tbLogWriter passes log lines to tb.Output, so they show like tb.Log
// lines (only for failed tests or with -v), until [tbLogWriter.detach];
// later lines are dropped, as tb must not be used after its test finished.
type tbLogWriter struct {
	mu       sync.Mutex
	tb       testing.TB
	prefix   string
	detached bool
}

// Write writes p, one log record ending in a newline, after the prefix.
func (w *tbLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.detached {
		_, _ = fmt.Fprintf(w.tb.Output(), "%s%s", w.prefix, p)
	}
	return len(p), nil
}

// detach stops passing lines to tb. Call it at cleanup, after whatever
// logs to w has stopped.
func (w *tbLogWriter) detach() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.detached = true
}

// newTBLogger returns a logger that writes records of level error and
// above to tb.Output, each line starting with prefix, and the writer to
// detach at cleanup.
func newTBLogger(tb testing.TB, prefix string) (*slog.Logger, *tbLogWriter) {
	w := &tbLogWriter{tb: tb, prefix: prefix}
	handler := slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: slog.LevelError,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{} // test output has no use for it
			}
			return a
		},
	})
	return slog.New(handler), w
}
