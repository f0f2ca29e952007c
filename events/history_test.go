package events_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"fencegate/events"
)

// publishN publishes n write events of resource on h and returns their
// seqs.
func publishN(h *events.Hub, resource string, n int) []uint64 {
	var seqs []uint64
	for range n {
		e := events.Event{Kind: events.KindWriteAccepted, Resource: resource, Token: 1}
		h.Publish(&e)
		seqs = append(seqs, e.Seq)
	}
	return seqs
}

// backlog subscribes to h after after (nil: everything held) with
// filter and returns the messages of its backlog, the subscription
// closed at the test's end.
func backlog(tb testing.TB, h *events.Hub, filter events.Filter, after *events.Position) ([]message, *events.Subscription) {
	tb.Helper()
	sub, err := h.Subscribe(filter, after)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(sub.Close)
	var msgs []message
	for _, it := range sub.Backlog() {
		msgs = append(msgs, parseFrames(tb, it.Frame)...)
	}
	return msgs, sub
}

// gapOf decodes a gap event's data.
type gap struct {
	Lost     uint64 `json:"lost"`
	OtherRun bool   `json:"other_run"`
}

// summary is the backlog as a string: "gap(lost=2,other)" for a gap,
// the seq for a decision (its id checked against the hub's run).
func summary(tb testing.TB, run string, msgs []message) string {
	tb.Helper()
	var parts []string
	for _, m := range msgs {
		switch m.event {
		case "gap":
			var g gap
			if err := json.Unmarshal([]byte(m.data), &g); err != nil {
				tb.Fatalf("gap %q: %v", m.data, err)
			}
			s := fmt.Sprintf("gap(lost=%d", g.Lost)
			if g.OtherRun {
				s += ",other"
			}
			parts = append(parts, s+")@"+m.id)
		case "decision":
			var d struct{ Seq uint64 }
			if err := json.Unmarshal([]byte(m.data), &d); err != nil {
				tb.Fatalf("decision %q: %v", m.data, err)
			}
			if want := run + "-" + strconv.FormatUint(d.Seq, 10); m.id != want {
				tb.Errorf("decision seq %d has id %q; want %q", d.Seq, m.id, want)
			}
			parts = append(parts, strconv.FormatUint(d.Seq, 10))
		default:
			tb.Fatalf("unexpected event %q in a backlog", m.event)
		}
	}
	return strings.Join(parts, " ")
}

// TestHistoryResume: a new subscription gets the events the hub holds
// before the live ones, and one that resumes after a position gets those
// after it; when the hub no longer holds all of them, a gap event first
// says how many were lost, with the id of the position it leaves the
// subscriber at. A position of another run (another gateway, or this one
// before a restart), or ahead of the newest event (no run issued it),
// gives a gap that says so.
func TestHistoryResume(t *testing.T) {
	h := events.NewHub(events.Config{History: 4})
	run := h.Run()
	publishN(h, "s3/b/k", 10) // holds 7..10
	pos := func(s string) *events.Position {
		p, err := events.ParsePosition(s)
		if err != nil {
			t.Fatalf("ParsePosition(%q): %v", s, err)
		}
		return &p
	}
	tests := []struct {
		name  string
		after *events.Position
		want  string
	}{
		{"new subscriber: all held, no gap", nil, "7 8 9 10"},
		{"resume inside the ring", pos(run + "-8"), "9 10"},
		{"resume at the newest", pos(run + "-10"), ""},
		{"resume at the oldest held's predecessor", pos(run + "-6"), "7 8 9 10"},
		{"overrun: 3, 4, 5 and 6 lost", pos(run + "-2"), "gap(lost=4)@" + run + "-6 7 8 9 10"},
		{"from the start", pos("0"), "gap(lost=6)@" + run + "-6 7 8 9 10"},
		{"a bare seq is this run's", pos("9"), "10"},
		{"another run", pos("0123456789ab-9"), "gap(lost=6,other)@" + run + "-6 7 8 9 10"},
		{"ahead of the newest", pos(run + "-11"), "gap(lost=6,other)@" + run + "-6 7 8 9 10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, _ := backlog(t, h, events.Filter{}, tt.after)
			if got := summary(t, run, msgs); got != tt.want {
				t.Errorf("Subscribe after %v: backlog %q; want %q", tt.after, got, tt.want)
			}
		})
	}
}

// TestHistorySeam: events published while subscribers come reach each
// of them exactly once, in order, with nothing missing between its
// backlog and its live events.
func TestHistorySeam(t *testing.T) {
	const total, subscribers = 3000, 8
	h := events.NewHub(events.Config{History: total, Buffer: total})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		publishN(h, "s3/b/k", total)
	}()
	for i := range subscribers {
		var after *events.Position
		if i%2 == 1 {
			after = &events.Position{Run: h.Run(), Seq: 0}
		}
		sub, err := h.Subscribe(events.Filter{}, after)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []uint64
		for _, it := range sub.Backlog() {
			for _, m := range parseFrames(t, it.Frame) {
				seqs = append(seqs, seqOf(t, m))
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sub.Close()
			for uint64(len(seqs)) < total {
				it := <-sub.C()
				if it.Dropped != 0 {
					t.Errorf("subscriber %d: %d dropped", i, it.Dropped)
					return
				}
				for _, m := range parseFrames(t, it.Frame) {
					seqs = append(seqs, seqOf(t, m))
				}
			}
			for j, s := range seqs {
				if s != uint64(j+1) {
					t.Errorf("subscriber %d: event %d has seq %d; want %d (backlog then live, no gap, no duplicate)", i, j, s, j+1)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func seqOf(tb testing.TB, m message) uint64 {
	tb.Helper()
	if m.event != "decision" {
		tb.Fatalf("unexpected %s event %q", m.event, m.data)
	}
	var d struct{ Seq uint64 }
	if err := json.Unmarshal([]byte(m.data), &d); err != nil {
		tb.Fatal(err)
	}
	return d.Seq
}

// TestHistoryBounds: the ring holds at most Config.History events and
// Config.HistoryBytes bytes, the newest, and History reports them.
func TestHistoryBounds(t *testing.T) {
	// One event's size in the ring, to set byte bounds in whole events.
	probe := events.NewHub(events.Config{})
	publishN(probe, "s3/b/k", 1)
	_, one := probe.History()
	if one <= 0 {
		t.Fatalf("one event takes %d bytes", one)
	}
	tests := []struct {
		name      string
		cfg       events.Config
		published int
		want      string // the backlog
	}{
		{"under both", events.Config{History: 10, HistoryBytes: 100 * one}, 5, "1 2 3 4 5"},
		{"count bound", events.Config{History: 3, HistoryBytes: 100 * one}, 5, "3 4 5"},
		{"byte bound", events.Config{History: 100, HistoryBytes: 2*one + one/2}, 5, "4 5"},
		{"an event larger than the bound is not kept", events.Config{History: 100, HistoryBytes: one / 2}, 5, ""},
		{"off", events.Config{History: -1}, 5, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := events.NewHub(tt.cfg)
			publishN(h, "s3/b/k", tt.published)
			msgs, _ := backlog(t, h, events.Filter{}, nil)
			if got := summary(t, h.Run(), msgs); got != tt.want {
				t.Errorf("backlog %q; want %q", got, tt.want)
			}
			n, bytes := h.History()
			if n != len(msgs) || bytes != int64(n)*one {
				t.Errorf("History() = %d events, %d bytes; want %d, %d", n, bytes, len(msgs), int64(len(msgs))*one)
			}
		})
	}
}

// TestHistoryOff: a hub that keeps no history is inactive while nobody
// subscribes, and a resume from it says how many events were lost.
func TestHistoryOff(t *testing.T) {
	h := events.NewHub(events.Config{History: -1})
	if h.Active() {
		t.Fatal("Active with no history and no subscriber")
	}
	if !events.NewHub(events.Config{}).Active() {
		t.Fatal("a hub that keeps history is not Active")
	}
	sub, err := h.Subscribe(events.Filter{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	publishN(h, "s3/b/k", 3)
	sub.Close()
	msgs, _ := backlog(t, h, events.Filter{}, &events.Position{Run: h.Run(), Seq: 1})
	if got, want := summary(t, h.Run(), msgs), "gap(lost=2)@"+h.Run()+"-3"; got != want {
		t.Errorf("resume after 1 of 3 without history: %q; want %q", got, want)
	}
}

// TestHistoryAuthorized: the backlog is filtered and authorized per
// event as live events are: a resource the subscriber may not read is
// left out, and a lock grant's token and session go only to whom
// SeesGrant allows.
func TestHistoryAuthorized(t *testing.T) {
	h := events.NewHub(events.Config{})
	for _, e := range []events.Event{
		{Kind: events.KindWriteAccepted, Resource: "s3/b/public/1", Token: 1},
		{Kind: events.KindWriteAccepted, Resource: "s3/b/secret/1", Token: 2},
		{Kind: events.KindLockGranted, Resource: "jobs", Token: 3, Session: "abcd", SessionOwner: "alice"},
		{Kind: events.KindWriteAccepted, Resource: "s3/other/1", Token: 4},
	} {
		h.Publish(&e)
	}
	alice := events.Filter{
		Prefix:    "",
		May:       func(r string) bool { return !strings.HasPrefix(r, "s3/b/secret/") },
		SeesGrant: func(_, owner string) bool { return owner == "alice" },
	}
	bob := alice
	bob.SeesGrant = func(_, owner string) bool { return owner == "bob" }
	onlyB := events.Filter{Prefix: "s3/b/"}
	tests := []struct {
		name   string
		filter events.Filter
		want   []string // resource:token of each event
	}{
		{"alice", alice, []string{"s3/b/public/1:1", "jobs:3", "s3/other/1:4"}},
		{"bob: the grant without its token", bob, []string{"s3/b/public/1:1", "jobs:", "s3/other/1:4"}},
		{"prefix", onlyB, []string{"s3/b/public/1:1", "s3/b/secret/1:2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, _ := backlog(t, h, tt.filter, nil)
			var got []string
			for _, m := range msgs {
				var d struct{ Resource, Token, Session string }
				if err := json.Unmarshal([]byte(m.data), &d); err != nil {
					t.Fatal(err)
				}
				if d.Token == "" && d.Session != "" {
					t.Errorf("%s: session %q without its token", d.Resource, d.Session)
				}
				got = append(got, d.Resource+":"+d.Token)
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("backlog %q; want %q", got, tt.want)
			}
		})
	}
}

// TestParsePosition: the feed's ids, and bare sequence numbers, parse;
// anything else is ErrBadPosition.
func TestParsePosition(t *testing.T) {
	tests := []struct {
		in   string
		want events.Position
		ok   bool
	}{
		{"0123456789ab-42", events.Position{Run: "0123456789ab", Seq: 42}, true},
		{"42", events.Position{Seq: 42}, true},
		{"0", events.Position{}, true},
		{"x-18446744073709551615", events.Position{Run: "x", Seq: 1<<64 - 1}, true},
		{"", events.Position{}, false},
		{"-1", events.Position{}, false},
		{"ab-", events.Position{}, false},
		{"ab-+1", events.Position{}, false},
		{"ab-1-2", events.Position{}, false},
		{"a b-1", events.Position{}, false},
		{"x-18446744073709551616", events.Position{}, false},
		{strings.Repeat("a", 33) + "-1", events.Position{}, false},
		{"ab-1 ", events.Position{}, false},
	}
	for _, tt := range tests {
		got, err := events.ParsePosition(tt.in)
		switch {
		case tt.ok && (err != nil || got != tt.want):
			t.Errorf("ParsePosition(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		case !tt.ok && !errors.Is(err, events.ErrBadPosition):
			t.Errorf("ParsePosition(%q) = %v, %v; want ErrBadPosition", tt.in, got, err)
		case tt.ok && got.String() != tt.in:
			t.Errorf("ParsePosition(%q).String() = %q; want it back", tt.in, got.String())
		}
	}
}

// FuzzParsePosition: whatever parses prints back as itself.
func FuzzParsePosition(f *testing.F) {
	for _, s := range []string{"0123456789ab-42", "42", "", "a-", "-", "a-01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := events.ParsePosition(s)
		if err != nil {
			if !errors.Is(err, events.ErrBadPosition) {
				t.Fatalf("ParsePosition(%q) = %v; want ErrBadPosition", s, err)
			}
			return
		}
		q, err := events.ParsePosition(p.String())
		if err != nil || q != p {
			t.Fatalf("ParsePosition(%q) = %v; again from %q: %v, %v", s, p, p.String(), q, err)
		}
	})
}
