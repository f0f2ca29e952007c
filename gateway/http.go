package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"fencegate/api"
)

// headerRequestID carries the request id, from the client or made here.
const headerRequestID = "X-Request-Id"

// retryAfterSeconds is what 503 and 429 answers tell clients to wait.
const retryAfterSeconds = "1"

// validRequestID reports whether a client's X-Request-Id may be used as
// the request's id: 1 to 128 visible ASCII characters.
func validRequestID(id string) bool {
	return id != "" && len(id) <= 128 && visibleASCII(id)
}

// visibleASCII reports whether s holds only printable ASCII characters
// other than space (0x21 to 0x7e).
func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

// limitTarget answers 414 with a problem body when the request target
// (path and query, as the client sent them) is longer than
// Config.MaxTargetBytes. It runs before the routing, the authentication
// and the handlers, which would each read the path, and the answer and
// the log line echo at most api.MaxEchoBytes of it (problemFor,
// logExchange).
func (g *Gateway) limitTarget(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := g.checkTarget(r); err != nil {
			g.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkTarget is limitTarget's check: api.ErrTargetTooLong, or nil.
func (g *Gateway) checkTarget(r *http.Request) error {
	target := r.RequestURI
	if target == "" { // a request not read by a server, as in tests
		target = r.URL.RequestURI()
	}
	if len(target) > g.cfg.MaxTargetBytes {
		return fmt.Errorf("%w: %d bytes, limit %d", api.ErrTargetTooLong, len(target), g.cfg.MaxTargetBytes)
	}
	return nil
}

// limitHeaders answers 431 with a problem body when the request's header
// block exceeds Config.MaxHeaderBytes.
func (g *Gateway) limitHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := g.checkHeaders(r); err != nil {
			g.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkHeaders is limitHeaders' check: api.ErrHeadersTooLarge, or nil.
func (g *Gateway) checkHeaders(r *http.Request) error {
	size := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4
	for name, values := range r.Header {
		for _, v := range values {
			size += len(name) + len(v) + 4 // ": " and CRLF
		}
	}
	if size > g.cfg.MaxHeaderBytes {
		return fmt.Errorf("%w: %d bytes, limit %d", api.ErrHeadersTooLarge, size, g.cfg.MaxHeaderBytes)
	}
	return nil
}

// writeError answers err as problem+json. The status comes from the one
// error table, api.ProblemFor. Errors of no known class are logged here
// and answered 500 without their details.
func (g *Gateway) writeError(w http.ResponseWriter, r *http.Request, err error) {
	p := problemFor(r, err)
	audited := g.noteProblem(r, p, err) // metrics, and the audit line of a refused write
	switch ctx := r.Context(); {
	case p.Status >= 500:
		g.logger(ctx).Error("request failed", "status", p.Status, "err", err, "store_answer", api.StoreAnswer(err))
		if errors.Is(err, api.ErrNoSpace) {
			g.hintNoSpace()
		}
	case audited: // the "write refused" line says it all
	case g.log.Enabled(ctx, slog.LevelDebug):
		g.logger(ctx).Debug("request refused", "status", p.Status, "err", err, "store_answer", api.StoreAnswer(err))
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
	p.RequestID = requestID(r.Context())
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
