package testenv

import (
	"fmt"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
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

// Write writes p, one zap entry ending in a newline, after the prefix.
func (w *tbLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.detached {
		_, _ = fmt.Fprintf(w.tb.Output(), "%s%s", w.prefix, p)
	}
	return len(p), nil
}

// Sync does nothing: each Write is a whole line, which tb.Output flushes.
func (w *tbLogWriter) Sync() error { return nil }

// detach stops passing lines to tb. Call it at cleanup, after whatever
// logs to w has stopped.
func (w *tbLogWriter) detach() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.detached = true
}

// newTBLogger returns a zap logger that writes entries of level error and
// above to tb.Output, each line starting with prefix, and the writer to
// detach at cleanup.
func newTBLogger(tb testing.TB, prefix string) (*zap.Logger, *tbLogWriter) {
	w := &tbLogWriter{tb: tb, prefix: prefix}
	encoderConfig := zap.NewDevelopmentEncoderConfig()
	encoderConfig.TimeKey = "" // test output has no use for it
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(encoderConfig), w, zapcore.ErrorLevel)
	return zap.New(core), w
}
