package robustness

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"fencegate/api"
)

// multipartEvidence is a history of object "k": holder 5 writes w5 by a
// PUT; holder 7 creates upload u7 (its fence check raises the mark to 7),
// and while it is in progress holder 5, stale, aborts u7 by the store's
// id with token 5, answered abortStatus; then holder 7 completes u7 as
// write m7, answered completeStatus (an acked completion is S3's version
// after w5), and a read finds what the store holds.
func multipartEvidence(abortStatus int) Evidence {
	abort := Op{ID: "a5", Process: 2, Kind: OpUploadAbort, Key: "k", Token: 5, Call: 20, Return: 25, Status: abortStatus,
		Upload: "u7", UploadToken: 7, ByStoreID: true, Stale: true}
	switch abortStatus {
	case http.StatusNoContent:
		abort.Outcome = Acked
	case http.StatusConflict:
		abort.Outcome, abort.ProblemType, abort.HighWaterMark = RefusedStale, api.ProblemTypePrefix+"stale-token", 7
	}
	complete := writeOp("m7", 1, 7, 30, 35, http.StatusOK, "")
	complete.ReplacedKnown, complete.Upload, complete.UploadToken = false, "u7", 7
	ops := []Op{
		writeOp("w5", 0, 5, 0, 5, http.StatusCreated, ""),
		{ID: "m7-create", Process: 1, Kind: OpUploadCreate, Key: "k", Token: 7, UploadToken: 7, Upload: "u7", Call: 10, Return: 12, Status: http.StatusOK, Outcome: Acked},
		abort,
		complete,
		readOp(3, 100, 110, "m7", 7),
	}
	m7 := s3Write(2, "m7", 7)
	m7.Condition = `If-Match: "e-w5"`
	return Evidence{
		Ops: ops, Keys: []string{"k"}, Writes: []StoreWrite{s3Write(1, "w5", 5), m7},
		HWMEvents: map[string][]HWMEvent{"k": {{Revision: 2, Token: 5}, {Revision: 4, Token: 7}}}, FinalHWM: map[string]api.Token{"k": 7},
		MemberHWM: map[string]map[string]api.Token{}, Final: map[string]ObjectState{"k": {Exists: true, Op: "m7", Token: 7}},
	}
}

// TestCheckStaleAborts: an abort of a newer holder's upload by the store's
// id with a token below the one the upload is bound to must be refused;
// one that was accepted is a violation (stale-abort), and a history whose
// stale abort was refused has none.
func TestCheckStaleAborts(t *testing.T) {
	for _, tc := range []struct {
		name        string
		abortStatus int
		want        []string
	}{
		{"the stale abort refused 409", http.StatusConflict, nil},
		{"the stale abort accepted 204", http.StatusNoContent, []string{"stale-abort"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(multipartEvidence(tc.abortStatus), CheckConfig{ArtifactDir: t.TempDir(), LinearizabilityTimeout: 10 * time.Second})
			if got := checkNames(res); !slices.Equal(got, tc.want) {
				t.Errorf("checkers that failed: %v; want %v (%v)", got, tc.want, res.Violations)
			}
		})
	}
}

// TestCheckStaleCompletion: a completion of holder 5's upload, acked after
// holder 7's completion was acked, is a write with a token below an
// accepted one: the model refuses the history.
func TestCheckStaleCompletion(t *testing.T) {
	ev := multipartEvidence(http.StatusConflict)
	stale := writeOp("m5", 2, 5, 50, 55, http.StatusOK, "")
	stale.ReplacedKnown, stale.Upload, stale.UploadToken, stale.Stale = false, "u5", 5, true
	ev.Ops = append(ev.Ops[:len(ev.Ops)-1], stale, readOp(3, 100, 110, "m5", 5))
	m5 := s3Write(3, "m5", 5)
	m5.Condition = `If-Match: "e-m7"`
	ev.Writes = append(ev.Writes, m5)
	ev.Final["k"] = ObjectState{Exists: true, Op: "m5", Token: 5}
	res := Check(ev, CheckConfig{ArtifactDir: t.TempDir(), LinearizabilityTimeout: 10 * time.Second})
	if got := checkNames(res); !slices.Contains(got, "linearizability") || !slices.Contains(got, "versions-monotonic") {
		t.Errorf("checkers that failed: %v; want linearizability and versions-monotonic among them (%v)", got, res.Violations)
	}
}
