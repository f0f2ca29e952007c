package edge

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"fencegate/api"
)

// noSpaceHintInterval is how often, at most, the edge logs what to do
// about etcd being out of space, whatever the number of failed writes.
const noSpaceHintInterval = time.Minute

// noSpaceHint is the log line that says what to do when etcd is out of
// space.
const noSpaceHint = "etcd is out of space (NOSPACE alarm): every fenced write fails with 503 until an operator frees space: " +
	"etcdctl compact <current revision>, etcdctl defrag (each member), then etcdctl alarm disarm"

// LogProblem logs the problem p that a door answered its request with,
// for err, beside the request's one line (Track): a failure (5xx) at
// ERROR with what the store answered, an audited refusal not at all (its
// audit line says it all: audited, from NoteProblem), any other refusal
// at DEBUG. When etcd is out of space it also says, at most once a
// minute, what an operator must do.
func (e *Edge) LogProblem(ctx context.Context, p api.Problem, err error, audited bool) {
	switch {
	case p.Status >= 500:
		e.Logger(ctx).Error("request failed", "status", p.Status, "err", err, "store_answer", api.StoreAnswer(err))
		if errors.Is(err, api.ErrNoSpace) {
			e.HintNoSpace()
		}
	case audited: // the "write refused" line says it all
	case e.log.Enabled(ctx, slog.LevelDebug):
		e.Logger(ctx).Debug("request refused", "status", p.Status, "err", err, "store_answer", api.StoreAnswer(err))
	}
}

// HintNoSpace logs, at most once per minute, what to do when etcd is out
// of space. The requests that fail meanwhile log their own lines; this
// one says how to end it.
func (e *Edge) HintNoSpace() {
	if e.noSpaceHints.allow(time.Now(), noSpaceHintInterval) {
		e.log.Error(noSpaceHint)
	}
}

// everyInterval lets something happen at most once per interval.
type everyInterval struct {
	last atomic.Int64 // unix nanoseconds of the last time; zero: never
}

// allow reports whether it may happen now, and if so notes that it did.
func (e *everyInterval) allow(now time.Time, interval time.Duration) bool {
	last := e.last.Load()
	if last != 0 && now.Sub(time.Unix(0, last)) < interval {
		return false
	}
	return e.last.CompareAndSwap(last, now.UnixNano())
}
