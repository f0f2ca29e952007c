package events_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"fencegate/events"
)

// parseFrames reads SSE messages: each message's event name (default
// "message"), id and data.
type message struct{ event, id, data string }

func parseFrames(tb testing.TB, b []byte) []message {
	tb.Helper()
	var out []message
	var m message
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if m != (message{}) {
				if m.event == "" {
					m.event = "message"
				}
				out = append(out, m)
			}
			m = message{}
		case strings.HasPrefix(line, "event: "):
			m.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			m.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			m.data += strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, ":"):
		default:
			tb.Fatalf("unexpected SSE line %q", line)
		}
	}
	return out
}

// TestEventWireForm: the hand-written encoding is the JSON that
// encoding/json reads back into the same Event, tokens as strings, in the
// SSE frame whose id is the hub's run and the seq.
func TestEventWireForm(t *testing.T) {
	waiters := int64(2)
	at := time.Date(2026, 12, 3, 23, 40, 1, 123456000, time.UTC)
	tests := []events.Event{
		{Time: at, Kind: events.KindWriteAccepted, Resource: "s3/demo/k", Token: 34, HWMBefore: 33, HWM: 34, ETag: `"abc"`, Status: 200, LatencyMS: 1.42, Identity: "alice"},
		{Time: at, Kind: events.KindWriteRefused, Resource: "s3/demo/k<&>\u2028\n\"x", Token: 1<<64 - 1, HWM: 1<<63 + 5, Problem: "stale-token", Status: 409, Caught: events.CaughtCache},
		{Time: at, Kind: events.KindLockGranted, Resource: "jobs", Token: 7, Session: "1234", Holder: "carol", Waiters: &waiters},
		{Time: at, Kind: events.KindLockReleased, Resource: "jobs", Waiters: new(int64)},
		{Time: at, Kind: events.KindPartnerBusy, Resource: "partner/pay/\xff", Token: 3, Status: 503},
	}
	h := events.NewHub(events.Config{})
	sub, err := h.Subscribe(events.Filter{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for i, want := range tests {
		e := want
		h.Publish(&e)
		it := <-sub.C()
		msgs := parseFrames(t, it.Frame)
		if len(msgs) != 1 || msgs[0].event != "decision" || msgs[0].id != h.Run()+"-"+strconv.FormatUint(e.Seq, 10) {
			t.Fatalf("frame %q: want one decision event with id %d", it.Frame, e.Seq)
		}
		if e.Seq != uint64(i+1) {
			t.Errorf("seq = %d; want %d", e.Seq, i+1)
		}
		var got events.Event
		if err := json.Unmarshal([]byte(msgs[0].data), &got); err != nil {
			t.Fatalf("data %s: %v", msgs[0].data, err)
		}
		want.Seq = e.Seq
		if want.Resource == "partner/pay/\xff" {
			want.Resource = "partner/pay/\ufffd"
		}
		want.LatencyMS = got.LatencyMS // 3 decimals
		if !reflect.DeepEqual(got, want) || !got.Time.Equal(want.Time) {
			t.Errorf("decoded %+v; want %+v", got, want)
		}
		var raw map[string]any
		_ = json.Unmarshal([]byte(msgs[0].data), &raw)
		if tok, ok := raw["token"]; ok {
			if _, isString := tok.(string); !isString {
				t.Errorf("token %v is not a JSON string", tok)
			}
		}
	}
	if got := string(tests[0].AppendJSON(nil)); !strings.Contains(got, `"time":"2026-12-03T23:40:01.123456Z"`) || !strings.Contains(got, `"token":"34"`) {
		t.Errorf("AppendJSON = %s", got)
	}
}

// TestSlowSubscriberDropsWithoutBlocking: a subscriber that never reads
// fills its buffer; publishing goes on without waiting, the events that
// found the buffer full are counted, and the first event delivered after
// the subscriber drains carries that count. Another subscriber, reading,
// loses nothing.
func TestSlowSubscriberDropsWithoutBlocking(t *testing.T) {
	h := events.NewHub(events.Config{Buffer: 4})
	slow, err := h.Subscribe(events.Filter{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fast, err := h.Subscribe(events.Filter{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	publish := func(n int) {
		for range n {
			h.Publish(&events.Event{Kind: events.KindWriteAccepted, Resource: "s3/b/k"})
			<-fast.C()
		}
	}
	publish(4 + 10) // the buffer's 4, then 10 dropped: returns, never waits
	if got := h.Dropped(); got != 10 {
		t.Fatalf("Dropped() = %d; want 10", got)
	}
	var seqs []string
	for range 4 {
		it := <-slow.C()
		if it.Dropped != 0 {
			t.Fatalf("buffered item carries Dropped %d; want 0", it.Dropped)
		}
		seqs = append(seqs, strings.TrimPrefix(parseFrames(t, it.Frame)[0].id, h.Run()+"-"))
	}
	if want := []string{"1", "2", "3", "4"}; !reflect.DeepEqual(seqs, want) {
		t.Fatalf("buffered ids %v; want %v", seqs, want)
	}
	publish(1)
	it := <-slow.C()
	if it.Dropped != 10 || parseFrames(t, it.Frame)[0].id != h.Run()+"-15" {
		t.Fatalf("next item: dropped %d, frame %q; want 10 dropped before id 15", it.Dropped, it.Frame)
	}
	publish(1)
	if it := <-slow.C(); it.Dropped != 0 {
		t.Fatalf("item after: dropped %d; want 0 (counted once)", it.Dropped)
	}
	if got := string(events.AppendDropped(nil, 10)); got != "event: dropped\ndata: {\"dropped\":10}\n\n" {
		t.Errorf("AppendDropped = %q", got)
	}
}

// TestFilter: a subscription gets the events under its prefix that its
// predicate allows, and nothing else.
func TestFilter(t *testing.T) {
	h := events.NewHub(events.Config{})
	sub, err := h.Subscribe(events.Filter{Prefix: "s3/a/", May: func(r string) bool { return !strings.HasPrefix(r, "s3/a/secret") }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for _, r := range []string{"s3/a/x", "s3/b/x", "s3/a/secret/1", "jobs", "s3/a/y"} {
		h.Publish(&events.Event{Kind: events.KindWriteAccepted, Resource: r})
	}
	var got []string
	for len(sub.C()) > 0 {
		var e events.Event
		_ = json.Unmarshal([]byte(parseFrames(t, (<-sub.C()).Frame)[0].data), &e)
		got = append(got, e.Resource)
	}
	if want := []string{"s3/a/x", "s3/a/y"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v; want %v", got, want)
	}
}

// TestSeesGrant: a lock event goes with its grant's token and session to
// the subscriber whose SeesGrant allows them (asked with the lock's name
// and the session's owner) and to one without SeesGrant, and without
// them, under the same id, to one whose SeesGrant refuses; SeesGrant has
// no say over other events.
func TestSeesGrant(t *testing.T) {
	h := events.NewHub(events.Config{})
	var asked []string
	owners := func(name, owner string) bool {
		asked = append(asked, name+" "+owner)
		return owner == "alice"
	}
	subs := map[string]*events.Subscription{}
	for name, f := range map[string]events.Filter{"owner's": {SeesGrant: owners}, "unfiltered": {}, "refused": {SeesGrant: func(string, string) bool { return false }}} {
		s, err := h.Subscribe(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		subs[name] = s
	}
	published := []events.Event{
		{Kind: events.KindLockGranted, Resource: "jobs", Token: 7, Session: "1234", Holder: "alice", SessionOwner: "alice"},
		{Kind: events.KindLockExpired, Resource: "jobs", Token: 8, Session: "5678", Holder: "bob", SessionOwner: "bob"},
		{Kind: events.KindWriteAccepted, Resource: "s3/b/k", Token: 9},
	}
	for i := range published {
		h.Publish(&published[i])
	}
	for name, s := range subs {
		for _, e := range published {
			m := parseFrames(t, (<-s.C()).Frame)[0]
			var got events.Event
			if err := json.Unmarshal([]byte(m.data), &got); err != nil {
				t.Fatal(err)
			}
			sees := name == "unfiltered" || e.Kind == events.KindWriteAccepted || (name == "owner's" && e.SessionOwner == "alice")
			want := e
			want.SessionOwner = ""
			if !sees {
				want.Token, want.Session = 0, ""
			}
			if m.id != h.Run()+"-"+strconv.FormatUint(e.Seq, 10) || !reflect.DeepEqual(got, want) {
				t.Errorf("%s subscriber got id %s %+v; want id %d %+v", name, m.id, got, e.Seq, want)
			}
		}
	}
	if want := []string{"jobs alice", "jobs bob"}; !reflect.DeepEqual(asked, want) {
		t.Errorf("SeesGrant asked %q; want %q", asked, want)
	}
}

// TestSubscriberLimitAndClose: subscriptions past the limit are refused
// until one closes; Close ends every subscription and refuses new ones.
// Without history, the hub is Active only while someone subscribes.
func TestSubscriberLimitAndClose(t *testing.T) {
	h := events.NewHub(events.Config{MaxSubscribers: 2, History: -1})
	a, _ := h.Subscribe(events.Filter{}, nil)
	b, _ := h.Subscribe(events.Filter{}, nil)
	if _, err := h.Subscribe(events.Filter{}, nil); !errors.Is(err, events.ErrTooManySubscribers) {
		t.Fatalf("third Subscribe: %v; want ErrTooManySubscribers", err)
	}
	if !h.Active() || h.Subscribers() != 2 {
		t.Fatalf("Active %v, Subscribers %d; want true, 2", h.Active(), h.Subscribers())
	}
	a.Close()
	a.Close()
	c, err := h.Subscribe(events.Filter{}, nil)
	if err != nil {
		t.Fatalf("Subscribe after a Close: %v", err)
	}
	h.Close()
	for _, s := range []*events.Subscription{b, c} {
		select {
		case <-s.Done():
		default:
			t.Fatal("Done not closed after the hub's Close")
		}
	}
	if _, err := h.Subscribe(events.Filter{}, nil); !errors.Is(err, events.ErrClosed) {
		t.Fatalf("Subscribe after Close: %v; want ErrClosed", err)
	}
	b.Close()
	c.Close()
	if h.Active() {
		t.Fatal("Active after every subscription closed")
	}
}
