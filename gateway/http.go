package gateway

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"fencegate/api"
	"fencegate/edge"
)

// retryAfterSeconds is what 503 and 429 answers tell clients to wait.
const retryAfterSeconds = "1"

// writeError answers err as problem+json. The status comes from the one
// error table, api.ProblemFor. Errors of no known class are logged here
// and answered 500 without their details.
func (g *Gateway) writeError(w http.ResponseWriter, r *http.Request, err error) {
	p := problemFor(r, err)
	audited := g.edge.NoteProblem(r, p, err, isWrite(r), g.requestSubject) // metrics, and the audit line of a refused write
	switch ctx := r.Context(); {
	case p.Status >= 500:
		g.edge.Logger(ctx).Error("request failed", "status", p.Status, "err", err, "store_answer", api.StoreAnswer(err))
		if errors.Is(err, api.ErrNoSpace) {
			g.hintNoSpace()
		}
	case audited: // the "write refused" line says it all
	case g.log.Enabled(ctx, slog.LevelDebug):
		g.edge.Logger(ctx).Debug("request refused", "status", p.Status, "err", err, "store_answer", api.StoreAnswer(err))
	}
	if p.Status == http.StatusServiceUnavailable || p.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	setProblemHeaders(w.Header())
	w.WriteHeader(p.Status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(problemBody(p))
	}
}

// problemFor is the answer to r for err: the error table's problem
// (api.ProblemFor), about r's path and request id. What the problem
// echoes of the request, its path (instance) and a detail that may quote
// it, is cut to api.MaxEchoBytes (api.Truncate): every problem body,
// sent or stored for a replay, is made here. The resource is not cut: it
// is a validated name, at most 1,091 bytes (S3's 1,024-byte key under a
// 63-byte bucket), and a cut one would name another resource.
func problemFor(r *http.Request, err error) api.Problem {
	p := api.ProblemFor(err)
	p.Instance = api.Truncate(r.URL.Path, api.MaxEchoBytes)
	p.Detail = api.Truncate(p.Detail, api.MaxEchoBytes)
	p.RequestID = edge.RequestID(r.Context())
	return p
}

// setProblemHeaders sets the headers every problem answer has, stored or
// sent: its media type, and that it is not to be cached.
func setProblemHeaders(h http.Header) {
	h["Content-Type"] = []string{api.ContentTypeProblem}
	h["Cache-Control"] = []string{"no-store"}
}

// problemBody is p's problem+json body.
func problemBody(p api.Problem) []byte {
	return append(p.AppendJSON(make([]byte, 0, 512)), '\n')
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (g *Gateway) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "up"})
}
