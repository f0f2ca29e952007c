package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"fencegate/events"
	"fencegate/gateway"
)

// subscribeAt opens the feed with the query given (prefix=, since=) and
// a Last-Event-ID header (none when ""), and fails unless it is
// answered 200. Its messages are being read.
func subscribeAt(tb testing.TB, base, query, lastEventID, key string) *stream {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/v1/events?"+query, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		tb.Fatalf("GET /v1/events?%s (Last-Event-ID %q): %d; want 200", query, lastEventID, resp.StatusCode)
	}
	tb.Cleanup(func() { resp.Body.Close() })
	s := &stream{resp: resp, messages: make(chan sseMessage, 1<<16)}
	return s.read()
}

// nextGap returns the next message's gap, failing unless it is a gap
// event.
func (s *stream) nextGap(tb testing.TB) (lost uint64, otherRun bool, id string) {
	tb.Helper()
	m := s.next(tb)
	var g struct {
		Lost     uint64 `json:"lost"`
		OtherRun bool   `json:"other_run"`
	}
	if m.event != "gap" || json.Unmarshal([]byte(m.data), &g) != nil {
		tb.Fatalf("got event %q %s; want a gap", m.event, m.data)
	}
	return g.Lost, g.OtherRun, m.id
}

// stale makes a write.refused event: a stale token on key (whose mark is
// above 1).
func (e *eventsEnv) stale(tb testing.TB, key string) {
	tb.Helper()
	wantProblem(tb, e.put(tb, key, 1, "stale"), http.StatusConflict, "stale-token")
}

// TestEventsHistory: a write made before anyone subscribed reaches the
// first subscriber, then the live ones follow; the first event's id is
// the gateway's run and its seq.
func TestEventsHistory(t *testing.T) {
	e := newEventsEnv(t, gateway.Config{}, nil)
	r := e.put(t, "k", 5, "five")
	if r.status != http.StatusCreated {
		t.Fatalf("put: %s", r)
	}
	s := subscribe(t, nil, e.url, "", "").read()
	d := s.nextDecision(t, events.KindWriteAccepted)
	wantFields(t, d, map[string]any{"resource": "s3/" + e.bucket + "/k", "token": "5", "etag": r.header.Get("ETag"), "seq": 1.0})
	e.stale(t, "k")
	wantFields(t, s.nextDecision(t, events.KindWriteRefused), map[string]any{"token": "1", "seq": 2.0})
	if n := metricValue(t, e.url, "fencegate_event_history_events"); n != 2 {
		t.Errorf("fencegate_event_history_events = %v; want 2", n)
	}
	if b := metricValue(t, e.url, "fencegate_event_history_bytes"); b <= 0 {
		t.Errorf("fencegate_event_history_bytes = %v; want > 0", b)
	}
}

// TestEventsResume: a subscriber that reconnects with the last id it
// read, in Last-Event-ID or since, gets exactly the events it missed,
// then live ones; Last-Event-ID wins over since, as a browser's
// EventSource reconnects to its URL with the header.
func TestEventsResume(t *testing.T) {
	e := newEventsEnv(t, gateway.Config{}, nil)
	if r := e.put(t, "k", 5, "five"); r.status != http.StatusCreated {
		t.Fatalf("put: %s", r)
	}
	first := subscribe(t, nil, e.url, "", "").read()
	first.nextDecision(t, events.KindWriteAccepted)
	e.stale(t, "k")
	last := first.next(t).id
	first.resp.Body.Close() // the connection drops
	for range 3 {
		e.stale(t, "k") // seqs 3, 4, 5: missed
	}
	tests := []struct {
		name, query, lastEventID string
	}{
		{"Last-Event-ID", "", last},
		{"since", "since=" + url.QueryEscape(last), ""},
		{"Last-Event-ID over since", "since=" + url.QueryEscape(strings.TrimSuffix(last, "2")+"1"), last},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := subscribeAt(t, e.url, tt.query, tt.lastEventID, "")
			for seq := 3.0; seq <= 5+float64(i); seq++ {
				wantFields(t, s.nextDecision(t, events.KindWriteRefused), map[string]any{"seq": seq})
			}
			e.stale(t, "k") // live, after the missed ones
			wantFields(t, s.nextDecision(t, events.KindWriteRefused), map[string]any{"seq": 6 + float64(i)})
		})
	}
}

// TestEventsResumeOverrun: when the gateway no longer holds all the
// events after the resumed id, a gap event says how many were lost
// before the held ones; its id resumes after it without the gap again.
func TestEventsResumeOverrun(t *testing.T) {
	e := newEventsEnv(t, gateway.Config{EventHistory: 3}, nil)
	if r := e.put(t, "k", 5, "five"); r.status != http.StatusCreated {
		t.Fatalf("put: %s", r)
	}
	s := subscribe(t, nil, e.url, "", "").read()
	lastID := s.next(t).id // seq 1
	s.resp.Body.Close()
	for range 7 {
		e.stale(t, "k") // seqs 2..8; the gateway holds 6, 7, 8
	}
	resumed := subscribeAt(t, e.url, "", lastID, "")
	lost, other, gapID := resumed.nextGap(t)
	if lost != 4 || other {
		t.Fatalf("gap: lost %d, other_run %v; want 4 (seqs 2 to 5) of this run", lost, other)
	}
	for seq := 6.0; seq <= 8; seq++ {
		wantFields(t, resumed.nextDecision(t, events.KindWriteRefused), map[string]any{"seq": seq})
	}
	again := subscribeAt(t, e.url, "", gapID, "")
	wantFields(t, again.nextDecision(t, events.KindWriteRefused), map[string]any{"seq": 6.0})
	if n := metricValue(t, e.url, "fencegate_event_history_events"); n != 3 {
		t.Errorf("fencegate_event_history_events = %v; want 3", n)
	}
}

// TestEventsResumeAcrossRestart: an id of another gateway's run (the
// gateway restarted: seqs start at 1 again) is answered with a gap that
// says so, then what the new run holds, not a replay from the old seq.
func TestEventsResumeAcrossRestart(t *testing.T) {
	e := newEventsEnv(t, gateway.Config{}, nil)
	if r := e.put(t, "k", 5, "five"); r.status != http.StatusCreated {
		t.Fatalf("put: %s", r)
	}
	e.stale(t, "k")
	s := subscribe(t, nil, e.url, "", "").read()
	s.next(t)
	oldID := s.next(t).id // seq 2 of the first run
	// The restarted gateway: a new one on the same etcd and bucket, whose
	// first event is its seq 1, below the old id's 2.
	restarted := newEnvSharing(t, e.env)
	if r := restarted.put(t, "k", 9, "nine"); r.status != http.StatusOK {
		t.Fatalf("put through the restarted gateway: %s", r)
	}
	resumed := subscribeAt(t, restarted.url, "", oldID, "")
	lost, other, gapID := resumed.nextGap(t)
	if lost != 0 || !other {
		t.Fatalf("gap: lost %d, other_run %v; want 0 of this run, and other_run", lost, other)
	}
	if strings.HasPrefix(gapID, strings.Split(oldID, "-")[0]) {
		t.Errorf("gap id %q of the old run %q", gapID, oldID)
	}
	wantFields(t, resumed.nextDecision(t, events.KindWriteAccepted), map[string]any{"token": "9", "seq": 1.0})
}

// TestEventsResumeBadPosition: a malformed Last-Event-ID or since is
// refused 400 naming which and why.
func TestEventsResumeBadPosition(t *testing.T) {
	e := newEventsEnv(t, gateway.Config{}, nil)
	for _, tt := range []struct {
		name, query, lastEventID, detail string
	}{
		{"since not a number", "since=soon", "", "since"},
		{"since negative", "since=-1", "", "since"},
		{"since empty", "since=", "", "since"},
		{"Last-Event-ID with a space", "", "abc def-1", "Last-Event-ID"},
		{"Last-Event-ID past 2^64", "", "abc-18446744073709551616", "Last-Event-ID"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, e.url+"/v1/events?"+tt.query, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.lastEventID != "" {
				req.Header.Set("Last-Event-ID", tt.lastEventID)
			}
			r := send(t, req)
			wantProblem(t, r, http.StatusBadRequest, "invalid-request")
			if !strings.Contains(r.problem.Detail, tt.detail) {
				t.Errorf("detail %q; want it to name %s", r.problem.Detail, tt.detail)
			}
		})
	}
}

// TestEventsHistoryAuthorization: the history is authorized per event as
// live events are: Bob, who may write the whole bucket but read only b/,
// subscribing after his writes of a/ and b/, gets b/'s only; Alice, who
// reads a/, a/'s only.
func TestEventsHistoryAuthorization(t *testing.T) {
	e, aliceKey, bobKey := newAliceAndBob(t)
	prefix := "s3/" + e.bucket + "/"
	for _, key := range []string{"a/1", "b/1", "a/2"} {
		(authRequest{name: "put " + key, method: http.MethodPut, path: "/v1/objects/" + e.bucket + "/" + key, key: bobKey, token: "3", body: "x", status: http.StatusCreated}).run(t, &authEnv{env: e.env, gw: e.gw}, nil)
	}
	// Bob's next event after b/1 is his live write of b/2: a/2 (seq 3)
	// was not in his history.
	bob := subscribeAt(t, e.url, "", "", bobKey)
	alice := subscribeAt(t, e.url, "prefix="+url.QueryEscape(prefix), "", aliceKey)
	wantFields(t, bob.nextDecision(t, events.KindWriteAccepted), map[string]any{"resource": prefix + "b/1", "seq": 2.0})
	wantFields(t, alice.nextDecision(t, events.KindWriteAccepted), map[string]any{"resource": prefix + "a/1", "seq": 1.0})
	wantFields(t, alice.nextDecision(t, events.KindWriteAccepted), map[string]any{"resource": prefix + "a/2", "seq": 3.0})
	(authRequest{name: "put b/2", method: http.MethodPut, path: "/v1/objects/" + e.bucket + "/b/2", key: bobKey, token: "3", body: "x", status: http.StatusCreated}).run(t, &authEnv{env: e.env, gw: e.gw}, nil)
	wantFields(t, bob.nextDecision(t, events.KindWriteAccepted), map[string]any{"resource": prefix + "b/2", "seq": 4.0})
}
