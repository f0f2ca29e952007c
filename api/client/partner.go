package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"fencegate/api"
)

// headerIdempotencyKey carries a partner call's idempotency key.
const headerIdempotencyKey = "Idempotency-Key"

// PartnerRequest is one call to a partner API through the gateway's
// partner route, ANY /v1/partners/{route}/{path}.
type PartnerRequest struct {
	// Method is the HTTP method. Empty means POST.
	Method string
	// Path is the part below the route, such as "accounts/a1/charges",
	// already escaped, with an optional "?query".
	Path string
	// Token is the fencing token; required.
	Token api.Token
	// Resource is sent as X-Fence-Resource, for routes that take the
	// resource from that header. Empty: not sent.
	Resource api.Resource
	// Header holds more request headers, such as Content-Type.
	Header http.Header
	// Body is the request's body; nil means none.
	Body []byte
	// IdempotencyKey is sent as Idempotency-Key by every attempt of the
	// call, so that the gateway forwards the call at most once and
	// replays its answer to retries. Empty means a new random key
	// (NewIdempotencyKey), made once for the call.
	IdempotencyKey string
	// Attempts bounds the attempts of the call. Zero means 3. A failed
	// attempt is retried when the answer may change later: the gateway
	// unreachable, a retryable problem (503 fence-unavailable or
	// resource-busy, 409 idempotency-in-flight), honouring Retry-After.
	Attempts int
}

// NewIdempotencyKey returns a random idempotency key: 32 hex digits.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

// CallPartner sends req to the partner route named route, retrying with
// the same idempotency key as PartnerRequest.Attempts says. It returns the
// partner's answer, whatever its status (the caller closes its body), or
// an error: an *Error when the gateway itself refused the call (such as
// api.ErrStaleToken), a transport error when the gateway could not be
// reached at the last attempt.
func (c *Client) CallPartner(ctx context.Context, route string, req PartnerRequest) (*http.Response, error) {
	if route == "" || strings.Contains(route, "/") {
		return nil, fmt.Errorf("fencegate: partner route %q: want one path segment", route)
	}
	if req.Token == 0 {
		return nil, fmt.Errorf("fencegate: partner call without a token: %w", api.ErrMissingToken)
	}
	method := req.Method
	if method == "" {
		method = http.MethodPost
	}
	attempts := req.Attempts
	if attempts == 0 {
		attempts = 3
	}
	key := req.IdempotencyKey
	if key == "" {
		key = NewIdempotencyKey()
	}
	path, rawQuery, _ := strings.Cut(strings.TrimPrefix(req.Path, "/"), "?")
	target := "/v1/partners/" + route + "/" + path
	if rawQuery != "" {
		target += "?" + rawQuery
	}
	var lastErr error
	for attempt := 1; attempt <= attempts; attempt++ {
		header := req.Header.Clone()
		if header == nil {
			header = http.Header{}
		}
		header.Set(api.HeaderFenceToken, req.Token.String())
		header.Set(headerIdempotencyKey, key)
		if req.Resource != "" {
			header.Set(api.HeaderFenceResource, string(req.Resource))
		}
		r := request{method: method, path: target, header: header}
		if req.Body != nil {
			r.body = bytes.NewReader(req.Body)
		}
		resp, err := c.roundTrip(ctx, r)
		if err == nil {
			resp, err = partnerAnswer(method, target, resp)
		}
		if err == nil {
			return resp, nil
		}
		lastErr = err
		delay, retry := retryAfter(err, attempt)
		if !retry || attempt == attempts {
			break
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, errors.Join(lastErr, ctx.Err())
		case <-timer.C:
		}
	}
	return nil, lastErr
}

// partnerAnswer returns resp, a partner's answer passed through, or an
// *Error when resp is the gateway's own problem+json (its type starts with
// api.ProblemTypePrefix). A partner's problem+json is returned as it came.
func partnerAnswer(method, path string, resp *http.Response) (*http.Response, error) {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), api.ContentTypeProblem) {
		return resp, nil
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("fencegate %s %s: reading the answer: %w", method, path, err)
	}
	var p api.Problem
	if json.Unmarshal(b, &p) == nil && strings.HasPrefix(p.Type, api.ProblemTypePrefix) {
		return nil, &Error{Method: method, Path: path, Problem: p, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"))}
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

// retryAfter says whether a failed attempt may be retried and after how
// long: transport errors and retryable problems are; the delay grows with
// the attempt, or is the answer's Retry-After.
func retryAfter(err error, attempt int) (time.Duration, bool) {
	delay := time.Duration(attempt) * 200 * time.Millisecond
	var e *Error
	if errors.As(err, &e) {
		if !e.Problem.Retryable {
			return 0, false
		}
		if e.retryAfter > 0 {
			delay = e.retryAfter
		}
		return delay, true
	}
	return delay, true // the gateway could not be reached
}

// parseRetryAfter reads a Retry-After header in seconds.
func parseRetryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 || n > 3600 {
		return 0
	}
	return time.Duration(n) * time.Second
}
