package edge

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"

	"fencegate/api"
)

// headerRequestID carries the request id, from the client or made here.
const headerRequestID = "X-Request-Id"

// validRequestID reports whether a client's X-Request-Id may be used as
// the request's id: 1 to 128 visible ASCII characters.
func validRequestID(id string) bool {
	return id != "" && len(id) <= 128 && api.VisibleASCII(id)
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

// LimitRequestSize returns the middleware that refuses, with refuse, a
// request whose target (path and query, as the client sent them) is
// longer than Config.MaxTargetBytes (api.ErrTargetTooLong: 414), or
// whose header block is larger than Config.MaxHeaderBytes
// (api.ErrHeadersTooLarge: 431). It runs before the routing, the
// authentication and the handlers, which would each read the path; an
// answer and a log line echo at most api.MaxEchoBytes of it.
func (e *Edge) LimitRequestSize(refuse func(http.ResponseWriter, *http.Request, error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := e.CheckRequestSize(r); err != nil {
				refuse(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// CheckRequestSize is LimitRequestSize's check, for a door that answers
// it in a dialect of its own before it reads anything else of the
// request: api.ErrTargetTooLong, api.ErrHeadersTooLarge, or nil.
func (e *Edge) CheckRequestSize(r *http.Request) error {
	target := r.RequestURI
	if target == "" { // a request not read by a server, as in tests
		target = r.URL.RequestURI()
	}
	if len(target) > e.cfg.MaxTargetBytes {
		return fmt.Errorf("%w: %d bytes, limit %d", api.ErrTargetTooLong, len(target), e.cfg.MaxTargetBytes)
	}
	size := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4
	for name, values := range r.Header {
		for _, v := range values {
			size += len(name) + len(v) + 4 // ": " and CRLF
		}
	}
	if size > e.cfg.MaxHeaderBytes {
		return fmt.Errorf("%w: %d bytes, limit %d", api.ErrHeadersTooLarge, size, e.cfg.MaxHeaderBytes)
	}
	return nil
}
