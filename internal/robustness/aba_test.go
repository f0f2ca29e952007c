package robustness

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"fencegate/api"
)

// The ETag ABA shape: on S3 a conditional PUT compares ETags, not
// versions, so a stale writer paused after its fence check lands if the
// object went back to the exact bytes (the same ETag) it observed. The
// workload produces it only in its histories of identical bytes
// (WorkloadConfig.SameBytes), by chance; these constructed histories show
// that the checkers name it, as a finding, still flag what is not it, and
// excuse nothing on GCS.

// abaEvidence is a history of object "k": u creates it with token 5 and
// ETag E; a writer with token 6 observes u and passes its fence check,
// then stalls; x (token 7) replaces u; y (token 8) writes u's bytes back
// (ETag E again); the stalled write, conditional on E, lands on y. With
// earlierETag other than E, no version before y had y's bytes: the stalled
// write was conditional on an ETag it cannot have observed.
func abaEvidence(earlierETag string) Evidence {
	u := writeOp("u", 0, 5, 0, 10, http.StatusCreated, "")
	u.ETag = earlierETag
	stale := writeOp("stale", 1, 6, 20, 200, http.StatusOK, "E")
	stale.Stale = true
	x := writeOp("x", 2, 7, 30, 40, http.StatusOK, earlierETag)
	y := writeOp("y", 3, 8, 50, 60, http.StatusOK, "e-x")
	y.ETag = "E"
	version := func(seq int64, op string, token api.Token, condition, etag string) StoreWrite {
		return StoreWrite{Seq: seq, Key: Bucket + "/k", Op: op, Token: token, Condition: condition, Forwarded: true, Status: 200, Committed: true, ETag: etag}
	}
	ev := seededEvidence(
		[]Op{u, stale, x, y, readOp(4, 210, 220, "stale", 6)},
		[]StoreWrite{
			version(1, "u", 5, "If-None-Match: *", earlierETag),
			version(2, "x", 7, "If-Match: "+earlierETag, "e-x"),
			version(3, "y", 8, "If-Match: e-x", "E"),
			version(4, "stale", 6, "If-Match: E", "e-stale"),
		},
		ObjectState{Exists: true, Op: "stale", Token: 6},
	)
	return ev
}

// abaAbsentEvidence is a history of object "k", absent at first: a writer
// with token stale observes it absent and passes its fence check, then
// stalls; x (token 7) creates it; a delete (token 8) removes it; the
// stalled write, conditional on If-None-Match: *, lands.
func abaAbsentEvidence(stale api.Token) Evidence {
	w := writeOp("stale", 0, stale, 0, 200, http.StatusCreated, "")
	w.Stale = true
	ev := seededEvidence(
		[]Op{w, writeOp("x", 1, 7, 10, 20, http.StatusCreated, ""), deleteOp("del", 2, 8, 30, 40, http.StatusNoContent), readOp(3, 210, 220, "stale", stale)},
		[]StoreWrite{
			{Seq: 1, Key: Bucket + "/k", Op: "x", Token: 7, Condition: "If-None-Match: *", Forwarded: true, Status: 200, Committed: true, ETag: "e-x"},
			{Seq: 2, Key: Bucket + "/k", Deleted: true, Condition: `If-Match: e-x`, Forwarded: true, Status: 204, Committed: true},
			{Seq: 3, Key: Bucket + "/k", Op: "stale", Token: stale, Condition: "If-None-Match: *", Forwarded: true, Status: 200, Committed: true, ETag: "e-stale"},
		},
		ObjectState{Exists: true, Op: "stale", Token: stale},
	)
	ev.HWMEvents["k"] = []HWMEvent{{Revision: 2, Token: min(stale, 7)}, {Revision: 3, Token: max(stale, 7)}, {Revision: 4, Token: max(stale, 8)}}
	ev.FinalHWM["k"] = max(stale, 8)
	return ev
}

// onGCS returns ev as a GCS history's evidence: its objects in GCSBucket.
func onGCS(ev Evidence) Evidence {
	ev.Store = api.StoreGCS
	writes := make([]StoreWrite, len(ev.Writes))
	for i, w := range ev.Writes {
		w.Key = GCSBucket + strings.TrimPrefix(w.Key, Bucket)
		writes[i] = w
	}
	ev.Writes = writes
	return ev
}

func findingNames(res CheckResult) []string {
	var names []string
	for _, f := range res.Findings {
		names = append(names, f.Name)
	}
	return names
}

func TestCheckNamesETagABA(t *testing.T) {
	for _, tc := range []struct {
		name           string
		ev             Evidence
		wantViolations []string
		wantFindings   []string
		// wantDetail are words the finding's detail must hold.
		wantDetail []string
	}{
		{"the object went back to the bytes the stale writer observed", abaEvidence("E"), nil, []string{"etag-aba"},
			[]string{"stale", "token 6", "y", "token 8", "u", "token 5"}},
		{"conditional on an ETag no earlier version had", abaEvidence("e-u"),
			[]string{"acked-committed", "linearizability", "versions-monotonic"}, nil, nil},
		{"the object went back to absent, as the stale writer observed it", abaAbsentEvidence(6), nil, []string{"etag-aba"},
			[]string{"stale", "token 6", "absent", "x", "token 7"}},
		{"a create after a delete with a larger token", abaAbsentEvidence(9), nil, nil, nil},
		// On GCS a conditional write names a generation, never reused: the
		// same shape is no documented limit there, but a write that landed
		// on a version with a larger token.
		{"the same shape on GCS", onGCS(abaEvidence("E")),
			[]string{"acked-committed", "linearizability", "versions-monotonic"}, nil, nil},
		{"the absent shape on GCS", onGCS(abaAbsentEvidence(6)),
			[]string{"acked-committed", "linearizability"}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(tc.ev, CheckConfig{ArtifactDir: t.TempDir(), LinearizabilityTimeout: 10 * time.Second})
			if got := checkNames(res); !slices.Equal(got, tc.wantViolations) {
				t.Errorf("checkers that failed: %v; want %v (%v)", got, tc.wantViolations, res.Violations)
			}
			if got := findingNames(res); !slices.Equal(got, tc.wantFindings) {
				t.Errorf("findings: %v; want %v", got, tc.wantFindings)
			}
			for _, f := range res.Findings {
				for _, want := range tc.wantDetail {
					if !strings.Contains(f.Detail, want) {
						t.Errorf("finding %q does not name %q", f.Detail, want)
					}
				}
			}
		})
	}
}

// TestCountRefusedABA: in a GCS history's record, a write refused (412)
// on the generation of a version whose bytes the object holds again,
// under a larger token, is the ETag ABA shape GCS refused; the same
// refusal when the object holds other bytes is not.
func TestCountRefusedABA(t *testing.T) {
	version := func(seq int64, op string, token api.Token, gen, body string) StoreWrite {
		return StoreWrite{Seq: seq, Key: GCSBucket + "/k", Op: op, Token: token, Condition: "ifGenerationMatch=0", Forwarded: true, Status: 200,
			Committed: true, ETag: `"` + gen + `"`, BodyETag: body}
	}
	for _, tc := range []struct {
		name     string
		lastBody string
		want     int
	}{
		{"back to the observed bytes", "A", 1},
		{"other bytes", "C", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := Evidence{Store: api.StoreGCS, Keys: []string{"k"}, Writes: []StoreWrite{
				version(1, "u", 5, "100", "A"),
				version(2, "x", 7, "200", "B"),
				version(3, "y", 8, "300", tc.lastBody),
				{Seq: 4, Key: GCSBucket + "/k", Op: "stale", Token: 6, Condition: "ifGenerationMatch=100", Forwarded: true, Status: http.StatusPreconditionFailed, BodyETag: "A"},
			}}
			if got := countRefusedABA(indexEvidence(ev)); got != tc.want {
				t.Errorf("countRefusedABA = %d; want %d", got, tc.want)
			}
		})
	}
}

// TestWithPause: a plan of a history of identical bytes holds a write
// after its fence check, unless the kinds asked for leave pauses out.
func TestWithPause(t *testing.T) {
	plan := Plan{{Kind: KillLeader}, {Kind: LinkDelay}}
	if got := withPause(plan, nil); got[0].Kind != PauseAfterFence || got[1].Kind != LinkDelay || plan[0].Kind != KillLeader {
		t.Errorf("withPause(%v) = %v; want the first fault a pause, the plan itself unchanged", plan, got)
	}
	if got := withPause(plan, []FaultKind{KillLeader, LinkDelay}); got[0].Kind != KillLeader {
		t.Errorf("withPause with kinds that leave pauses out = %v; want the plan as drawn", got)
	}
	paused := Plan{{Kind: KillLeader}, {Kind: PauseAfterFence}}
	if got := withPause(paused, nil); got[0].Kind != KillLeader {
		t.Errorf("withPause(%v) = %v; want the plan as drawn", paused, got)
	}
}
