// Package zapslog passes zap log entries to a *slog.Logger: etcd's server
// and client log through zap, and this lets them share the program's slog
// handler.
package zapslog

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Logger returns a zap logger that passes entries of level minLevel and
// above to l, as slog records with the entry's fields as attributes. etcd's
// server and client log through zap; this lets them share the program's
// slog handler. A nil l gives a logger that discards everything.
func Logger(l *slog.Logger, minLevel zapcore.Level) *zap.Logger {
	if l == nil {
		return zap.NewNop()
	}
	return zap.New(&slogCore{logger: l, minLevel: minLevel})
}

// Core is the zapcore.Core of Logger, for a caller that wraps it
// (the embedded etcd's logger in internal/devstack does). l must not be
// nil.
func Core(l *slog.Logger, minLevel zapcore.Level) zapcore.Core {
	return &slogCore{logger: l, minLevel: minLevel}
}

// slogCore is a zapcore.Core that writes to a *slog.Logger.
type slogCore struct {
	logger   *slog.Logger
	minLevel zapcore.Level
	attrs    []slog.Attr // from With
}

var _ zapcore.Core = (*slogCore)(nil)

func (c *slogCore) Enabled(level zapcore.Level) bool {
	return level >= c.minLevel && c.logger.Enabled(context.Background(), slogLevel(level))
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	clone := *c
	clone.attrs = append(slices.Clip(c.attrs), fieldAttrs(fields)...)
	return &clone
}

func (c *slogCore) Check(entry zapcore.Entry, checked *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(entry.Level) {
		return checked.AddCore(entry, c)
	}
	return checked
}

func (c *slogCore) Write(entry zapcore.Entry, fields []zapcore.Field) error {
	attrs := make([]slog.Attr, 0, len(c.attrs)+len(fields)+1)
	if entry.LoggerName != "" {
		attrs = append(attrs, slog.String("logger", entry.LoggerName))
	}
	attrs = append(attrs, c.attrs...)
	attrs = append(attrs, fieldAttrs(fields)...)
	c.logger.LogAttrs(context.Background(), slogLevel(entry.Level), entry.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

// fieldAttrs turns zap fields into slog attributes, sorted by key.
func fieldAttrs(fields []zapcore.Field) []slog.Attr {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields))
	for _, k := range slices.Sorted(maps.Keys(enc.Fields)) {
		attrs = append(attrs, slog.Any(k, enc.Fields[k]))
	}
	return attrs
}

// slogLevel maps a zap level to the slog level of the same name; DPanic,
// Panic and Fatal are errors.
func slogLevel(level zapcore.Level) slog.Level {
	switch {
	case level < zapcore.InfoLevel:
		return slog.LevelDebug
	case level == zapcore.InfoLevel:
		return slog.LevelInfo
	case level == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}
