package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/gateway"
	"fencegate/tokenstore"
)

// rawTarget sends method and target to the server at url byte for byte
// (no client escapes it), as a PUT with a fencing token and no body, and
// reads the answer.
func rawTarget(tb testing.TB, url, method, target string) result {
	tb.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	req := method + " " + target + " HTTP/1.1\r\nHost: fencegate\r\n" + api.HeaderFenceToken + ": 5\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		tb.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		tb.Fatalf("%s of a %d-byte target: %v", method, len(target), err)
	}
	defer resp.Body.Close()
	r := result{status: resp.StatusCode, header: resp.Header}
	var body strings.Builder
	if _, err := bufio.NewReader(resp.Body).WriteTo(&body); err != nil {
		tb.Fatal(err)
	}
	r.body = []byte(body.String())
	if resp.Header.Get("Content-Type") == api.ContentTypeProblem {
		if err := json.Unmarshal(r.body, &r.problem); err != nil {
			tb.Fatalf("problem body %q: %v", r.body, err)
		}
	}
	return r
}

// logOf returns the bytes of the log lines of the request with id
// requestID.
func (b *lockedBuffer) logOf(requestID string) string {
	var out strings.Builder
	for line := range strings.Lines(b.String()) {
		if strings.Contains(line, `"request_id":"`+requestID+`"`) {
			out.WriteString(line)
		}
	}
	return out.String()
}

// TestTargetTooLong sends request targets around the 8 KiB limit, raw,
// to a gateway with authentication on, as an unauthenticated client
// would: one over it is answered 414 before authentication, with a small
// body and a small log line, however its bytes escape (raw 0x80 bytes
// become 6 bytes each in JSON).
func TestTargetTooLong(t *testing.T) {
	a := newAuthEnv(t, func(string) edge.Auth {
		_, key := newKey(t, "writer")
		return edge.Auth{Identities: []edge.Identity{{Name: "writer"}}, APIKeys: []edge.APIKey{key}}
	})
	a.serve(t)
	prefix := "/v1/objects/" + a.bucket + "/"
	tests := []struct {
		name       string
		target     string
		wantStatus int
	}{
		{"60 KB of raw 0x80", prefix + strings.Repeat("\x80", 60<<10), http.StatusRequestURITooLong},
		{"one byte over", prefix + strings.Repeat("k", 8<<10-len(prefix)+1), http.StatusRequestURITooLong},
		{"over in the query", prefix + "k?" + strings.Repeat("q", 8<<10), http.StatusRequestURITooLong},
		{"at the limit", prefix + strings.Repeat("k", 8<<10-len(prefix)), http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rawTarget(t, a.url, http.MethodPut, tt.target)
			if r.status != tt.wantStatus {
				t.Fatalf("PUT of a %d-byte target = %d %.200q; want %d", len(tt.target), r.status, r.body, tt.wantStatus)
			}
			if tt.wantStatus != http.StatusRequestURITooLong {
				return
			}
			wantProblem(t, r, http.StatusRequestURITooLong, "uri-too-long")
			if len(r.body) >= 2<<10 {
				t.Errorf("414 body is %d bytes; want under 2 KiB", len(r.body))
			}
			if line := a.log.logOf(r.header.Get("X-Request-Id")); line == "" || len(line) >= 2<<10 {
				t.Errorf("log of the 414 is %d bytes; want one line under 2 KiB: %.300q", len(line), line)
			}
		})
	}
}

// TestProblemAndLogTruncateLongPaths checks that a long path that fits
// the target limit is echoed in problem bodies (instance, detail) and in
// the log line cut to 1 KiB, with a marker that says so and how long it
// was.
func TestProblemAndLogTruncateLongPaths(t *testing.T) {
	var logs lockedBuffer
	e := newEnv(t, gateway.Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	long := strings.Repeat("k", 4<<10)
	tests := []struct {
		name     string
		method   string
		path     string
		slug     string
		inDetail bool // the detail is "not found: no route for " and the path
	}{
		{"key too long", http.MethodPut, "/v1/objects/" + e.bucket + "/" + long, "invalid-object-path", false},
		{"no route", http.MethodGet, "/v2/" + long, "not-found", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rawTarget(t, e.url, tt.method, tt.path)
			if r.problem.Type != api.ProblemTypePrefix+tt.slug {
				t.Fatalf("%s %d bytes = %d %.200q; want problem %s", tt.method, len(tt.path), r.status, r.body, tt.slug)
			}
			marker := fmt.Sprintf("…(truncated, %d bytes)", len(tt.path))
			checkTruncated(t, "problem instance", r.problem.Instance, tt.path[:40], marker)
			if tt.inDetail {
				detail := "not found: no route for " + tt.path
				checkTruncated(t, "problem detail", r.problem.Detail, detail[:40], fmt.Sprintf("…(truncated, %d bytes)", len(detail)))
			}
			lines := jsonLines(t, logs.logOf(r.header.Get("X-Request-Id")))
			if len(lines) != 1 {
				t.Fatalf("%d log lines for the request; want 1", len(lines))
			}
			path, _ := lines[0]["path"].(string)
			checkTruncated(t, "log line path", path, tt.path[:40], marker)
		})
	}
}

// checkTruncated fails unless got starts with prefix, is at most 1 KiB
// before marker, and ends with marker.
func checkTruncated(tb testing.TB, what, got, prefix, marker string) {
	tb.Helper()
	if !strings.HasPrefix(got, prefix) || !strings.HasSuffix(got, marker) || len(got) > 1<<10+len(marker) {
		tb.Errorf("%s is %d bytes: %.60q...%q; want the path's first bytes, at most 1 KiB of them, then %q",
			what, len(got), got, got[max(0, len(got)-40):], marker)
	}
}

// fakeClock is a clock that moves only when the test says.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestRefusalLinesAreLimited sends 1,000 unauthenticated writes, 10 ms
// apart on the gateway's clock (10 s in all), and checks that they leave
// at most the limiter's burst plus its rate over those 10 s of lines,
// that every line left out is counted in
// fencegate_log_lines_suppressed_total, and that the next line written
// reports them: lines plus suppressed counts add up to the requests. It
// does so for each answer given before authentication has a say: 401 (no
// key) and 414 (a request target over the limit, refused before the key
// is looked at), and for the routes open to anyone, which a flood of
// GET /readyz or /healthz would otherwise turn into a line each.
func TestRefusalLinesAreLimited(t *testing.T) {
	const (
		requests = 1000
		step     = 10 * time.Millisecond
		rate     = 10 // lines a second: the defaults
		burst    = 20
	)
	e := newStackEnv(t)
	store, backend := e.connect(t, tokenstore.Config{RequestTimeout: 5 * time.Second})
	for _, tc := range []struct {
		name   string
		path   string // "": a PUT of an object
		query  string
		status int
		reason string
	}{
		{"no key", "", "", http.StatusUnauthorized, "unauthorized"},
		{"target too long", "", "?" + strings.Repeat("a", 9<<10), http.StatusRequestURITooLong, "uri-too-long"},
		{"readiness probe", "/readyz", "", http.StatusOK, "readyz"},
		{"liveness probe", "/healthz", "", http.StatusOK, "healthz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs lockedBuffer
			clock := &fakeClock{now: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
			_, key := newKey(t, "writer")
			gw, err := gateway.New(gateway.Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Now: clock.Now}, store, backend,
				gateway.WithAuth(edge.Auth{Identities: []edge.Identity{{Name: "writer"}}, APIKeys: []edge.APIKey{key}}))
			if err != nil {
				t.Fatal(err)
			}
			a := &authEnv{env: e, gw: gw, log: &logs}
			a.serve(t)
			url, path := e.objectURL("flood")+tc.query, "/v1/objects/"+e.bucket+"/flood"
			send := func() {
				t.Helper()
				if tc.path != "" {
					url, path = a.url+tc.path, tc.path
					if r := do(t, http.MethodGet, url, nil, nil); r.status != tc.status {
						t.Fatalf("GET %s = %s; want %d", tc.path, r, tc.status)
					}
					return
				}
				if r := do(t, http.MethodPut, url, []string{"5"}, []byte("x")); r.status != tc.status {
					t.Fatalf("PUT = %s; want %d", r, tc.status)
				}
			}
			for range requests {
				send()
				clock.advance(step)
			}
			lines, reported := refusalLines(t, &logs, tc.status, path)
			if limit := burst + rate*int(requests*step/time.Second); lines > limit || lines == 0 {
				t.Errorf("%d lines for %d refused writes in %v; want 1 to %d (burst %d, %d a second)", lines, requests, requests*step, limit, burst, rate)
			}
			suppressed := sample(a.scrape(t), "fencegate_log_lines_suppressed_total", map[string]string{"reason": tc.reason})
			if lines+int(suppressed) != requests {
				t.Errorf("%d lines written + %g suppressed (fencegate_log_lines_suppressed_total) = %g; want %d", lines, suppressed, float64(lines)+suppressed, requests)
			}
			if reported > int(suppressed) {
				t.Errorf("lines report %d suppressed; the metric counts %g", reported, suppressed)
			}
			// A second later, the next refusal's line reports every line left out.
			clock.advance(time.Second)
			send()
			lines, reported = refusalLines(t, &logs, tc.status, path)
			if lines+reported != requests+1 {
				t.Errorf("%d lines + %d reported suppressed = %d; want %d, every request", lines, reported, lines+reported, requests+1)
			}
		})
	}
}

// refusalLines counts the log's lines of answers with status to path
// and adds up their suppressed fields.
func refusalLines(tb testing.TB, logs *lockedBuffer, status int, path string) (lines, suppressed int) {
	tb.Helper()
	for _, line := range logs.lines(tb) {
		if line["status"] != float64(status) || line["path"] != path {
			continue
		}
		lines++
		if n, ok := line["suppressed"].(float64); ok {
			suppressed += int(n)
		}
	}
	return lines, suppressed
}
