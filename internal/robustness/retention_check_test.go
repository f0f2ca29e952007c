package robustness

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"fencegate/api"
)

// Mark retention lets the evictor delete a mark that its object records
// (fence-token metadata equal to the mark). These constructed histories
// show that the checkers allow exactly that: a delete of a mark while its
// object records the mark's token, and after it a mark that restarts
// lower (a stale writer's fence check creates it again); and that they
// still flag a mark that goes down without an eviction, a delete of a mark
// its object does not record, and a stale write that lands after an
// eviction (unless it is the ETag ABA shape).

// retentionT0 is the constructed histories' start; at(s) is s seconds
// after it.
var retentionT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(s float64) time.Time { return retentionT0.Add(time.Duration(s * float64(time.Second))) }

// timedWrite is a committed version of "k": the S3 proxy received it at
// start and S3 answered 0.1 s later.
func timedWrite(seq int64, op string, token api.Token, condition, etag string, start float64) StoreWrite {
	return StoreWrite{Seq: seq, Key: Bucket + "/k", Op: op, Token: token, Condition: condition, Forwarded: true, Status: 200,
		Committed: true, ETag: etag, At: at(start), Done: at(start + 0.1)}
}

// mark is a watch event of k's mark, at revision rev, known to have
// happened between s and s+0.1 seconds.
func mark(rev int64, token api.Token, s float64) HWMEvent {
	return HWMEvent{Revision: rev, Token: token, After: at(s), Before: at(s + 0.1)}
}

// evicted is a delete of k's mark at revision rev, between s and s+0.1.
func evicted(rev int64, s float64) HWMEvent {
	return HWMEvent{Revision: rev, Deleted: true, After: at(s), Before: at(s + 0.1)}
}

// retentionEvidence is a history of object "k" under retention: x creates
// it with token 5 at 0 s, y replaces it with token 7 at 1 s (both acked),
// each after its fence check raised the mark; extra ops, writes and mark
// events follow, and the object ends as final with the mark finalHWM.
func retentionEvidence(extraOps []Op, extraWrites []StoreWrite, extraEvents []HWMEvent, final ObjectState, finalHWM api.Token) Evidence {
	ops := append([]Op{
		writeOp("x", 0, 5, 0, 10, http.StatusCreated, ""),
		writeOp("y", 1, 7, 20, 30, http.StatusOK, "e-x"),
	}, extraOps...)
	writes := append([]StoreWrite{
		timedWrite(1, "x", 5, "If-None-Match: *", "e-x", 0),
		timedWrite(2, "y", 7, "If-Match: e-x", "e-y", 1),
	}, extraWrites...)
	events := append([]HWMEvent{mark(2, 5, -0.2), mark(4, 7, 0.8)}, extraEvents...)
	hwm := map[string]api.Token{}
	if finalHWM != 0 {
		hwm["k"] = finalHWM
	}
	return Evidence{
		Ops: ops, Keys: []string{"k"}, Writes: writes, Retention: true,
		HWMEvents: map[string][]HWMEvent{"k": events}, FinalHWM: hwm,
		MemberHWM: map[string]map[string]api.Token{}, Final: map[string]ObjectState{"k": final},
	}
}

// refusedStale is a write with token refused 409 stale-token naming mark.
func refusedStale(id string, process int, token, mark api.Token, call, ret int64) Op {
	return Op{ID: id, Process: process, Kind: OpWrite, Key: "k", Token: token, Call: call, Return: ret,
		Status: http.StatusConflict, ProblemType: api.ProblemTypePrefix + "stale-token", Outcome: RefusedStale, HighWaterMark: mark}
}

func TestCheckUnderMarkRetention(t *testing.T) {
	yFinal := ObjectState{Exists: true, Op: "y", Token: 7}
	for _, tc := range []struct {
		name           string
		ev             Evidence
		wantViolations []string
		wantFindings   []string
		wantEvictions  int
	}{
		{"an eviction while the object records the mark, and no mark after it",
			retentionEvidence(nil, nil, []HWMEvent{evicted(10, 4)}, yFinal, 0), nil, nil, 1},
		{"an eviction, then a stale writer's fence check restarts the mark lower",
			retentionEvidence([]Op{refusedStale("stale", 2, 6, 7, 40, 50)}, nil,
				[]HWMEvent{evicted(10, 4), mark(12, 6, 5)}, yFinal, 6), nil, nil, 1},
		{"a resynchronization finds the mark lower: the compacted gap may hide an eviction",
			retentionEvidence([]Op{refusedStale("stale", 2, 6, 7, 40, 50)}, nil,
				[]HWMEvent{{Revision: 14, Token: 6, Resync: true, Before: at(6)}}, yFinal, 6), nil, nil, 0},
		{"a resynchronization finds the mark lower, with retention off",
			func() Evidence {
				ev := retentionEvidence([]Op{refusedStale("stale", 2, 6, 7, 40, 50)}, nil,
					[]HWMEvent{{Revision: 14, Token: 6, Resync: true, Before: at(6)}}, yFinal, 6)
				ev.Retention = false
				return ev
			}(), []string{"hwm-covers", "hwm-monotonic"}, nil, 0},
		{"the mark goes down without an eviction",
			retentionEvidence([]Op{refusedStale("stale", 2, 6, 7, 40, 50)}, nil,
				[]HWMEvent{mark(12, 6, 5)}, yFinal, 6), []string{"hwm-covers", "hwm-monotonic"}, nil, 0},
		{"a mark deleted, then lower, with retention off",
			func() Evidence {
				ev := retentionEvidence([]Op{refusedStale("stale", 2, 6, 7, 40, 50)}, nil,
					[]HWMEvent{evicted(10, 4), mark(12, 6, 5)}, yFinal, 6)
				ev.Retention = false
				return ev
			}(), []string{"hwm-covers", "hwm-monotonic"}, nil, 0},
		{"a delete of a mark raised by a write that never landed (the object records 5, not 8)",
			retentionEvidence([]Op{writeOp("z", 2, 8, 40, 50, http.StatusServiceUnavailable, "")}, nil,
				[]HWMEvent{mark(6, 8, 2), evicted(10, 4)}, yFinal, 0), []string{"hwm-covers", "hwm-monotonic"}, nil, 0},
		{"a tombstone deleted: the object was deleted before its mark (by a delete whose fence check wrote nothing)",
			retentionEvidence([]Op{deleteOp("del", 2, 7, 40, 50, http.StatusNoContent), writeOp("z", 3, 9, 60, 70, http.StatusCreated, "")},
				[]StoreWrite{
					{Seq: 3, Key: Bucket + "/k", Deleted: true, Condition: "If-Match: e-y", Forwarded: true, Status: 204, Committed: true, At: at(2), Done: at(2.1)},
					timedWrite(4, "z", 9, "If-None-Match: *", "e-z", 6),
				},
				[]HWMEvent{evicted(10, 4), mark(12, 9, 5.8)}, ObjectState{Exists: true, Op: "z", Token: 9}, 9), []string{"hwm-monotonic"}, nil, 0},
		{"a stale write lands after an eviction",
			retentionEvidence([]Op{writeOp("stale", 2, 6, 40, 50, http.StatusOK, "e-y")},
				[]StoreWrite{timedWrite(3, "stale", 6, "If-Match: e-y", "e-stale", 5)},
				[]HWMEvent{evicted(10, 4), mark(12, 6, 4.5)}, ObjectState{Exists: true, Op: "stale", Token: 6}, 6),
			[]string{"acked-committed", "linearizability", "versions-monotonic"}, nil, 1},
		{"a stale write lands after an eviction by the ETag ABA shape",
			func() Evidence {
				// w (token 8) writes x's bytes back (ETag e-x); the stale
				// writer (token 6) observed x, and its fence check after
				// the eviction of 8 found no mark.
				w := writeOp("w", 3, 8, 32, 38, http.StatusOK, "e-y")
				w.ETag = "e-x"
				stale := writeOp("stale", 2, 6, 12, 50, http.StatusOK, "e-x")
				stale.Stale = true
				return retentionEvidence([]Op{w, stale, readOp(4, 60, 70, "stale", 6)},
					[]StoreWrite{timedWrite(3, "w", 8, "If-Match: e-y", "e-x", 2), timedWrite(4, "stale", 6, "If-Match: e-x", "e-stale", 5)},
					[]HWMEvent{mark(6, 8, 1.8), evicted(10, 4), mark(12, 6, 4.5)}, ObjectState{Exists: true, Op: "stale", Token: 6}, 6)
			}(), nil, []string{"etag-aba"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(tc.ev, CheckConfig{ArtifactDir: t.TempDir(), LinearizabilityTimeout: 10 * time.Second})
			if got := checkNames(res); !slices.Equal(got, tc.wantViolations) {
				t.Errorf("checkers that failed: %v; want %v (%v)", got, tc.wantViolations, res.Violations)
			}
			if got := findingNames(res); !slices.Equal(got, tc.wantFindings) {
				t.Errorf("findings: %v; want %v", got, tc.wantFindings)
			}
			if res.Evictions != tc.wantEvictions {
				t.Errorf("evictions: %d; want %d", res.Evictions, tc.wantEvictions)
			}
		})
	}
}
