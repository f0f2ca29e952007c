package zapslog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	z := Logger(l, zap.WarnLevel).Named("etcd").With(zap.String("member", "m1"))
	z.Info("dropped")
	z.Warn("slow", zap.Int("ms", 12), zap.Strings("urls", []string{"a"}))
	got := buf.String()
	if strings.Contains(got, "dropped") {
		t.Errorf("info entry passed a warn logger: %q", got)
	}
	for _, want := range []string{"level=WARN", `msg=slow`, "logger=etcd", "member=m1", "ms=12", "urls=[a]"} {
		if !strings.Contains(got, want) {
			t.Errorf("log = %q; want it to contain %q", got, want)
		}
	}
	Logger(nil, zap.DebugLevel).Error("nowhere") // must not panic
}
