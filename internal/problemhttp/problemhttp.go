// Package problemhttp writes problem+json answers (RFC 9457), the error
// dialect of the doors that speak fencegate's own API: the REST API
// (package rest) and the partner routes (package partners). The problem
// itself comes from the one error table, api.ProblemFor; what a door
// notes and logs of it is the edge's (edge.Edge.NoteProblem, LogProblem).
package problemhttp

import (
	"net/http"

	"fencegate/api"
	"fencegate/edge"
)

// RetryAfterSeconds is what 503 and 429 answers tell clients to wait.
const RetryAfterSeconds = "1"

// For is the answer to r for err: the error table's problem
// (api.ProblemFor), about r's path and request id. What the problem
// echoes of the request, its path (instance) and a detail that may quote
// it, is cut to api.MaxEchoBytes (api.Truncate): every problem body,
// sent or stored for a replay, is made here. The resource is not cut: it
// is a validated name, at most 1,091 bytes (S3's 1,024-byte key under a
// 63-byte bucket), and a cut one would name another resource.
func For(r *http.Request, err error) api.Problem {
	p := api.ProblemFor(err)
	p.Instance = api.Truncate(r.URL.Path, api.MaxEchoBytes)
	p.Detail = api.Truncate(p.Detail, api.MaxEchoBytes)
	p.RequestID = edge.RequestID(r.Context())
	return p
}

// SetHeaders sets the headers every problem answer has, stored or sent:
// its media type, and that it is not to be cached.
func SetHeaders(h http.Header) {
	h["Content-Type"] = []string{api.ContentTypeProblem}
	h["Cache-Control"] = []string{"no-store"}
}

// Body is p's problem+json body.
func Body(p api.Problem) []byte {
	return append(p.AppendJSON(make([]byte, 0, 512)), '\n')
}

// Write answers p: its status, Retry-After on a 503 or 429, the problem
// headers, and its body but to a HEAD.
func Write(w http.ResponseWriter, r *http.Request, p api.Problem) {
	if p.Status == http.StatusServiceUnavailable || p.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", RetryAfterSeconds)
	}
	SetHeaders(w.Header())
	w.WriteHeader(p.Status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(Body(p))
	}
}
