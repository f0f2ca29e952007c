package robustness

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/internal/devstack"
)

var (
	seedFlag      = flag.Uint64("seed", 0, "seed of the first history (0: ROBUSTNESS_SEED, else the clock)")
	historiesFlag = flag.Int("histories", 0, "histories to run (0: ROBUSTNESS_HISTORIES, else 24)")
)

// suiteSeed returns the seed to run from: -seed, ROBUSTNESS_SEED, or the
// clock (printed, for replay).
func suiteSeed(t *testing.T) uint64 {
	t.Helper()
	if *seedFlag != 0 {
		return *seedFlag
	}
	if s := os.Getenv("ROBUSTNESS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ROBUSTNESS_SEED=%q: %v", s, err)
		}
		return n
	}
	return uint64(time.Now().UnixNano() % 1_000_000_000)
}

func suiteHistories(t *testing.T) int {
	t.Helper()
	if *historiesFlag != 0 {
		return *historiesFlag
	}
	if s := os.Getenv("ROBUSTNESS_HISTORIES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("ROBUSTNESS_HISTORIES=%q: want a positive number", s)
		}
		return n
	}
	return 24
}

// suiteWorkload returns DefaultWorkload with the shapes that
// ROBUSTNESS_SHAPES lists (comma-separated: etagless, partners,
// same-bytes; "all", the default when it is unset or empty, for all three;
// "none" for none), each in half the histories.
func suiteWorkload(t *testing.T) WorkloadConfig {
	t.Helper()
	shapes := os.Getenv("ROBUSTNESS_SHAPES")
	if strings.TrimSpace(shapes) == "" {
		shapes = "all"
	}
	var etagless, partners, sameBytes bool
	for item := range strings.SplitSeq(shapes, ",") {
		switch strings.TrimSpace(item) {
		case "none":
		case "etagless":
			etagless = true
		case "partners":
			partners = true
		case "same-bytes":
			sameBytes = true
		case "all":
			etagless, partners, sameBytes = true, true, true
		default:
			t.Fatalf("ROBUSTNESS_SHAPES: unknown shape %q (want etagless, partners, same-bytes, all or none)", item)
		}
	}
	return DefaultWorkload.WithShapes(etagless, partners).WithSameBytes(sameBytes)
}

// suiteStore returns the store that ROBUSTNESS_STORE puts every history
// on (s3 or gcs), or "" when it is unset: a seeded third on GCS.
func suiteStore(t *testing.T) string {
	t.Helper()
	switch s := os.Getenv("ROBUSTNESS_STORE"); s {
	case "", api.StoreS3, api.StoreGCS:
		return s
	default:
		t.Fatalf("ROBUSTNESS_STORE=%q: want s3 or gcs", s)
		return ""
	}
}

// needVersityGW skips nothing: it fails, saying how to build versitygw
// (or fake-gcs-server, which the cluster runs too).
func needVersityGW(t *testing.T) {
	t.Helper()
	if _, err := devstack.FindVersityGW(); err != nil {
		t.Fatal(err)
	}
	if _, err := devstack.FindFakeGCS(); err != nil {
		t.Fatal(err)
	}
}

// runSuite runs cfg and fails t if the run could not complete.
func runSuite(t *testing.T, cfg SuiteConfig) SuiteReport {
	t.Helper()
	needVersityGW(t)
	if os.Getenv("ROBUSTNESS_VERBOSE") != "" {
		cfg.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.Histories)*90*time.Second+5*time.Minute)
	defer cancel()
	report, err := RunSuite(ctx, cfg)
	if err != nil {
		t.Fatalf("robustness run (seed %d; logs in %s): %v", cfg.Seed, report.Dir, err)
	}
	return report
}

// TestRobustness runs the seeded histories against the real code: every
// history must pass every checker.
func TestRobustness(t *testing.T) {
	seed := suiteSeed(t)
	report := runSuite(t, SuiteConfig{Histories: suiteHistories(t), Seed: seed, Workload: suiteWorkload(t), Store: suiteStore(t)})
	if report.Violations > 0 {
		t.Fatalf("%d violations (seed %d); logs and visualizations in %s", report.Violations, seed, report.Dir)
	}
	_ = os.RemoveAll(report.Dir)
	if len(report.Histories) == 0 || report.Ops == 0 {
		t.Fatalf("the run checked nothing: %s", report.FinalLine())
	}
	// Every S3 history draws multipart uploads (MultipartRatio); a few
	// histories make completions all but certain.
	if report.store(api.StoreS3).Histories >= 4 && (report.Shapes.Multipart.Creates == 0 || report.Shapes.Multipart.Completes == 0) {
		t.Fatalf("%d S3 histories, yet no multipart upload was created and completed: %s", report.store(api.StoreS3).Histories, report.FinalLine())
	}
	// Likewise tickets (TicketRatio): some are issued, and writes on them
	// land.
	if tickets := report.Shapes.Tickets; report.store(api.StoreS3).Histories >= 4 && (tickets.Issued == 0 || tickets.Landed == 0) {
		t.Fatalf("%d S3 histories, yet no ticket was issued and used: %s", report.store(api.StoreS3).Histories, report.FinalLine())
	}
}

// testMutation runs a few histories of pauses between fence check and PUT
// against gateways with an unsafe hook, on store (empty: the seeded mix),
// with workload (zero: DefaultWorkload), and wants a checker to fail.
func testMutation(t *testing.T, hook, store string, workload WorkloadConfig) {
	seed := suiteSeed(t)
	report := runSuite(t, SuiteConfig{
		Histories:        4,
		Seed:             seed,
		Hooks:            []string{hook},
		Kinds:            []FaultKind{PauseAfterFence},
		FaultsPerHistory: 4,
		StopAtViolation:  true,
		Store:            store,
		Workload:         workload,
	})
	defer os.RemoveAll(report.Dir)
	if report.Violations == 0 {
		t.Fatalf("with %s, no checker failed in %d histories (seed %d): %s", hook, len(report.Histories), seed, report.FinalLine())
	}
	checks := map[string]int{}
	for _, h := range report.Histories {
		if store != "" && h.Store != store {
			t.Errorf("history %d ran on %s; want %s", h.Index, h.Store, store)
		}
		for _, v := range h.Check.Violations {
			checks[v.Check]++
		}
		if h.Check.Visualization != "" {
			if _, err := os.Stat(h.Check.Visualization); err != nil {
				t.Errorf("visualization %s: %v", h.Check.Visualization, err)
			}
		}
	}
	if checks["linearizability"] == 0 {
		t.Errorf("with %s, porcupine found no violation; other checkers: %v", hook, checks)
	}
	t.Logf("with %s: %d histories, checkers that failed: %v", hook, len(report.Histories), checks)
}

func TestMutationSwapOrderIsCaught(t *testing.T) { testMutation(t, "swap-order", "", WorkloadConfig{}) }

func TestMutationUnconditionalWriteIsCaught(t *testing.T) {
	testMutation(t, "unconditional-write", "", WorkloadConfig{})
}

// TestMutationUnconditionalGCSWriteIsCaught: on GCS, with writers of
// identical bytes (the ETag ABA shape, which the checkers excuse on S3
// only), a gateway that drops ifGenerationMatch is caught: the checkers do
// not take a stale write that lands there for the documented S3 limit.
func TestMutationUnconditionalGCSWriteIsCaught(t *testing.T) {
	sameBytes := DefaultWorkload
	sameBytes.SameBytes = true
	testMutation(t, "unconditional-write", api.StoreGCS, sameBytes)
}

// TestMutationUnconditionalTicketIsCaught: a gateway whose tickets sign
// no condition (the unconditional-ticket hook) is caught: a write sent on
// a ticket after a newer holder's write, or sent a second time, lands on
// a version the ticket's holder never observed.
func TestMutationUnconditionalTicketIsCaught(t *testing.T) {
	tickets := DefaultWorkload
	tickets.TicketRatio = 0.8
	testMutation(t, "unconditional-ticket", api.StoreS3, tickets)
}

// TestMutationRogueEvictionIsCaught: with marks deleted behind the
// gateways' backs, whether or not their objects record them, in histories
// with retention, hwm-monotonic names a delete that is no eviction.
func TestMutationRogueEvictionIsCaught(t *testing.T) {
	// The rogue deletes blindly every 100 ms, and only a delete that comes
	// between a fence check's raise and the write that records it (or
	// takes a tombstone) breaks the rule; a delete of a mark its object
	// records is an eviction the checker must accept. One history can draw
	// none of the first kind (CI saw one with 20 deletes, all of the
	// second; replaying its seed, two of three histories drew none), so up
	// to six retention histories run, and one must name it. This stays a
	// test of chance: a rogue that deletes exactly inside the window would
	// make it certain.
	seed := suiteSeed(t)
	var lines []string
	for range 6 {
		for !retentionHistory(seed) {
			seed++
		}
		report := runSuite(t, SuiteConfig{Histories: 1, Seed: seed, RogueEviction: true, Kinds: []FaultKind{PauseAfterFence}})
		os.RemoveAll(report.Dir)
		for _, h := range report.Histories {
			for _, v := range h.Check.Violations {
				if v.Check == "hwm-monotonic" && strings.Contains(v.Detail, "no eviction deletes it") {
					return
				}
			}
		}
		lines = append(lines, fmt.Sprintf("seed %d: %s", seed, report.FinalLine()))
		seed++
	}
	t.Fatalf("with rogue deletes of marks, hwm-monotonic named no delete that is no eviction in six histories:\n%s", strings.Join(lines, "\n"))
}
