// Package logging is fencegate's log output: a slog.Logger whose text or
// JSON lines go to the output (stderr) through a queue of bounded bytes,
// written a batch at a time from a goroutine of its own, so that no
// request waits on the log's write(2) (see logWriter), and the metric of
// the lines that queue dropped.
package logging

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// Config says how to log. The zero Config logs at info level, as text.
type Config struct {
	// Level is the least level logged.
	Level slog.Level
	// Format is "text" (also for "") or "json".
	Format string
}

// Formats are the log formats ValidateFormat allows.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// ValidateFormat checks a log format: text or json. Its message does not
// name the setting: the caller does.
func ValidateFormat(format string) error {
	if format != FormatText && format != FormatJSON {
		return fmt.Errorf("%q: want text or json", format)
	}
	return nil
}

// New returns a logger writing to w as c says, through a logWriter;
// closing the Closer writes the lines still pending.
func New(w io.Writer, c Config) (*slog.Logger, io.Closer) {
	lw := newLogWriter(w, logFlushDelay)
	opts := &slog.HandlerOptions{Level: c.Level}
	handler := func(w io.Writer) slog.Handler {
		if c.Format == FormatJSON {
			return slog.NewJSONHandler(w, opts)
		}
		return slog.NewTextHandler(w, opts)
	}
	return slog.New(lw.handler(handler(lw), handler(&lw.batch))), lw
}

// RegisterMetrics registers the metrics of logger's queue
// (fencegate_log_records_dropped_total) on reg, when logger writes
// through one (New); other loggers have none.
func RegisterMetrics(reg prometheus.Registerer, logger *slog.Logger) error {
	h, ok := logger.Handler().(*queueHandler)
	if !ok {
		return nil
	}
	return reg.Register(h.lw.droppedCounter())
}
