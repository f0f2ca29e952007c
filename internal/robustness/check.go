package robustness

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"fencegate/api"
)

// writeAttempts is the gateways' rounds per write (gateway.Config's
// default WriteAttempts).
const writeAttempts = 3

// Violation is one broken guarantee.
type Violation struct {
	// Check names the checker: linearizability, versions-monotonic,
	// acked-committed, final-state, hwm-monotonic, hwm-covers,
	// fence-before-forward, refused-not-written, refusal-grounded,
	// members-agree, unexpected-answer; and for the partner shape
	// partner-exclusive, partner-tokens-monotonic, partner-plausible,
	// partner-at-most-once, partner-refused-not-forwarded,
	// partner-acked-forwarded, partner-unexpected-answer.
	Check  string
	Detail string
}

func (v Violation) String() string { return v.Check + ": " + v.Detail }

// ObjectState is an object as read back from versitygw directly.
type ObjectState struct {
	Exists bool
	Op     string
	Token  api.Token
}

// Evidence is everything the checkers read after a history.
type Evidence struct {
	Ops []Op
	// Keys are the history's objects.
	Keys []string
	// Writes are the S3 proxy's records of the history's keys
	// ("bucket/key"), in S3's order for each key.
	Writes []S3Write
	// HWMEvents are the watch record of each object's mark, by object key.
	HWMEvents map[string][]HWMEvent
	// WatchErr is set when the watch record is incomplete.
	WatchErr error
	// FinalHWM is each object's mark read linearizably at the end.
	FinalHWM map[string]api.Token
	// MemberHWM is each member's own (serializable) view of the marks.
	MemberHWM map[string]map[string]api.Token
	// Final is each object as versitygw holds it at the end.
	Final map[string]ObjectState
	// Partner is the partner shape's evidence; nil in a history without
	// it.
	Partner *PartnerEvidence
}

// PartnerEvidence is what the partner checkers read.
type PartnerEvidence struct {
	// Accounts are the history's accounts.
	Accounts []string
	// Ops are the workload's partner requests.
	Ops []PartnerOp
	// Calls are the requests that reached the partner, in arrival order.
	Calls []PartnerCall
	// HWM is each account's mark, read back through a gateway at the end.
	HWM map[string]api.Token
	// HWMEvents are the watch record of each account's mark.
	HWMEvents map[string][]HWMEvent
	// Revision is etcd's revision once the history is over: no lock of
	// the cluster issued a larger token, so a larger one is implausible.
	Revision int64
}

// CheckConfig tunes the checkers.
type CheckConfig struct {
	// LinearizabilityTimeout bounds porcupine. Zero means 30 seconds.
	LinearizabilityTimeout time.Duration
	// ArtifactDir receives porcupine's visualization of a failing
	// history. Empty means a new temporary directory.
	ArtifactDir string
	// Name names the history in file names.
	Name string
}

// CheckResult is what the checkers found.
type CheckResult struct {
	Violations []Violation
	// Linearizability is porcupine's verdict: Ok, Illegal or Unknown.
	Linearizability porcupine.CheckResult
	// Visualization is the HTML file of a history porcupine refused.
	Visualization string
}

// Check runs every checker over ev.
func Check(ev Evidence, cfg CheckConfig) CheckResult {
	if cfg.LinearizabilityTimeout == 0 {
		cfg.LinearizabilityTimeout = 30 * time.Second
	}
	var res CheckResult
	add := func(check, format string, args ...any) {
		res.Violations = append(res.Violations, Violation{Check: check, Detail: fmt.Sprintf(format, args...)})
	}

	// 1. Linearizability of each object as a fenced register.
	history := porcupineOps(ev.Ops)
	result, info := porcupine.CheckOperationsVerbose(registerModel, history, cfg.LinearizabilityTimeout)
	res.Linearizability = result
	if result == porcupine.Illegal {
		path, err := writeVisualization(info, cfg)
		res.Visualization = path
		if err != nil {
			add("linearizability", "porcupine found no linearization (visualization failed: %v)", err)
		} else {
			add("linearizability", "porcupine found no linearization; see %s", path)
		}
	}

	writesByKey := make(map[string][]S3Write)
	for _, w := range ev.Writes {
		key := strings.TrimPrefix(w.Key, Bucket+"/")
		writesByKey[key] = append(writesByKey[key], w)
	}
	committedOp := make(map[string]S3Write)
	for _, w := range ev.Writes {
		if w.Committed && w.Op != "" {
			committedOp[w.Op] = w
		}
	}

	// An object the harness placed in the bucket (a seed) is its first
	// version: no token, no write through the proxy.
	seeds := make(map[string]*S3Write)
	for _, op := range ev.Ops {
		if op.Kind == OpSeed {
			seeds[op.Key] = &S3Write{Key: Bucket + "/" + op.Key, Op: op.ID, Committed: true}
		}
	}

	for _, key := range ev.Keys {
		// 2. The versions of each object carry non-decreasing tokens.
		last := seeds[key]
		for i, w := range writesByKey[key] {
			if !w.Committed {
				continue
			}
			// A delete carries no token that S3 sees: it ends the
			// version, and the next one is compared with nothing.
			if !w.Deleted && last != nil && w.Token < last.Token {
				add("versions-monotonic", "%s: version by %s (token %d, %s via %s) replaced version by %s with larger token %d",
					key, w.Op, w.Token, w.Condition, w.Gateway, last.Op, last.Token)
			}
			last = &writesByKey[key][i]
		}
		// 4. What versitygw holds is the last committed version.
		final := ev.Final[key]
		switch {
		case last == nil && final.Exists:
			add("final-state", "%s: S3 holds %s (token %d) but no write committed through the proxy", key, final.Op, final.Token)
		case last != nil && last.Deleted && final.Exists:
			add("final-state", "%s: S3 holds %+v; the last committed change was a delete via %s (seq %d)", key, final, last.Gateway, last.Seq)
		case last != nil && !last.Deleted && (!final.Exists || final.Op != last.Op || final.Token != last.Token):
			add("final-state", "%s: S3 holds %+v; the last committed write was %s with token %d", key, final, last.Op, last.Token)
		}
		// 6, 7. The mark never decreased, and covers every version.
		events := ev.HWMEvents[key]
		var prev api.Token
		for _, e := range events {
			switch {
			case e.Deleted:
				add("hwm-monotonic", "%s: mark deleted at revision %d (was %d)", key, e.Revision, prev)
			case e.Raw != "":
				add("hwm-monotonic", "%s: mark %q at revision %d does not decode", key, e.Raw, e.Revision)
			case e.Token < prev:
				add("hwm-monotonic", "%s: mark went from %d down to %d at revision %d", key, prev, e.Token, e.Revision)
			}
			if !e.Deleted && e.Token > prev {
				prev = e.Token
			}
		}
		if ev.WatchErr == nil && len(events) > 0 && ev.FinalHWM[key] != events[len(events)-1].Token {
			add("hwm-monotonic", "%s: final mark %d but the watch's last event says %d", key, ev.FinalHWM[key], events[len(events)-1].Token)
		}
		if last != nil && ev.FinalHWM[key] < last.Token {
			add("hwm-covers", "%s: final mark %d is below the token %d of a committed version", key, ev.FinalHWM[key], last.Token)
		}
		// 10. Every member holds the same marks.
		for member, view := range ev.MemberHWM {
			if view[key] != ev.FinalHWM[key] {
				add("members-agree", "%s: %s holds mark %d, the cluster %d", key, member, view[key], ev.FinalHWM[key])
			}
		}
		// 8. Every token that reached S3 was accepted by a fence check:
		// etcd's history holds a mark with that exact token. (Not one put
		// per write: a holder's repeated checks of an unchanged mark are
		// read-only transactions.)
		if ev.WatchErr == nil {
			accepted := make(map[api.Token]bool)
			for _, e := range events {
				if !e.Deleted {
					accepted[e.Token] = true
				}
			}
			for _, w := range writesByKey[key] {
				if !w.Deleted && !accepted[w.Token] {
					add("fence-before-forward", "%s: write %s with token %d reached S3 via %s (seq %d), but no fence check ever accepted that token",
						key, w.Op, w.Token, w.Gateway, w.Seq)
				}
			}
		}
	}
	if ev.WatchErr != nil {
		add("hwm-monotonic", "the watch record is incomplete: %v", ev.WatchErr)
	}
	if ev.Partner != nil {
		res.Violations = append(res.Violations, checkPartners(*ev.Partner)...)
	}

	forwards := make(map[string]int)
	for _, w := range ev.Writes {
		forwards[w.Op]++
	}
	for _, op := range ev.Ops {
		if !op.Kind.changes() {
			continue
		}
		// 8. A request reaches S3 at most once per round (fence check,
		// then write), and one whose last fence check could not complete
		// was forwarded only in earlier rounds that lost their race.
		if n := forwards[op.ID]; n > writeAttempts {
			add("fence-before-forward", "%s: write %s reached S3 %d times; a request has at most %d rounds", op.Key, op.ID, n, writeAttempts)
		} else if op.ProblemType == api.ProblemTypePrefix+"fence-unavailable" && n >= writeAttempts {
			add("fence-before-forward", "%s: write %s was answered 503 fence-unavailable, yet reached S3 %d times", op.Key, op.ID, n)
		}
		w, committed := committedOp[op.ID]
		switch {
		case op.Kind == OpDelete:
			// S3's record cannot tell which request a delete was: the
			// model and the final state judge deletes.
		case op.Outcome == Acked:
			// 3, 5. An acked write is a version, and what replaced it
			// carries a token at least as large.
			if !committed {
				add("acked-committed", "%s: write %s (token %d) was acked by %s but never committed to S3", op.Key, op.ID, op.Token, op.Gateway)
			} else if f := ev.Final[op.Key]; !f.Exists || f.Token < op.Token {
				add("acked-committed", "%s: acked write %s (token %d) was superseded by %+v, not by a token at least as large", op.Key, op.ID, op.Token, f)
			}
		case op.Outcome == RefusedStale, op.Outcome == Refused:
			// 8. A refusal promises nothing was written.
			if committed {
				add("refused-not-written", "%s: write %s (token %d) was answered %d %s by %s, but S3 committed it (seq %d)",
					op.Key, op.ID, op.Token, op.Status, op.ProblemType, op.Gateway, w.Seq)
			}
		}
		// 9. A stale refusal names a mark that some client was given.
		if op.Outcome == RefusedStale && (op.HighWaterMark <= op.Token || !historyInvoked(ev.Ops, op.HighWaterMark, op.Return)) {
			add("refusal-grounded", "%s: write %s (token %d) refused with mark %d, which no write had carried by then", op.Key, op.ID, op.Token, op.HighWaterMark)
		}
		if strings.HasPrefix(op.Err, "unexpected answer") {
			add("unexpected-answer", "%s: write %s via %s: %s", op.Key, op.ID, op.Gateway, op.Err)
		}
	}
	return res
}

// historyInvoked reports whether a write with token was invoked at or
// before at.
func historyInvoked(ops []Op, token api.Token, at int64) bool {
	for _, op := range ops {
		if op.Kind.changes() && op.Token == token && op.Call <= at {
			return true
		}
	}
	return false
}

// writeVisualization writes porcupine's HTML view of a history.
func writeVisualization(info porcupine.LinearizationInfo, cfg CheckConfig) (string, error) {
	dir := cfg.ArtifactDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "fencegate-robustness-"); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := cfg.Name
	if name == "" {
		name = "history"
	}
	path := filepath.Join(dir, name+".html")
	return path, porcupine.VisualizePath(registerModel, info, path)
}

// Summary counts a history's operations.
type Summary struct {
	Ops, Writes, Reads, Acked, StaleRefused, Refused, Ambiguous, FailedReads int
	// AckedLatency is the mean latency of acked writes.
	AckedLatency time.Duration
}

// Summarize counts ops.
func Summarize(ops []Op) Summary {
	var s Summary
	for _, op := range ops {
		if op.Kind == OpSeed {
			continue // placed by the harness, not an operation of the workload
		}
		if op.Outcome == Failed {
			s.FailedReads++
			continue
		}
		s.Ops++
		if op.Kind == OpRead {
			s.Reads++
			continue
		}
		s.Writes++
		switch op.Outcome {
		case Acked:
			s.Acked++
			s.AckedLatency += time.Duration(op.Return - op.Call)
		case RefusedStale:
			s.StaleRefused++
		case Refused:
			s.Refused++
		case Ambiguous:
			s.Ambiguous++
		}
	}
	if s.Acked > 0 {
		s.AckedLatency /= time.Duration(s.Acked)
	}
	return s
}

// sortedKinds returns the kinds of m in AllFaults order.
func sortedKinds(m map[FaultKind]int) []FaultKind {
	var out []FaultKind
	for _, k := range AllFaults {
		if m[k] > 0 {
			out = append(out, k)
		}
	}
	var extra []FaultKind
	for k := range m {
		known := false
		for _, a := range AllFaults {
			known = known || a == k
		}
		if !known {
			extra = append(extra, k)
		}
	}
	sort.Slice(extra, func(i, j int) bool { return extra[i] < extra[j] })
	return append(out, extra...)
}
