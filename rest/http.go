package rest

import (
	"encoding/json"
	"fencegate/internal/problemhttp"
	"net/http"
)

// writeError answers err as problem+json. The status comes from the one
// error table, api.ProblemFor. Errors of no known class are logged (by
// the edge) and answered 500 without their details.
func (g *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	p := problemhttp.For(r, err)
	audited := g.edge.NoteProblem(r, p, err, g.isWrite(r), g.requestSubject) // metrics, and the audit line of a refused write
	g.edge.LogProblem(r.Context(), p, err, audited)
	problemhttp.Write(w, r, p)
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (g *API) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "up"})
}
