package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"fencegate/events"
	"fencegate/internal/testenv"
)

// subscribers reads the gateway's count of event subscribers.
func subscribers(tb testing.TB, base string) string {
	tb.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^fencegate_event_subscribers (\S+)$`).FindSubmatch(b)
	if m == nil {
		tb.Fatal("no fencegate_event_subscribers in /metrics")
	}
	return string(m[1])
}

// TestWatch: `fencectl watch --prefix P --count 2` prints the accepted
// write and the refused stale one under P, one line each, and exits 0;
// with --json, each line is the event's JSON. Each run watches a key of
// its own: a watch starts with the decisions the gateway holds under P.
func TestWatch(t *testing.T) {
	e := newEnv(t)
	for _, jsonOut := range []bool{false, true} {
		testenv.WaitUntil(t, 10*time.Second, "no watch subscribed", func() bool { return subscribers(t, e.url) == "0" })
		key := e.bucket + "/text"
		if jsonOut {
			key = e.bucket + "/json"
		}
		args := []string{"watch", "--prefix", "s3/" + key, "--count", "2"}
		if jsonOut {
			args = append([]string{"--json"}, args...)
		}
		environ := []string{"PATH=" + os.Getenv("PATH"), "FENCEGATE_URL=" + e.url}
		var out, errOut testenv.Buffer
		done := make(chan int, 1)
		go func() { done <- run(context.Background(), args, environ, strings.NewReader(""), &out, &errOut) }()
		testenv.WaitUntil(t, 10*time.Second, "the watch to subscribe", func() bool { return subscribers(t, e.url) == "1" })
		token := "5"
		if jsonOut {
			token = "7"
		}
		if code, _, stderr := e.fencectl(t, nil, "v", "put", key, "-", "--token", token); code != 0 {
			t.Fatalf("put: exit %d %s", code, stderr)
		}
		if code, _, _ := e.fencectl(t, nil, "v", "put", key, "-", "--token", "1"); code != exitRefused {
			t.Fatalf("stale put: exit %d", code)
		}
		var code int
		select {
		case code = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("watch --count 2 did not exit after two decisions")
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if code != 0 || len(lines) != 2 {
			t.Fatalf("watch: exit %d, %q, %s; want two lines", code, out.String(), errOut.String())
		}
		if !jsonOut {
			if !strings.Contains(lines[0], "write.accepted") || !strings.Contains(lines[0], "s3/"+key+" token 5") {
				t.Errorf("line %q: want the accepted write of token 5", lines[0])
			}
			if !strings.Contains(lines[1], "write.refused") || !strings.Contains(lines[1], "token 1 < hwm 5: 409 stale-token, caught by cache") {
				t.Errorf("line %q: want the refusal of token 1 below 5", lines[1])
			}
			continue
		}
		var accepted, refused map[string]any
		if json.Unmarshal([]byte(lines[0]), &accepted) != nil || json.Unmarshal([]byte(lines[1]), &refused) != nil {
			t.Fatalf("--json lines %q", lines)
		}
		if accepted["kind"] != "write.accepted" || accepted["token"] != "7" || accepted["resource"] != "s3/"+key ||
			refused["kind"] != "write.refused" || refused["hwm"] != "7" || refused["caught"] != "cache" {
			t.Errorf("--json events %v, %v", accepted, refused)
		}
	}
}

// TestDecisionText: each kind of decision as the line watch prints; a
// lock.expired, which no request made, names the session's owner.
func TestDecisionText(t *testing.T) {
	at := time.Date(2026, 12, 3, 23, 40, 1, 123456000, time.Local)
	tests := []struct {
		e    events.Event
		want string
	}{
		{events.Event{Time: at, Kind: events.KindWriteAccepted, Resource: "s3/demo/k", Token: 34, HWMBefore: 33, HWM: 34, Status: 200, ETag: `"abc"`, LatencyMS: 1.42, Identity: "alice"},
			`23:40:01.123456 write.accepted   s3/demo/k token 34 (hwm 33 -> 34) 200 etag "abc" 1.42ms [alice]`},
		{events.Event{Time: at, Kind: events.KindWriteRefused, Resource: "s3/demo/k", Token: 33, HWM: 34, Status: 409, Problem: "stale-token", Caught: "cache", Identity: "bob"},
			`23:40:01.123456 write.refused    s3/demo/k token 33 < hwm 34: 409 stale-token, caught by cache [bob]`},
		{events.Event{Time: at, Kind: events.KindLockExpired, Resource: "jobs", Token: 41, Session: "7f5fa23f6c265e04", Holder: "alice"},
			`23:40:01.123456 lock.expired     jobs token 41 session 7f5fa23f6c265e04 [holder alice]`},
		{events.Event{Time: at, Kind: events.KindLockExpired, Resource: "jobs", Token: 41, Session: "7f5fa23f6c265e04"},
			`23:40:01.123456 lock.expired     jobs token 41 session 7f5fa23f6c265e04`},
	}
	for _, tt := range tests {
		if got := decisionText(tt.e); got != tt.want {
			t.Errorf("decisionText(%s)\n got %s\nwant %s", tt.e.Kind, got, tt.want)
		}
	}
}

// cuttableProxy forwards TCP connections to a gateway until cut: then it
// closes those it forwards and refuses new ones (accepts and closes
// them), as a network that drops, until mended.
type cuttableProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func newCuttableProxy(tb testing.TB, gatewayURL string) *cuttableProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &cuttableProxy{ln: ln, target: strings.TrimPrefix(gatewayURL, "http://")}
	tb.Cleanup(func() { ln.Close(); p.setCut(true) })
	go p.serve()
	return p
}

func (p *cuttableProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *cuttableProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		go func() { _, _ = io.Copy(c, up); c.Close() }()
	}
}

// setCut cuts (true: every connection closed, new ones refused) or
// mends the network.
func (p *cuttableProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// TestWatchResumes: a watch whose connection drops reconnects with the
// last id it read (Last-Event-ID) and prints exactly the decisions made
// while it was away, then the live ones: each once, in order. It starts
// with the write made before it was started, which the gateway kept.
func TestWatchResumes(t *testing.T) {
	e := newEnv(t)
	proxy := newCuttableProxy(t, e.url)
	if code, _, stderr := e.fencectl(t, nil, "v", "put", e.bucket+"/k", "-", "--token", "5"); code != 0 {
		t.Fatalf("put: exit %d %s", code, stderr)
	}
	environ := []string{"PATH=" + os.Getenv("PATH"), "FENCEGATE_URL=" + proxy.url()}
	var out, errOut testenv.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), []string{"--json", "watch", "--prefix", "s3/" + e.bucket + "/", "--count", "4"}, environ, strings.NewReader(""), &out, &errOut)
	}()
	lines := func() []string { return strings.FieldsFunc(out.String(), func(r rune) bool { return r == '\n' }) }
	testenv.WaitUntil(t, 10*time.Second, "the watch to print the write made before it", func() bool { return len(lines()) == 1 })

	proxy.setCut(true)
	testenv.WaitUntil(t, 10*time.Second, "the gateway to see the watch gone", func() bool { return subscribers(t, e.url) == "0" })
	for range 2 { // while the watch is away
		if code, _, _ := e.fencectl(t, nil, "v", "put", e.bucket+"/k", "-", "--token", "1"); code != exitRefused {
			t.Fatalf("stale put: exit %d", code)
		}
	}
	proxy.setCut(false)
	testenv.WaitUntil(t, 30*time.Second, "the watch to resume and print what it missed", func() bool { return len(lines()) == 3 })
	if code, _, stderr := e.fencectl(t, nil, "v", "put", e.bucket+"/k", "-", "--token", "6"); code != 0 {
		t.Fatalf("put 6: exit %d %s", code, stderr)
	}
	var code int
	select {
	case code = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("watch --count 4 did not exit after four decisions")
	}
	if code != 0 {
		t.Fatalf("watch: exit %d, %s", code, errOut.String())
	}
	want := []struct {
		seq         float64
		kind, token string
	}{{1, "write.accepted", "5"}, {2, "write.refused", "1"}, {3, "write.refused", "1"}, {4, "write.accepted", "6"}}
	got := lines()
	if len(got) != len(want) {
		t.Fatalf("watch printed %q; want %d decisions", got, len(want))
	}
	for i, w := range want {
		var d map[string]any
		if err := json.Unmarshal([]byte(got[i]), &d); err != nil || d["seq"] != w.seq || d["kind"] != w.kind || d["token"] != w.token {
			t.Errorf("line %d = %s; want seq %v %s token %s", i, got[i], w.seq, w.kind, w.token)
		}
	}
	if !strings.Contains(errOut.String(), "reconnected") {
		t.Errorf("stderr %q; want a word that the watch reconnected", errOut.String())
	}
}

// TestGapLine: a gap event as the line watch prints, for people and with
// --json.
func TestGapLine(t *testing.T) {
	tests := []struct {
		data     string
		json     bool
		want     string
		wantText string // for people: a part of the line
	}{
		{data: `{"lost":7}`, json: true, want: `{"kind":"gap","lost":7}`},
		{data: `{"lost":0,"other_run":true}`, json: true, want: `{"kind":"gap","lost":0,"other_run":true}`},
		{data: `{"lost":7}`, wantText: "-- 7 decisions lost"},
		{data: `{"lost":2,"other_run":true}`, wantText: "another run of the gateway"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s json=%v", tt.data, tt.json), func(t *testing.T) {
			c := &cli{json: tt.json}
			got, err := c.eventLine("gap", tt.data)
			switch {
			case err != nil:
				t.Errorf("eventLine(gap, %s) = %v", tt.data, err)
			case tt.json && got != tt.want:
				t.Errorf("eventLine(gap, %s) with --json = %s; want %s", tt.data, got, tt.want)
			case !tt.json && !strings.Contains(got, tt.wantText):
				t.Errorf("eventLine(gap, %s) = %q; want it to contain %q", tt.data, got, tt.wantText)
			}
		})
	}
	if _, err := (&cli{}).eventLine("gap", "{"); err == nil {
		t.Error("eventLine(gap, {) = nil error; want the malformed gap refused")
	}
}
