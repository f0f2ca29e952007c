package robustness

import (
	"cmp"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
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
	// members-agree, unexpected-answer, stale-abort, ticket-expired; and
	// for the partner shape partner-exclusive, partner-tokens-monotonic,
	// partner-plausible, partner-at-most-once,
	// partner-refused-not-forwarded, partner-acked-forwarded,
	// partner-unexpected-answer.
	Check  string
	Detail string
}

func (v Violation) String() string { return v.Check + ": " + v.Detail }

// ObjectState is an object as read back from its store directly.
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
	// Writes are the store proxy's records of the history's keys
	// ("bucket/key"), in the store's order for each key: S3's, or GCS's
	// in a GCS history.
	Writes []StoreWrite
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
	// Retention says the gateways' evictors could evict marks during the
	// history (see checkHWMMonotonic); without it no mark may be deleted.
	Retention bool
	// Store is the store of the history's objects: api.StoreS3 (empty
	// means it), in Bucket, or api.StoreGCS, in GCSBucket. Writes and
	// Final are that store's.
	Store string
}

// gcs reports whether the history's objects are in GCS.
func (ev Evidence) gcs() bool { return ev.Store == api.StoreGCS }

// bucket is the bucket of the history's objects.
func (ev Evidence) bucket() string {
	if ev.gcs() {
		return GCSBucket
	}
	return Bucket
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
	// Findings are named shapes of the history that break no guarantee
	// the gateway gives, but show one of its documented limits at work.
	Findings []Finding
	// Evictions counts the marks of the history's objects that an
	// evictor deleted while their objects recorded them (see
	// checkHWMMonotonic).
	Evictions int
	// ABARefused counts, in a GCS history, the writes GCS refused in the
	// ETag ABA shape (countRefusedABA): on S3 their condition would have
	// held.
	ABARefused int
}

// Finding is a documented limit seen at work in a history: not a
// violation, but named, so that a run says how often it happened.
type Finding struct {
	// Name names the shape: etag-aba.
	Name   string
	Detail string
	// Ticket says the finding's write was sent straight to the store on
	// a ticket, not by a gateway.
	Ticket bool
}

func (f Finding) String() string { return f.Name + ": " + f.Detail }

// Check runs every checker over ev: porcupine's linearizability check,
// then objectCheckers, then the partner shape's checkers (checkPartners)
// when ev has that shape. Each checker reports the guarantee it saw broken
// as Violations named after it.
//
// One documented limit of the S3 route is a named finding, not a
// violation: the ETag ABA shape (findETagABA). Its writes are excused from
// the checks they would otherwise break (the model lets them land,
// versions-monotonic and acked-committed pass over them), and only they.
// On GCS (Evidence.Store) nothing is excused: a conditional write names a
// generation, which no later version reuses, so the same shape there is a
// violation.
func Check(ev Evidence, cfg CheckConfig) CheckResult {
	ix := indexEvidence(ev)
	res := checkLinearizability(ix, cfg)
	res.Evictions = ix.evictedMarks()
	for _, aba := range ix.aba {
		res.Findings = append(res.Findings, aba.finding())
	}
	if ev.gcs() {
		res.ABARefused = countRefusedABA(ix)
	}
	for _, check := range objectCheckers {
		res.Violations = append(res.Violations, check(ix)...)
	}
	if ev.Partner != nil {
		res.Violations = append(res.Violations, checkPartners(*ev.Partner)...)
	}
	return res
}

// objectCheckers are the object shape's invariants, read from the store's
// record (S3's, or GCS's in a GCS history; "S3's record" below),
// etcd's watch record and the final state, in the order Check reports
// them.
var objectCheckers = []func(*indexedEvidence) []Violation{
	checkVersionsMonotonic,
	checkFinalState,
	checkHWMMonotonic,
	checkHWMCovers,
	checkMembersAgree,
	checkFenceBeforeForward,
	checkAckedCommitted,
	checkRefusedNotWritten,
	checkRefusalGrounded,
	checkUnexpectedAnswers,
	checkStaleAborts,
	checkTicketExpiry,
}

// indexedEvidence is Evidence with the indexes the checkers share.
type indexedEvidence struct {
	Evidence
	// writesByKey are S3's records of each object (key without the
	// bucket), in S3's order, committed or not.
	writesByKey map[string][]StoreWrite
	// committedOp is the committed write of each operation id.
	committedOp map[string]StoreWrite
	// seeds are the objects the harness placed in the bucket: each is its
	// object's first version, with no token and no write through the
	// proxy.
	seeds map[string]StoreWrite
	// last is each object's last committed version: its last committed
	// write or delete, or its seed; absent for an object that never had
	// one.
	last map[string]StoreWrite
	// forwards counts the writes S3 received for each operation id.
	forwards map[string]int
	// aba are the writes that landed by the ETag ABA shape, in S3's
	// order; abaSeq holds their sequence numbers.
	aba    []etagABA
	abaSeq map[int64]bool
	// deletes are the deletes of each object's mark in the watch record,
	// judged (see judgeMarkDeletes), by their revision.
	deletes map[string]map[int64]markDelete
}

func indexEvidence(ev Evidence) *indexedEvidence {
	ix := &indexedEvidence{Evidence: ev, writesByKey: make(map[string][]StoreWrite), committedOp: make(map[string]StoreWrite),
		seeds: make(map[string]StoreWrite), last: make(map[string]StoreWrite), forwards: make(map[string]int)}
	for _, op := range ev.Ops {
		if op.Kind == OpSeed {
			ix.seeds[op.Key] = StoreWrite{Key: ev.bucket() + "/" + op.Key, Op: op.ID, Committed: true}
			ix.last[op.Key] = ix.seeds[op.Key]
		}
	}
	for _, w := range ev.Writes {
		key := strings.TrimPrefix(w.Key, ev.bucket()+"/")
		ix.writesByKey[key] = append(ix.writesByKey[key], w)
		ix.forwards[w.Op]++
		if w.Committed {
			ix.last[key] = w
			if w.Op != "" {
				ix.committedOp[w.Op] = w
			}
		}
	}
	if ev.gcs() {
		ix.Ops = withGenerations(ev.Ops, ix.committedOp)
	} else {
		ix.aba = findETagABA(ix)
	}
	ix.abaSeq = make(map[int64]bool)
	for _, a := range ix.aba {
		ix.abaSeq[a.write.Seq] = true
	}
	ix.deletes = make(map[string]map[int64]markDelete)
	for _, key := range ix.Keys {
		ix.deletes[key] = ix.judgeMarkDeletes(key)
	}
	return ix
}

// withGenerations returns a copy of a GCS history's ops in which each
// write carries, as its ETag, the generation it created: the workload
// knows it only from an acked write's answer, so an ambiguous write that
// landed takes it from the GCS proxy's record (committed, by op id). An
// acked write whose answer names another generation than the record is an
// unexpected answer.
func withGenerations(ops []Op, committed map[string]StoreWrite) []Op {
	out := slices.Clone(ops)
	for i, op := range out {
		w, ok := committed[op.ID]
		if op.Kind != OpWrite || !ok {
			continue
		}
		switch {
		case op.ETag == "":
			out[i].ETag = w.ETag
		case op.ETag != w.ETag && op.Err == "":
			out[i].Err = fmt.Sprintf("unexpected answer: ETag %s, but GCS created generation %s", op.ETag, w.ETag)
		}
	}
	return out
}

// countRefusedABA counts, in a GCS history's record, the writes that GCS
// refused (412) in the ETag ABA shape: conditional on generation G, whose
// version holds the same bytes as the version current when the write
// arrived, another generation, with a larger token than the write's. On
// S3 the same write's If-Match, on the ETag of those bytes, would have
// held: the stale write would have landed (etag-aba).
func countRefusedABA(ix *indexedEvidence) int {
	n := 0
	for _, key := range ix.Keys {
		byGeneration := make(map[string]StoreWrite)
		var current StoreWrite
		exists := false
		for _, w := range ix.writesByKey[key] {
			switch {
			case w.Committed && w.Deleted:
				exists = false
			case w.Committed:
				byGeneration[w.ETag], current, exists = w, w, true
			case w.Status == http.StatusPreconditionFailed && exists:
				gen, ok := strings.CutPrefix(w.Condition, "ifGenerationMatch=")
				observed, seen := byGeneration[`"`+gen+`"`]
				if ok && seen && observed.ETag != current.ETag && observed.BodyETag == current.BodyETag && current.Token > w.Token {
					n++
				}
			}
		}
	}
	return n
}

// markDelete is a delete of an object's mark in the watch record.
type markDelete struct {
	// token is the mark deleted: the value of the record's last event
	// before the delete (zero if there is none).
	token api.Token
	// evicted says the delete is an eviction that mark retention allows:
	// retention was on, and the object recorded token (its fence-token
	// metadata) at a moment when the delete may have happened.
	evicted bool
	// unjudged says the delete is a resynchronization's: the watcher met
	// a compacted revision, and the changes before it are lost to the
	// record, so which mark went, and when, is unknown.
	unjudged bool
}

// judgeMarkDeletes judges every delete of key's mark in the watch record.
//
// With mark retention, an evictor deletes a mark when its object records
// the mark's token, by a transaction that compares the mod revision it
// read before it observed the object: a raise in between fails it. So
// when the delete happens, the object still records that token: every
// write that could change the object since the observation raised the
// mark, except one whose token equals the mark (its fence check confirms
// the mark without writing), and a write of that token leaves the object
// recording it. Hence the rule checked here: at some moment between the
// delete's bounds (HWMEvent.After and Before, from etcd's revision clock
// and the watcher), the object's current version in S3's record carries
// the deleted mark's token. A version is current from when the S3 proxy
// received it (At) until the answer to the next committed change of the
// object (its Done): wider than the truth, so that timing never makes a
// violation of a legitimate eviction. A delete of a tombstone (the object
// absent) or of a mark its object never recorded is no eviction.
func (ix *indexedEvidence) judgeMarkDeletes(key string) map[int64]markDelete {
	out := make(map[int64]markDelete)
	var current api.Token // the mark's value as the record goes
	for _, e := range ix.HWMEvents[key] {
		if !e.Deleted {
			current = e.Token
			continue
		}
		d := markDelete{token: current, unjudged: e.Resync}
		d.evicted = ix.Retention && !e.Resync && current != 0 && ix.recordedDuring(key, current, e.After, e.Before)
		out[e.Revision] = d
		current = 0
	}
	return out
}

// recordedDuring reports whether, by S3's record, a version of key that
// carries token was current at some moment between from and to (a zero
// bound is no bound).
func (ix *indexedEvidence) recordedDuring(key string, token api.Token, from, to time.Time) bool {
	var committed []StoreWrite
	for _, w := range ix.writesByKey[key] {
		if w.Committed {
			committed = append(committed, w)
		}
	}
	for i, v := range committed {
		if v.Deleted || v.Token != token {
			continue
		}
		if !to.IsZero() && !v.At.IsZero() && !v.At.Before(to) {
			continue // created after the delete
		}
		if i+1 < len(committed) && !from.IsZero() {
			if next := committed[i+1]; !next.Done.IsZero() && !next.Done.After(from) {
				continue // replaced before the delete
			}
		}
		return true
	}
	return false
}

// evictedMarks counts the evictions of marks of the history's objects.
func (ix *indexedEvidence) evictedMarks() int {
	n := 0
	for _, deletes := range ix.deletes {
		for _, d := range deletes {
			if d.evicted {
				n++
			}
		}
	}
	return n
}

// markLeft reports whether key's mark was deleted, by an eviction or by a
// delete the record cannot judge, during a history with retention; or, in
// such a history, a resynchronization found it lower than before (the
// compacted changes may hold an eviction and a lower restart).
func (ix *indexedEvidence) markLeft(key string) bool {
	if !ix.Retention {
		return false
	}
	for _, d := range ix.deletes[key] {
		if d.evicted || d.unjudged {
			return true
		}
	}
	var prev api.Token
	for _, e := range ix.HWMEvents[key] {
		if e.Resync && !e.Deleted && e.Token < prev {
			return true
		}
		prev = max(prev, e.Token)
	}
	return false
}

// etagABA is a write that landed by the ETag ABA shape. Conditional on
// If-Match E, it replaced a version with a larger token (replaced) that
// holds the bytes of an earlier version it observed (observed). Or,
// conditional on If-None-Match: *, it replaced a delete (replaced), the
// object having been absent when it observed it, and since then created
// by a version with a larger token (skipped).
type etagABA struct {
	key                                string
	write, replaced, observed, skipped StoreWrite
}

func (a etagABA) finding() Finding {
	via := a.write.via()
	if a.replaced.Deleted {
		return Finding{Name: "etag-aba", Ticket: a.write.Ticket, Detail: fmt.Sprintf(
			"%s: write %s (token %d, %s %s, seq %d) created the object after a delete (seq %d); the writer observed it absent, before version %s (token %d, seq %d) created it: its conditional PUT sees only that the object is absent",
			a.key, a.write.Op, a.write.Token, a.write.Condition, via, a.write.Seq, a.replaced.Seq, a.skipped.Op, a.skipped.Token, a.skipped.Seq)}
	}
	return Finding{Name: "etag-aba", Ticket: a.write.Ticket, Detail: fmt.Sprintf(
		"%s: write %s (token %d, %s %s, seq %d) replaced version %s (token %d, seq %d), which holds the bytes of the earlier version %s (token %d, seq %d) that the writer observed: its conditional PUT compares ETags, not versions",
		a.key, a.write.Op, a.write.Token, a.write.Condition, via, a.write.Seq,
		a.replaced.Op, a.replaced.Token, a.replaced.Seq, a.observed.Op, a.observed.Token, a.observed.Seq)}
}

// abaAbsent is what abaOn gives a write that landed by the ETag ABA shape
// on an absent object: no ETag is "*".
const abaAbsent = "*"

// findETagABA finds, in S3's record, the writes that landed by the ETag
// ABA shape, the documented limit of the S3 route: a write, conditional on
// If-Match E, replaced a version with a larger token whose ETag is E, and
// an earlier version with ETag E and a token at most the write's exists.
// The writer observed that earlier version (observe refuses a token below
// the version's own), passed its fence check, and stalled; meanwhile
// larger tokens wrote, and the last of them put back the exact bytes it
// had observed, so its If-Match held. Likewise a write conditional on
// If-None-Match: * that replaced a delete, when the object was absent
// before (at the start, or after an earlier delete) and a version with a
// larger token than the write's was created since: the writer observed
// the absence, and the object went back to it.
//
// Where the writer stalled does not change the shape: between fence check
// and PUT (the mark has not reached its token yet when it checks), or,
// once marks can be evicted after a retention, between observation and
// fence check for longer than the retention (the mark it is checked
// against is gone); both are named etag-aba. A write conditional on an
// ETag that no earlier version with a token at most its own had is not
// this shape: the checkers flag it. (S3's record gives a delete no token:
// a create after a delete that skipped no larger version is not named,
// and the model judges it against the delete's token.)
func findETagABA(ix *indexedEvidence) []etagABA {
	var out []etagABA
	for _, key := range ix.Keys {
		seed, seeded := ix.seeds[key]
		var versions []StoreWrite // committed, in S3's order
		if seeded {
			versions = append(versions, seed)
		}
		for _, w := range ix.writesByKey[key] {
			if !w.Committed {
				continue
			}
			if !w.Deleted && len(versions) > 0 {
				if a, ok := abaOf(w, versions, !seeded); ok {
					a.key = key
					out = append(out, a)
				}
			}
			versions = append(versions, w)
		}
	}
	return out
}

// abaOf reports whether write w, committed after versions (committed, in
// S3's order; absentAtStart when the object did not exist before the
// first), landed by the ETag ABA shape.
func abaOf(w StoreWrite, versions []StoreWrite, absentAtStart bool) (etagABA, bool) {
	replaced, earlier := versions[len(versions)-1], versions[:len(versions)-1]
	if etag, ok := ifMatch(w.Condition); ok {
		if replaced.Deleted || replaced.ETag != etag || replaced.Token <= w.Token {
			return etagABA{}, false
		}
		for _, observed := range earlier {
			if !observed.Deleted && observed.ETag == etag && observed.Token <= w.Token {
				return etagABA{write: w, replaced: replaced, observed: observed}, true
			}
		}
		return etagABA{}, false
	}
	if w.Condition != "If-None-Match: *" || !replaced.Deleted {
		return etagABA{}, false
	}
	// An absence before replaced, then a version with a larger token.
	absent := absentAtStart
	for _, v := range earlier {
		switch {
		case v.Deleted:
			absent = true
		case absent && v.Token > w.Token:
			return etagABA{write: w, replaced: replaced, skipped: v}, true
		}
	}
	return etagABA{}, false
}

// ifMatch returns the ETag of a condition `If-Match: E` as the S3 proxy
// records it.
func ifMatch(condition string) (string, bool) {
	etag, ok := strings.CutPrefix(condition, "If-Match: ")
	return etag, ok && etag != "" && !strings.Contains(etag, ";")
}

// changeOps returns the history's writes and deletes.
func (ix *indexedEvidence) changeOps() []Op {
	var out []Op
	for _, op := range ix.Ops {
		if op.Kind.changes() {
			out = append(out, op)
		}
	}
	return out
}

// answeredOps returns the history's writes, deletes and ticket requests:
// the requests whose answers say what was, or may have been, written
// (a ticket request's stale refusal is a PUT's).
func (ix *indexedEvidence) answeredOps() []Op {
	var out []Op
	for _, op := range ix.Ops {
		if op.Kind.changes() || op.Kind == OpTicket {
			out = append(out, op)
		}
	}
	return out
}

// checkLinearizability (linearizability): each object, as a fenced
// register (registerModel), has a linearization of the history. A refused
// history's visualization is written to cfg.ArtifactDir.
//
// A write that landed by the ETag ABA shape may land on the version it
// replaced whatever its token (see registerInput.abaOn).
func checkLinearizability(ix *indexedEvidence, cfg CheckConfig) CheckResult {
	if cfg.LinearizabilityTimeout == 0 {
		cfg.LinearizabilityTimeout = 30 * time.Second
	}
	var res CheckResult
	result, info := porcupine.CheckOperationsVerbose(registerModel, registerOps(ix.Ops, ix.abaOn()), cfg.LinearizabilityTimeout)
	res.Linearizability = result
	if result == porcupine.Illegal {
		path, err := writeVisualization(info, cfg)
		res.Visualization = path
		if err != nil {
			res.Violations = append(res.Violations, violation("linearizability", "porcupine found no linearization (visualization failed: %v)", err))
		} else {
			res.Violations = append(res.Violations, violation("linearizability", "porcupine found no linearization; see %s", path))
		}
	}
	return res
}

// abaOn returns, for each operation whose write landed by the ETag ABA
// shape, the ETag its If-Match named.
func (ix *indexedEvidence) abaOn() map[string]string {
	out := make(map[string]string)
	for _, a := range ix.aba {
		if a.replaced.Deleted {
			out[a.write.Op] = abaAbsent
		} else {
			out[a.write.Op], _ = ifMatch(a.write.Condition)
		}
	}
	return out
}

// checkVersionsMonotonic (versions-monotonic): the versions of each
// object, in S3's order, carry non-decreasing tokens. A delete carries no
// token that S3 sees: it ends the version, and the next one is compared
// with nothing. A write that landed by the ETag ABA shape is a finding.
func checkVersionsMonotonic(ix *indexedEvidence) []Violation {
	var out []Violation
	for _, key := range ix.Keys {
		last, ok := ix.seeds[key]
		for _, w := range ix.writesByKey[key] {
			if !w.Committed {
				continue
			}
			if !w.Deleted && ok && w.Token < last.Token && !ix.abaSeq[w.Seq] {
				out = append(out, violation("versions-monotonic", "%s: version by %s (token %d, %s %s) replaced version by %s with larger token %d",
					key, w.Op, w.Token, cmp.Or(w.Condition, "no condition"), w.via(), last.Op, last.Token))
			}
			last, ok = w, true
		}
	}
	return out
}

// checkFinalState (final-state): what versitygw holds at the end is each
// object's last committed version (nothing after a delete).
func checkFinalState(ix *indexedEvidence) []Violation {
	var out []Violation
	for _, key := range ix.Keys {
		last, ok := ix.last[key]
		final := ix.Final[key]
		switch {
		case !ok && final.Exists:
			out = append(out, violation("final-state", "%s: S3 holds %s (token %d) but no write committed through the proxy", key, final.Op, final.Token))
		case ok && last.Deleted && final.Exists:
			out = append(out, violation("final-state", "%s: S3 holds %+v; the last committed change was a delete via %s (seq %d)", key, final, last.Gateway, last.Seq))
		case ok && !last.Deleted && (!final.Exists || final.Op != last.Op || final.Token != last.Token):
			out = append(out, violation("final-state", "%s: S3 holds %+v; the last committed write was %s with token %d", key, final, last.Op, last.Token))
		}
	}
	return out
}

// checkHWMMonotonic (hwm-monotonic): each object's mark, as etcd's watch
// recorded it, never decreased, always decoded, and ends where the
// linearizable read at the end found it; and the watch record is
// complete. Without mark retention it was never deleted either.
//
// With retention (Evidence.Retention), a delete of the mark is allowed
// when it is an eviction (judgeMarkDeletes: the object recorded the mark's
// token when it happened), and after it the mark starts again from
// nothing, so it may come back lower: a stale writer that observed the
// object before the eviction creates it again in its fence check, and is
// then refused by its conditional write, and any later writer by the token
// on the object. That lower restart is what the retention argument allows;
// a mark that goes down without a delete between, or a delete of a mark
// its object did not record (a tombstone, or a mark raised by a write that
// has not landed), is still a violation. A resynchronization's delete, or
// a resynchronization's value below the last one seen, cannot be judged
// under retention: the compacted changes in between may hold an eviction.
func checkHWMMonotonic(ix *indexedEvidence) []Violation {
	var out []Violation
	for _, key := range ix.Keys {
		events := ix.HWMEvents[key]
		var prev api.Token // the mark's largest value since it was last deleted
		for _, e := range events {
			switch {
			case e.Deleted:
				d := ix.deletes[key][e.Revision]
				switch {
				case d.evicted, d.unjudged && ix.Retention:
				case !ix.Retention:
					out = append(out, violation("hwm-monotonic", "%s: mark deleted at revision %d (was %d)", key, e.Revision, prev))
				default:
					out = append(out, violation("hwm-monotonic", "%s: mark %d deleted at revision %d, but its object did not record token %d then (S3's versions: %s): no eviction deletes it",
						key, d.token, e.Revision, d.token, ix.versionsString(key)))
				}
				prev = 0
			case e.Raw != "":
				out = append(out, violation("hwm-monotonic", "%s: mark %q at revision %d does not decode", key, e.Raw, e.Revision))
			case e.Token < prev && !(e.Resync && ix.Retention):
				out = append(out, violation("hwm-monotonic", "%s: mark went from %d down to %d at revision %d", key, prev, e.Token, e.Revision))
			}
			if e.Deleted || e.Resync && ix.Retention && e.Token < prev {
				prev = e.Token
			} else if e.Token > prev {
				prev = e.Token
			}
		}
		if ix.WatchErr == nil && len(events) > 0 && ix.FinalHWM[key] != events[len(events)-1].Token {
			out = append(out, violation("hwm-monotonic", "%s: final mark %d but the watch's last event says %d", key, ix.FinalHWM[key], events[len(events)-1].Token))
		}
	}
	if ix.WatchErr != nil {
		out = append(out, violation("hwm-monotonic", "the watch record is incomplete: %v", ix.WatchErr))
	}
	return out
}

// versionsString lists key's committed versions in S3's order, for a
// violation's detail: "x(5) y(7) delete".
func (ix *indexedEvidence) versionsString(key string) string {
	var parts []string
	for _, w := range ix.writesByKey[key] {
		switch {
		case !w.Committed:
		case w.Deleted:
			parts = append(parts, fmt.Sprintf("delete@%s", w.At.Format("15:04:05.000")))
		default:
			parts = append(parts, fmt.Sprintf("%s(%d)@%s", w.Op, w.Token, w.At.Format("15:04:05.000")))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// checkHWMCovers (hwm-covers): each object's final mark is at least the
// token of its last committed version.
//
// Once its mark was evicted (or deleted where a resynchronization cannot
// tell), an object's mark may be absent, or lower after a stale writer's
// fence check created it again: what refuses stale writers then is the
// token the object records, which observe compares before any fence check.
// So for such an object the final object's own token must cover its last
// committed version instead (final-state checks that it is that version).
func checkHWMCovers(ix *indexedEvidence) []Violation {
	var out []Violation
	for _, key := range ix.Keys {
		last, ok := ix.last[key]
		if ok && ix.markLeft(key) && ix.Final[key].Exists && ix.Final[key].Token >= last.Token {
			continue
		}
		if ok && ix.FinalHWM[key] < last.Token {
			out = append(out, violation("hwm-covers", "%s: final mark %d is below the token %d of a committed version", key, ix.FinalHWM[key], last.Token))
		}
	}
	return out
}

// checkMembersAgree (members-agree): every etcd member holds the same
// marks as the cluster.
func checkMembersAgree(ix *indexedEvidence) []Violation {
	var out []Violation
	for _, key := range ix.Keys {
		for member, view := range ix.MemberHWM {
			if view[key] != ix.FinalHWM[key] {
				out = append(out, violation("members-agree", "%s: %s holds mark %d, the cluster %d", key, member, view[key], ix.FinalHWM[key]))
			}
		}
	}
	return out
}

// checkFenceBeforeForward (fence-before-forward): every token that reached
// S3 was accepted by a fence check: etcd's history holds a mark with that
// exact token. (Not one put per write: a holder's repeated checks of an
// unchanged mark are read-only transactions.) And a request reaches S3 at
// most once per round (fence check, then write), and one whose last fence
// check could not complete was forwarded only in earlier rounds that lost
// their race.
//
// Where the watcher met a compacted revision and resynchronized, the marks
// between its previous event and the Resync event are lost to the record:
// a token in that gap (above the largest mark before it, at most the
// resync's) cannot be shown accepted or not, and is not judged.
//
// Mark retention changes nothing here: a fence check that finds the mark
// evicted accepts any token by writing the mark, which the record holds
// like any raise; only a mark equal to the token is confirmed without a
// write, and that mark is in the record already. What eviction changes is
// the gaps: after a delete the mark starts again from nothing, and a gap
// under retention may hide an eviction and a lower restart, so its lower
// bound is then zero, not the largest mark before it.
func checkFenceBeforeForward(ix *indexedEvidence) []Violation {
	var out []Violation
	if ix.WatchErr == nil {
		for _, key := range ix.Keys {
			accepted := make(map[api.Token]bool)
			type gap struct{ above, upTo api.Token }
			var gaps []gap
			var prev api.Token
			for _, e := range ix.HWMEvents[key] {
				if e.Deleted {
					prev = 0 // the mark starts again from nothing
					continue
				}
				accepted[e.Token] = true
				if e.Resync {
					above := prev
					if ix.Retention {
						above = 0 // the gap may hide an eviction and a lower restart
					}
					gaps = append(gaps, gap{above: above, upTo: e.Token})
				}
				prev = max(prev, e.Token)
			}
			inGap := func(t api.Token) bool {
				return slices.ContainsFunc(gaps, func(g gap) bool { return g.above < t && t <= g.upTo })
			}
			for _, w := range ix.writesByKey[key] {
				if !w.Deleted && !accepted[w.Token] && !inGap(w.Token) {
					out = append(out, violation("fence-before-forward", "%s: write %s with token %d reached S3 via %s (seq %d), but no fence check ever accepted that token",
						key, w.Op, w.Token, w.Gateway, w.Seq))
				}
			}
		}
	}
	for _, op := range ix.changeOps() {
		if n := ix.forwards[op.ID]; n > writeAttempts {
			out = append(out, violation("fence-before-forward", "%s: write %s reached S3 %d times; a request has at most %d rounds", op.Key, op.ID, n, writeAttempts))
		} else if op.ProblemType == api.ProblemTypePrefix+"fence-unavailable" && n >= writeAttempts {
			out = append(out, violation("fence-before-forward", "%s: write %s was answered 503 fence-unavailable, yet reached S3 %d times", op.Key, op.ID, n))
		}
	}
	return out
}

// checkAckedCommitted (acked-committed): an acked write is a version in
// S3's record, and what replaced it carries a token at least as large.
// Deletes are left out: S3's record cannot tell which request a delete
// was, so the model and the final state judge them. A version superseded
// by a write that landed by the ETag ABA shape (and then by nothing with
// a smaller token than that write's) is a finding.
func checkAckedCommitted(ix *indexedEvidence) []Violation {
	var out []Violation
	for _, op := range ix.changeOps() {
		if op.Kind != OpWrite || op.Outcome != Acked {
			continue
		}
		if w, committed := ix.committedOp[op.ID]; !committed {
			out = append(out, violation("acked-committed", "%s: write %s (token %d) was acked by %s but never committed to S3", op.Key, op.ID, op.Token, op.Gateway))
		} else if f := ix.Final[op.Key]; (!f.Exists || f.Token < op.Token) && !ix.supersededByABA(op.Key, w, f) {
			out = append(out, violation("acked-committed", "%s: acked write %s (token %d) was superseded by %+v, not by a token at least as large", op.Key, op.ID, op.Token, f))
		}
	}
	return out
}

// supersededByABA reports whether version v of key was superseded by a
// write that landed by the ETag ABA shape, and final carries at least that
// write's token.
func (ix *indexedEvidence) supersededByABA(key string, v StoreWrite, final ObjectState) bool {
	for _, a := range ix.aba {
		if a.key == key && a.write.Seq > v.Seq && final.Exists && final.Token >= a.write.Token {
			return true
		}
	}
	return false
}

// checkRefusedNotWritten (refused-not-written): a write refused with an
// answer that promises nothing was written (stale token, conflict, fence
// unavailable) is no version in S3's record. Deletes are left out, as in
// checkAckedCommitted.
func checkRefusedNotWritten(ix *indexedEvidence) []Violation {
	var out []Violation
	for _, op := range ix.changeOps() {
		if op.Kind != OpWrite || op.Outcome != RefusedStale && op.Outcome != Refused {
			continue
		}
		if w, committed := ix.committedOp[op.ID]; committed {
			out = append(out, violation("refused-not-written", "%s: write %s (token %d) was answered %d %s by %s, but S3 committed it (seq %d)",
				op.Key, op.ID, op.Token, op.Status, op.ProblemType, op.Gateway, w.Seq))
		}
	}
	return out
}

// checkRefusalGrounded (refusal-grounded): a stale refusal (of a write, a
// delete or a ticket request) names a mark above the refused token that
// some write had carried by the time of the answer.
func checkRefusalGrounded(ix *indexedEvidence) []Violation {
	var out []Violation
	for _, op := range ix.answeredOps() {
		if op.Outcome == RefusedStale && (op.HighWaterMark <= op.Token || !historyInvoked(ix.Ops, op.HighWaterMark, op.Return)) {
			out = append(out, violation("refusal-grounded", "%s: write %s (token %d) refused with mark %d, which no write had carried by then", op.Key, op.ID, op.Token, op.HighWaterMark))
		}
	}
	return out
}

// checkUnexpectedAnswers (unexpected-answer): every answer to a write, a
// delete or a ticket request is one the gateway can give, and every
// answer to a write on a ticket one the store can give.
func checkUnexpectedAnswers(ix *indexedEvidence) []Violation {
	var out []Violation
	for _, op := range ix.answeredOps() {
		if strings.HasPrefix(op.Err, "unexpected answer") {
			out = append(out, violation("unexpected-answer", "%s: write %s via %s: %s", op.Key, op.ID, op.Gateway, op.Err))
		}
	}
	return out
}

// checkStaleAborts (stale-abort): no abort of a multipart upload by the
// store's id (the id ListMultipartUploads shows to anyone who may read the
// bucket) was accepted with a token below the token the upload is bound
// to. Such an abort proves nothing but the token it carries; the gateway
// takes the upload's token or a larger one (a newer holder clearing an
// older holder's upload), and since the upload's create raised the mark
// to its token, a smaller one is a stale holder's: 409 below the mark,
// else 400. An accepted one would let a holder whose grant has passed
// throw away a newer holder's upload.
func checkStaleAborts(ix *indexedEvidence) []Violation {
	var out []Violation
	for _, op := range ix.Ops {
		if op.Kind == OpUploadAbort && op.ByStoreID && op.Outcome == Acked && op.Token < op.UploadToken {
			out = append(out, violation("stale-abort", "%s: abort %s of upload %s (bound to token %d) by the store's id with token %d was accepted (%d) by %s",
				op.Key, op.ID, op.Upload, op.UploadToken, op.Token, op.Status, op.Gateway))
		}
	}
	return out
}

// checkTicketExpiry (ticket-expired): no write sent on a ticket after the
// ticket expired (by ticketExpiryMargin at least) landed: the store
// refuses it (403), so that the ETag ABA window of a ticket's write
// (docs/guarantees.md) lasts no longer than the ticket. A write whose
// answer was lost counts if the store's record shows it committed.
func checkTicketExpiry(ix *indexedEvidence) []Violation {
	var out []Violation
	for _, op := range ix.changeOps() {
		if !op.Ticket.expired() {
			continue
		}
		if w, committed := ix.committedOp[op.ID]; committed || op.Outcome == Acked {
			out = append(out, violation("ticket-expired", "%s: write %s (token %d) on a ticket of %s that expired at %s was sent at %s and landed (seq %d, answered %d)",
				op.Key, op.ID, op.Token, op.Gateway, op.Ticket.ExpiresAt.Format("15:04:05.000"), op.Ticket.SentAt.Format("15:04:05.000"), w.Seq, op.Status))
		}
	}
	return out
}

// historyInvoked reports whether a write with token was invoked at or
// before at. A multipart upload's create counts: its fence check raises
// the mark to its token before any part is sent; so does a ticket
// request, whose ticket may never be used.
func historyInvoked(ops []Op, token api.Token, at int64) bool {
	for _, op := range ops {
		if (op.Kind.changes() || op.Kind == OpUploadCreate || op.Kind == OpTicket) && op.Token == token && op.Call <= at {
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
		if op.Kind == OpSeed || op.Kind.step() {
			continue // placed by the harness, or a step of an upload or a ticket request (MultipartFigures and TicketFigures count those)
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
