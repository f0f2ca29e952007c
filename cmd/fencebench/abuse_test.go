package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAbuseEndToEnd runs every attack with two attackers for a second
// each, against the stack fencebench starts and a fencegate built from
// this repository with auth on, one object request in flight per
// identity and two live sessions per identity (both passed with
// --serve-flag), and checks each attack's figures: the well-behaved
// client was measured and got no error (the attackers' requests count
// against their own identity, not its), the gateway's memory, goroutines
// and log bytes were read, and the attackers got what the gateway answers
// them (414 to the unauthenticated flood; 200 to one slow reader and 429
// to the other; of the lock waiters, one waits for the held lock and one
// was refused its session, the holder's being the other of the two, and
// the run goes on; 201 and then 429 to the session flood). It asserts no
// latency: the verdict's 1 s bound is make abuse's.
func TestAbuseEndToEnd(t *testing.T) {
	big := slowReadersBytes(t)
	bin := filepath.Join(t.TempDir(), "fencegate")
	if out, err := exec.Command("go", "build", "-o", bin, "fencegate/cmd/fencegate").CombinedOutput(); err != nil {
		t.Fatalf("go build fencegate: %v\n%s", err, out)
	}
	cfg, err := parseAbuseFlags([]string{
		"--fencegate", bin, "--dir", t.TempDir(), "--duration", "1s", "--big-bytes", strconv.FormatInt(big, 10),
		"--slow-readers", "2", "--stalled-bodies", "2", "--trickled-bodies", "2", "--flood-conns", "2",
		"--readyz-clients", "2", "--lock-waiters", "2", "--ticket-flooders", "2",
		"--serve-flag=--max-requests-per-client=1", "--serve-flag", "--max-sessions-per-identity=2",
	}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	results, err := runAbuse(ctx, cfg, &stdout, &stderr)
	if err != nil {
		t.Fatalf("runAbuse: %v\nstderr:\n%s", err, stderr.String())
	}
	var names []string
	for _, r := range results {
		names = append(names, r.Attack)
		if !strings.Contains(stdout.String(), "abuse: "+r.Attack+" attackers=") {
			t.Errorf("%s: no line in the output:\n%s", r.Attack, stdout.String())
		}
		if r.Exited || r.N == 0 || r.Errors != 0 {
			t.Errorf("%s: gateway exited %v, well-behaved requests %d, errors %d (%s); want it up, requests, no errors", r.Attack, r.Exited, r.N, r.Errors, r.FirstError)
		}
		if r.RSSKiB <= 0 || r.PeakKiB < r.RSSKiB || r.Goroutines <= 0 || r.LogBytes <= 0 {
			t.Errorf("%s: rss %d KiB, peak %d KiB, goroutines %d, log bytes %d; want all measured", r.Attack, r.RSSKiB, r.PeakKiB, r.Goroutines, r.LogBytes)
		}
		want := map[string]func(answers map[string]int) bool{
			attackSlowReaders:  func(m map[string]int) bool { return len(m) == 2 && m["200"] == 1 && m["429"] == 1 },
			attackUnauthFlood:  func(m map[string]int) bool { return len(m) == 1 && m["414"] > 0 },
			attackReadyzFlood:  func(m map[string]int) bool { return len(m) == 1 && m["200"] > 0 },
			attackLockWaiters:  func(m map[string]int) bool { return len(m) == 2 && m["waiting"] == 1 && m["session-429"] == 1 },
			attackTicketFlood:  func(m map[string]int) bool { return m["201"] > 0 && m["error"] == 0 },
			attackSessionFlood: func(m map[string]int) bool { return len(m) == 2 && m["201"] > 0 && m["429"] > 0 },
		}[r.Attack]
		if want != nil && !want(r.Answers) {
			t.Errorf("%s: attackers got %v", r.Attack, r.Answers)
		}
	}
	if !slices.Equal(names, allAttacks) {
		t.Errorf("attacks run: %v; want %v", names, allAttacks)
	}
}

// slowReadersBytes is the size of the object TestAbuseEndToEnd's slow
// readers GET: the least that holds their requests.
func slowReadersBytes(t *testing.T) int64 {
	t.Helper()
	n, err := minSlowReadBytes()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSlowReaderHoldsTheAnswer shows that a slow reader keeps the
// server's handler writing until the attack ends, for the object size
// TestAbuseEndToEnd uses: only then does the second slow reader of one
// identity meet the first in flight and get 429. A server whose socket
// takes the whole answer finishes the request at once, and the attack
// measures nothing.
func TestSlowReaderHoldsTheAnswer(t *testing.T) {
	size := slowReadersBytes(t)
	written := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		chunk := make([]byte, 32<<10)
		for left := size; left > 0; left -= int64(len(chunk)) {
			if _, err := w.Write(chunk[:min(int64(len(chunk)), left)]); err != nil {
				return
			}
		}
		close(written)
	}))
	defer srv.Close()
	a := &abuser{addr: strings.TrimPrefix(srv.URL, "http://"), key: "k"}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	var tally answerTally
	a.slowReader(ctx, &tally)
	select {
	case <-written:
		t.Errorf("the server wrote all %d bytes to a slow reader: its request was not held", size)
	default:
	}
	if got := tally.m; len(got) != 1 || got["200"] != 1 {
		t.Errorf("slow reader tallied %v, want one 200", got)
	}
}

// TestAbuseFlagsRefuseAnObjectTheSocketTakes: a big object that the
// gateway's socket can take whole would let every slow reader's request
// end at once, and make abuse would show a limit holding that was never
// tried. The run is refused, saying how big the object must be.
func TestAbuseFlagsRefuseAnObjectTheSocketTakes(t *testing.T) {
	least := slowReadersBytes(t)
	tests := []struct {
		name    string
		args    []string
		wantErr bool
	}{
		{"1 MiB", []string{"--big-bytes", "1MiB"}, true},
		{"one byte short", []string{"--big-bytes", strconv.FormatInt(least-1, 10)}, true},
		{"the least", []string{"--big-bytes", strconv.FormatInt(least, 10)}, false},
		{"the default", nil, false},
		{"1 MiB without slow readers", []string{"--big-bytes", "1MiB", "--attacks", attackStalledBodies}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseAbuseFlags(tt.args, io.Discard)
			switch {
			case tt.wantErr && (err == nil || !strings.Contains(err.Error(), "use at least "+strconv.FormatInt(least, 10))):
				t.Errorf("parseAbuseFlags(%q) = %v, want an error naming %d", tt.args, err, least)
			case !tt.wantErr && err != nil:
				t.Errorf("parseAbuseFlags(%q) = %v, want no error", tt.args, err)
			}
		})
	}
}
