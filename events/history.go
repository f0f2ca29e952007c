package events

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrBadPosition is ParsePosition's error for what is not an event id.
var ErrBadPosition = errors.New("not an event id")

// maxRunLen bounds a Position's Run: a Hub's own is runBytes*2 long; ids
// of other runs of the feed are accepted up to this.
const maxRunLen = 32

// runBytes is how many random bytes name a Hub's run.
const runBytes = 6

// Position is a place in a Hub's sequence of events: just after the event
// numbered Seq of the run named Run. It is what an event's SSE id says
// ("<run>-<seq>"), so that a subscriber that reconnects with the last id
// it read (Last-Event-ID) resumes right after it.
type Position struct {
	// Run names the run of the Hub that numbered the events (Hub.Run):
	// each Hub numbers its events from 1, so a seq means something only
	// with its run. "" means the run of the Hub it is given to.
	Run string
	// Seq is the last event's number; 0 is before the first.
	Seq uint64
}

// String returns p as an event id: "<run>-<seq>", or "<seq>" without a
// run. ParsePosition reads it back.
func (p Position) String() string {
	if p.Run == "" {
		return strconv.FormatUint(p.Seq, 10)
	}
	return p.Run + "-" + strconv.FormatUint(p.Seq, 10)
}

// ParsePosition reads an event id: "<run>-<seq>" as the feed's ids are,
// run being 1 to 32 letters and digits, or a bare "<seq>", meaning the
// run of the Hub it is given to. seq is a decimal without sign or
// leading zeros, below 2^64. Anything else is ErrBadPosition.
func ParsePosition(s string) (Position, error) {
	run, seq, found := strings.Cut(s, "-")
	if !found {
		run, seq = "", s
	} else if run == "" || len(run) > maxRunLen || strings.IndexFunc(run, notAlphanumeric) >= 0 {
		return Position{}, fmt.Errorf("%w: %.80q: want <run>-<seq>, the run 1 to %d letters and digits", ErrBadPosition, s, maxRunLen)
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil || seq[0] == '+' || (len(seq) > 1 && seq[0] == '0') {
		return Position{}, fmt.Errorf("%w: %.80q: want <run>-<seq> or <seq>, seq a decimal number below 2^64 without leading zeros", ErrBadPosition, s)
	}
	return Position{Run: run, Seq: n}, nil
}

func notAlphanumeric(r rune) bool {
	return (r < '0' || r > '9') && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z')
}

// newRun returns a random name for a Hub's run.
func newRun() string {
	var b [runBytes]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// record is one event the ring holds: its frames, encoded once when it
// was published, and what filters need to decide on it. Never changed
// once in the ring: subscribers read it outside the Hub's lock.
type record struct {
	seq      uint64
	resource string
	owner    string // Event.SessionOwner
	frame    []byte
	// hidden is a lock event's frame without its grant's token and
	// session; nil for other events.
	hidden []byte
}

// recordOverhead is what a record costs beside its frames and strings:
// the struct, its pointer in the ring, the slices' and strings' headers.
const recordOverhead = 128

// size is what r is counted for against Config.HistoryBytes.
func (r *record) size() int64 {
	return int64(len(r.frame) + len(r.hidden) + len(r.resource) + len(r.owner) + recordOverhead)
}

// ring holds the newest events, at most max of them and maxBytes bytes
// (record.size), oldest first, in a circular buffer. Its methods run
// under the Hub's lock.
type ring struct {
	recs     []*record // circular: recs[start] is the oldest
	start, n int
	bytes    int64
	maxBytes int64
}

func newRing(max int, maxBytes int64) *ring {
	return &ring{recs: make([]*record, max), maxBytes: maxBytes}
}

// push adds r as the newest, and drops the oldest until the bounds hold;
// r itself is dropped if it alone exceeds maxBytes.
func (g *ring) push(r *record) {
	if g.n == len(g.recs) {
		g.pop()
	}
	g.recs[(g.start+g.n)%len(g.recs)] = r
	g.n++
	g.bytes += r.size()
	for g.n > 0 && g.bytes > g.maxBytes {
		g.pop()
	}
}

func (g *ring) pop() {
	r := g.recs[g.start]
	g.recs[g.start] = nil
	g.start = (g.start + 1) % len(g.recs)
	g.n--
	g.bytes -= r.size()
}

// after returns the records numbered after seq, oldest first.
func (g *ring) after(seq uint64) []*record {
	if g.n == 0 {
		return nil
	}
	// Records are numbered consecutively: the oldest's number says where
	// seq's successor is.
	oldest := g.recs[g.start].seq
	skip := 0
	if seq >= oldest {
		skip = int(min(seq-oldest+1, uint64(g.n)))
	}
	out := make([]*record, 0, g.n-skip)
	for i := skip; i < g.n; i++ {
		out = append(out, g.recs[(g.start+i)%len(g.recs)])
	}
	return out
}

// oldest returns the number of the oldest event held, or next when none
// is.
func (g *ring) oldest(next uint64) uint64 {
	if g == nil || g.n == 0 {
		return next
	}
	return g.recs[g.start].seq
}

// appendGap appends the SSE message that tells a subscriber that lost
// events it asked for will not come, with the id of the position it
// leaves the subscriber at (just before the first event it gets next):
//
//	id: <run>-<seq>
//	event: gap
//	data: {"lost":<n>}                      // this run's events no longer held
//	data: {"lost":<n>,"other_run":true}     // and the asked position was not this run's
func appendGap(b []byte, at Position, lost uint64, otherRun bool) []byte {
	b = append(b, "id: "...)
	b = append(b, at.String()...)
	b = append(b, "\nevent: gap\ndata: {\"lost\":"...)
	b = strconv.AppendUint(b, lost, 10)
	if otherRun {
		b = append(b, `,"other_run":true`...)
	}
	return append(b, "}\n\n"...)
}
