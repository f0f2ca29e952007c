package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
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
// with --json, each line is the event's JSON.
func TestWatch(t *testing.T) {
	e := newEnv(t)
	for _, jsonOut := range []bool{false, true} {
		testenv.WaitUntil(t, 10*time.Second, "no watch subscribed", func() bool { return subscribers(t, e.url) == "0" })
		args := []string{"watch", "--prefix", "s3/" + e.bucket + "/", "--count", "2"}
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
		if code, _, stderr := e.fencectl(t, nil, "v", "put", e.bucket+"/k", "-", "--token", token); code != 0 {
			t.Fatalf("put: exit %d %s", code, stderr)
		}
		if code, _, _ := e.fencectl(t, nil, "v", "put", e.bucket+"/k", "-", "--token", "1"); code != exitRefused {
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
			if !strings.Contains(lines[0], "write.accepted") || !strings.Contains(lines[0], "s3/"+e.bucket+"/k token 5") {
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
		if accepted["kind"] != "write.accepted" || accepted["token"] != "7" || accepted["hwm_before"] != "5" ||
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
