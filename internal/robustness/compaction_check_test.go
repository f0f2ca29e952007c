package robustness

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"fencegate/api"
)

// compactedEvidence is a history of object "k" whose writes carry tokens,
// in S3's order, each acked and conditional on the one before, and whose
// watch record is events.
func compactedEvidence(tokens []api.Token, events []HWMEvent) Evidence {
	var ops []Op
	var writes []StoreWrite
	replaced := ""
	for i, token := range tokens {
		id := "w" + token.String()
		status := http.StatusOK
		if i == 0 {
			status = http.StatusCreated
		}
		ops = append(ops, writeOp(id, i, token, int64(i*10), int64(i*10+5), status, replaced))
		writes = append(writes, s3Write(int64(i+1), id, token))
		replaced = "e-" + id
	}
	last := tokens[len(tokens)-1]
	ops = append(ops, readOp(len(tokens), 1000, 1010, "w"+last.String(), last))
	return Evidence{
		Ops: ops, Keys: []string{"k"}, Writes: writes,
		HWMEvents: map[string][]HWMEvent{"k": events}, FinalHWM: map[string]api.Token{"k": last},
		MemberHWM: map[string]map[string]api.Token{}, Final: map[string]ObjectState{"k": {Exists: true, Op: "w" + last.String(), Token: last}},
	}
}

// TestCheckAcrossACompactedGap: when the watcher met a compacted revision
// and resynchronized, the marks between its last event and the resync
// event are lost to the record; a token in that gap cannot be shown
// accepted or not, and is no violation. Any other token is still checked.
func TestCheckAcrossACompactedGap(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   Evidence
		want []string
	}{
		{"a token accepted inside the gap", compactedEvidence([]api.Token{5, 7, 9},
			[]HWMEvent{{Revision: 2, Token: 5}, {Revision: 9, Token: 9, Resync: true}}), nil},
		{"the record starts with a resync", compactedEvidence([]api.Token{5, 7, 9},
			[]HWMEvent{{Revision: 9, Token: 9, Resync: true}}), nil},
		{"a token outside the gap that no fence check accepted", compactedEvidence([]api.Token{5, 7, 8, 9},
			[]HWMEvent{{Revision: 2, Token: 5}, {Revision: 7, Token: 7, Resync: true}, {Revision: 9, Token: 9}}), []string{"fence-before-forward"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(tc.ev, CheckConfig{ArtifactDir: t.TempDir(), LinearizabilityTimeout: 10 * time.Second})
			if got := checkNames(res); !slices.Equal(got, tc.want) {
				t.Errorf("checkers that failed: %v; want %v (%v)", got, tc.want, res.Violations)
			}
		})
	}
}
