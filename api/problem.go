package api

import (
	"errors"
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
