package api

import (
	"errors"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// ContentTypeProblem is the media type of Problem bodies (RFC 9457).
const ContentTypeProblem = "application/problem+json"

// Problem is an RFC 9457 problem details body, with fencegate's extension
// members. Zero extension members are omitted.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Instance is the request path the problem is about.
	Instance string `json:"instance,omitempty"`

	// Resource is the fenced resource the problem is about.
	Resource Resource `json:"resource,omitempty"`
	// Token is the request's fencing token, where it was valid.
	Token Token `json:"token,omitempty"`
	// HighWaterMark is the resource's current high-water mark, on stale
	// token refusals.
	HighWaterMark Token `json:"high_water_mark,omitempty"`
	// Retryable says whether the same request may succeed if sent again
	// later (after Retry-After, where the answer has one).
	Retryable bool `json:"retryable,omitempty"`
	// RequestID matches the gateway's log lines for this request.
	RequestID string `json:"request_id,omitempty"`
}

// ProblemFor builds the problem body for err from the error table. Errors of
// no known class become a 500 whose detail says nothing of the cause: the
// cause belongs in the server's log, not on the wire.
func ProblemFor(err error) Problem {
	c := classOf(err)
	p := Problem{
		Type:      ProblemTypePrefix + c.slug,
		Title:     c.title,
		Status:    c.status,
		Retryable: c.retryable,
	}
	if c.err != nil {
		p.Detail = err.Error()
	}
	var stale *StaleTokenError
	if errors.As(err, &stale) {
		p.Resource = stale.Resource
		p.Token = stale.Token
		p.HighWaterMark = stale.HighWaterMark
	}
	return p
}

// Err returns the error class of p's type, wrapped with p's detail, so
// that errors.Is works on the client side. A stale-token problem becomes a
// *StaleTokenError. Unknown types give an error that wraps no class.
func (p Problem) Err() error {
	class := ErrorForProblemType(p.Type)
	if errors.Is(class, ErrStaleToken) {
		return &StaleTokenError{Resource: p.Resource, Token: p.Token, HighWaterMark: p.HighWaterMark}
	}
	if class == nil {
		return errors.New(p.Title + ": " + p.Detail)
	}
	return &problemError{p: p, class: class}
}

type problemError struct {
	p     Problem
	class error
}

func (e *problemError) Error() string {
	if e.p.Detail != "" {
		return e.p.Detail
	}
	return e.p.Title
}

func (e *problemError) Unwrap() error { return e.class }

// MaxEchoBytes bounds what the gateway echoes of a request in a problem
// body (instance, detail) and in a log line (path): see Truncate. A
// client chooses its path, up to the request-target limit, and each of
// its bytes can take 6 once escaped; what is cut keeps a log line or an
// answer about it small.
const MaxEchoBytes = 1 << 10

// Worst-case bytes a character takes once escaped, in problem+json
// (AppendJSON, which also escapes <, > and &) and in the gateway's log
// lines (slog's text and JSON handlers).
const (
	escapedControl  = 6  // \u00XX; an invalid byte: \ufffd (text: \xXX)
	escapedNonPrint = 10 // text: \UXXXXXXXX
	escapedHTML     = 6  // <, >, &: \u003c in problem+json
	escapedQuote    = 2  // ", \: a backslash before it
	// escapedPerByte is the most a byte of s can take: a control
	// character or an invalid byte (a non-printable rune takes at most 10
	// for its 2 to 4 bytes).
	escapedPerByte = escapedControl
)

// Truncate returns s if it takes at most limit bytes once escaped (in
// problem+json and in log lines, the worst of them); otherwise the longest
// prefix of s, cut between characters, that does, followed by
// "…(truncated, N bytes)", N being len(s). What it returns is never more
// than limit bytes escaped, plus the marker.
func Truncate(s string, limit int) string {
	if len(s)*escapedPerByte <= limit {
		return s // fits however it escapes: no need to look
	}
	cost := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		cost += escapedSize(r, size)
		if cost > limit {
			return s[:i] + "…(truncated, " + strconv.Itoa(len(s)) + " bytes)"
		}
		i += size
	}
	return s
}

// VisibleASCII reports whether s holds only printable ASCII characters
// other than space (0x21 to 0x7e): what a request id or a header value
// that fencegate passes on may hold.
func VisibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// escapedSize is the most bytes that rune r, of size bytes in the string
// (an invalid byte is utf8.RuneError of size 1), takes once escaped.
func escapedSize(r rune, size int) int {
	switch {
	case r == '"' || r == '\\':
		return escapedQuote
	case r == '<' || r == '>' || r == '&':
		return escapedHTML
	case r >= 0x20 && r < 0x7f:
		return 1
	case r < utf8.RuneSelf, r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
		return escapedControl
	case !unicode.IsPrint(r):
		return escapedNonPrint
	}
	return size
}
