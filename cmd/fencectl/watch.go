package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"fencegate/api"
	"fencegate/api/client"
	"fencegate/events"
)

// maxEventLine bounds one line of the event stream (an event's data).
const maxEventLine = 64 << 10

// A watch whose stream ends, or whose connection drops, reconnects at
// once, then after reconnectFirst, doubling up to reconnectMax between
// attempts; it gives up after reconnectAttempts failed in a row (about
// 20 seconds). A stream that ends within reconnectMax of its start counts
// as a failed attempt, so that a gateway that answers and hangs up at
// once is not called in a loop without pause.
const (
	reconnectFirst    = 500 * time.Millisecond
	reconnectMax      = 5 * time.Second
	reconnectAttempts = 8
)

// watch is `fencectl watch [--prefix P] [--count N] [--since ID]`: it
// prints the decisions the gateway holds (those after ID with --since),
// then the gateway's decisions as they happen, one line each (JSON with
// --json), until interrupted or until N decisions were printed. When
// the stream ends (the connection dropped, the gateway drained) it
// reconnects with the id of the last event it read (Last-Event-ID), so
// that it prints what it missed meanwhile, or a line saying how many
// decisions the gateway no longer held; it fails when the gateway
// refuses it, or stays unreachable (reconnectAttempts).
func (c *cli) watch(ctx context.Context, args []string) int {
	fs := newFlagSet("watch")
	prefix := fs.String("prefix", "", "")
	count := fs.Int("count", 0, "")
	since := fs.String("since", "", "")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return usageError(c.stderr, fmt.Errorf("watch: %w", err))
	}
	if len(rest) != 0 || *count < 0 {
		return usageError(c.stderr, errors.New("watch: want [--prefix P] [--count N] [--since ID]"))
	}
	w := &watcher{cli: c, prefix: *prefix, count: *count, since: *since}
	err = w.run(ctx)
	switch {
	case errors.Is(err, errCountReached), ctx.Err() != nil:
		return exitOK
	}
	return c.fail(err)
}

// watcher is one watch: what it asked for, and where it is.
type watcher struct {
	*cli
	prefix, since string
	count         int
	printed       int
	// lastID is the id of the last event read ("": none yet), sent as
	// Last-Event-ID when the watch reconnects.
	lastID string
}

// run streams until ctx ends, --count is reached (errCountReached), the
// gateway refuses the watch, or it stays unreachable.
func (w *watcher) run(ctx context.Context) error {
	failures := 0
	wait := time.Duration(0)
	var lastErr error
	for {
		body, err := w.openEvents(ctx, w.prefix, w.since, w.lastID)
		var refused *client.Error
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &refused) && refused.Problem.Status != http.StatusServiceUnavailable:
			return err // 503: draining, or busy; anything else will not change
		case err != nil:
			lastErr = err
		default:
			if failures > 0 || lastErr != nil {
				fmt.Fprintf(w.stderr, "fencectl: watch: reconnected, resuming after %s\n", cmp.Or(w.lastID, "the start"))
			}
			start := time.Now()
			err = readEvents(body, w.print)
			body.Close()
			if errors.Is(err, errCountReached) || ctx.Err() != nil {
				return err
			}
			if errors.Is(err, bufio.ErrTooLong) { // the same line again on a resume
				return fmt.Errorf("watch: an event longer than %d bytes: %w", maxEventLine, err)
			}
			if time.Since(start) >= reconnectMax {
				failures, wait = 0, 0
			}
			if err == nil {
				err = errors.New("the gateway ended the stream")
			}
			var failed *printError
			if errors.As(err, &failed) {
				return failed.err
			}
			lastErr = fmt.Errorf("watch: %w", err)
			fmt.Fprintf(w.stderr, "fencectl: %v; reconnecting\n", lastErr)
		}
		if failures++; failures > reconnectAttempts {
			return fmt.Errorf("%w (gave up after %d attempts to reconnect)", lastErr, reconnectAttempts)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(max(2*wait, reconnectFirst), reconnectMax)
	}
}

// printError is a failure to print (or to read what was printed): the
// watch ends with it rather than reconnecting.
type printError struct{ err error }

func (e *printError) Error() string { return e.err.Error() }

// print prints one event, and remembers its id.
func (w *watcher) print(name, id, data string) error {
	if id != "" {
		w.lastID = id
	}
	line, err := w.eventLine(name, data)
	if err != nil {
		return &printError{err}
	}
	if line == "" {
		return nil
	}
	if _, err := fmt.Fprintln(w.stdout, line); err != nil {
		return &printError{err}
	}
	if name == "decision" {
		w.printed++
	}
	if w.count > 0 && w.printed >= w.count {
		return errCountReached
	}
	return nil
}

// errCountReached ends the read once --count decisions were printed.
var errCountReached = errors.New("count reached")

// openEvents opens GET /v1/events and returns the stream's body, or the
// gateway's refusal as a *client.Error. since and lastID (either may be
// ""; the gateway prefers lastID) say where the stream resumes.
func (c *cli) openEvents(ctx context.Context, prefix, since, lastID string) (io.ReadCloser, error) {
	target := strings.TrimSuffix(c.url, "/") + "/v1/events"
	q := url.Values{}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if since != "" {
		q.Set("since", since)
	}
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp.Body, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxEventLine))
	var p api.Problem
	if json.Unmarshal(b, &p) == nil && p.Type != "" {
		return nil, &client.Error{Method: http.MethodGet, Path: "/v1/events", Problem: p}
	}
	return nil, fmt.Errorf("watch: unexpected answer %s: %.200q", resp.Status, b)
}

// readEvents reads Server-Sent Events from r and calls fn with each
// one's event name ("message" when none), id ("" when none) and data,
// until r ends or fn fails. Comments are skipped.
func readEvents(r io.Reader, fn func(name, id, data string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxEventLine)
	var name, id, data string
	for sc.Scan() {
		line := sc.Text()
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "": // a blank line ends an event; ":..." is a comment
			if line != "" || data == "" {
				continue
			}
			if name == "" {
				name = "message"
			}
			if err := fn(name, id, data); err != nil {
				return err
			}
			name, id, data = "", "", ""
		case "event":
			name = value
		case "id":
			id = value
		case "data":
			if data != "" {
				data += "\n"
			}
			data += value
		}
	}
	return sc.Err()
}

// eventLine is how an event is printed: its data as one JSON line with
// --json (a dropped marker as {"kind":"dropped","dropped":N}, a gap as
// {"kind":"gap","lost":N[,"other_run":true]}), otherwise a line for
// people. Events of other names print nothing.
func (c *cli) eventLine(name, data string) (string, error) {
	switch name {
	case "gap":
		var g struct {
			Lost     uint64 `json:"lost"`
			OtherRun bool   `json:"other_run"`
		}
		if err := json.Unmarshal([]byte(data), &g); err != nil {
			return "", fmt.Errorf("watch: gap %q: %w", data, err)
		}
		if c.json {
			if g.OtherRun {
				return fmt.Sprintf(`{"kind":"gap","lost":%d,"other_run":true}`, g.Lost), nil
			}
			return fmt.Sprintf(`{"kind":"gap","lost":%d}`, g.Lost), nil
		}
		if g.OtherRun {
			return fmt.Sprintf("-- resumed on another run of the gateway (it restarted, or this is another gateway): the decisions after the last one printed are lost there; %d more here", g.Lost), nil
		}
		return fmt.Sprintf("-- %d decisions lost: the gateway no longer held them when this watch resumed", g.Lost), nil
	case "dropped":
		var d struct {
			Dropped uint64 `json:"dropped"`
		}
		if err := json.Unmarshal([]byte(data), &d); err != nil {
			return "", fmt.Errorf("watch: dropped marker %q: %w", data, err)
		}
		if c.json {
			return fmt.Sprintf(`{"kind":"dropped","dropped":%d}`, d.Dropped), nil
		}
		return fmt.Sprintf("-- %d events dropped: this watch read too slowly, the gateway did not wait", d.Dropped), nil
	case "decision":
		if c.json {
			return data, nil
		}
		var e events.Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return "", fmt.Errorf("watch: event %q: %w", data, err)
		}
		return decisionText(e), nil
	}
	return "", nil
}

// decisionText is one decision as a line for people:
//
//	23:40:01.123456 write.accepted   s3/demo/k token 34 (hwm 33 -> 34) 200 etag "abc" 1.42ms [alice]
//	23:40:02.000100 write.refused    s3/demo/k token 33 < hwm 34: 409 stale-token, caught by cache [bob]
//	23:40:09.500000 lock.expired     jobs token 41 session 7f5fa23f6c265e04 [holder alice]
func decisionText(e events.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-16s %s", e.Time.Local().Format("15:04:05.000000"), e.Kind, e.Resource)
	if e.Token != 0 {
		fmt.Fprintf(&b, " token %d", e.Token)
	}
	switch e.Kind {
	case events.KindWriteRefused:
		if e.HWM != 0 {
			fmt.Fprintf(&b, " < hwm %d", e.HWM)
		}
		fmt.Fprintf(&b, ": %d %s", e.Status, e.Problem)
		if e.Caught != "" {
			fmt.Fprintf(&b, ", caught by %s", e.Caught)
		}
	case events.KindWriteAccepted, events.KindDeleteAccepted:
		switch {
		case e.HWMBefore != 0 && e.HWM != 0:
			fmt.Fprintf(&b, " (hwm %d -> %d)", e.HWMBefore, e.HWM)
		case e.HWM != 0:
			fmt.Fprintf(&b, " (hwm %d)", e.HWM)
		}
		fmt.Fprintf(&b, " %d", e.Status)
		if e.ETag != "" {
			fmt.Fprintf(&b, " etag %s", e.ETag)
		}
		if e.LatencyMS != 0 {
			fmt.Fprintf(&b, " %sms", strconv.FormatFloat(e.LatencyMS, 'f', -1, 64))
		}
	default:
		if e.Session != "" {
			fmt.Fprintf(&b, " session %s", e.Session)
		}
		if e.Waiters != nil {
			fmt.Fprintf(&b, ", %d waiting", *e.Waiters)
		}
		if e.Status != 0 {
			fmt.Fprintf(&b, " %d", e.Status)
		}
	}
	switch {
	case e.Identity != "":
		fmt.Fprintf(&b, " [%s]", e.Identity)
	case e.Holder != "": // lock.expired, lock.revoked: no request, but the session's owner
		fmt.Fprintf(&b, " [holder %s]", e.Holder)
	}
	return b.String()
}
