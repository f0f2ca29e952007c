package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"slices"
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
	bin := filepath.Join(t.TempDir(), "fencegate")
	if out, err := exec.Command("go", "build", "-o", bin, "fencegate/cmd/fencegate").CombinedOutput(); err != nil {
		t.Fatalf("go build fencegate: %v\n%s", err, out)
	}
	cfg, err := parseAbuseFlags([]string{
		"--fencegate", bin, "--dir", t.TempDir(), "--duration", "1s", "--big-bytes", "1MiB",
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
