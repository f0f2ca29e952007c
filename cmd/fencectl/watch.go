package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"fencegate/api"
	"fencegate/api/client"
	"fencegate/events"
)

// maxEventLine bounds one line of the event stream (an event's data).
const maxEventLine = 64 << 10

// watch is `fencectl watch [--prefix P] [--count N]`: it prints the
// gateway's decisions as they happen, one line each (JSON with --json),
// until interrupted, until N decisions were printed, or until the
// gateway ends the stream (it drains), which is a failure.
func (c *cli) watch(ctx context.Context, args []string) int {
	fs := newFlagSet("watch")
	prefix := fs.String("prefix", "", "")
	count := fs.Int("count", 0, "")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return usageError(c.stderr, fmt.Errorf("watch: %w", err))
	}
	if len(rest) != 0 || *count < 0 {
		return usageError(c.stderr, errors.New("watch: want [--prefix P] [--count N]"))
	}
	body, err := c.openEvents(ctx, *prefix)
	if err != nil {
		if ctx.Err() != nil {
			return exitOK
		}
		return c.fail(err)
	}
	defer body.Close()
	printed := 0
	err = readEvents(body, func(name, data string) error {
		line, err := c.eventLine(name, data)
		if err != nil || line == "" {
			return err
		}
		if _, err := fmt.Fprintln(c.stdout, line); err != nil {
			return err
		}
		if name == "decision" {
			printed++
		}
		if *count > 0 && printed >= *count {
			return errCountReached
		}
		return nil
	})
	switch {
	case errors.Is(err, errCountReached), ctx.Err() != nil:
		return exitOK
	case err == nil:
		err = errors.New("watch: the gateway ended the stream (it is shutting down)")
	}
	return c.fail(err)
}

// errCountReached ends the read once --count decisions were printed.
var errCountReached = errors.New("count reached")

// openEvents opens GET /v1/events and returns the stream's body, or the
// gateway's refusal as a *client.Error.
func (c *cli) openEvents(ctx context.Context, prefix string) (io.ReadCloser, error) {
	target := strings.TrimSuffix(c.url, "/") + "/v1/events"
	if prefix != "" {
		target += "?" + url.Values{"prefix": {prefix}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
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
// one's event name ("message" when none) and data, until r ends or fn
// fails. Comments and ids are skipped.
func readEvents(r io.Reader, fn func(name, data string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxEventLine)
	var name, data string
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
			if err := fn(name, data); err != nil {
				return err
			}
			name, data = "", ""
		case "event":
			name = value
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
// --json (a dropped marker as {"kind":"dropped","dropped":N}), otherwise
// a line for people. Events of other names print nothing.
func (c *cli) eventLine(name, data string) (string, error) {
	switch name {
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
