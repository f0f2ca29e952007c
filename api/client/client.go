// Package client is fencegate's Go SDK. It speaks the gateway's HTTP API
// with the standard library only: sessions kept alive in the background,
// locks whose tokens are fencing tokens ([Client.WithLock]), fenced object
// writes and reads, partner calls with idempotency keys, and errors that
// errors.Is recognises (api.ErrStaleToken, api.ErrLockNotHeld, ...).
//
// The typical use is one call:
//
//	c := &client.Client{BaseURL: "http://127.0.0.1:8080"}
//	err := c.WithLock(ctx, "report", func(ctx context.Context, token api.Token) error {
//		_, err := c.PutObject(ctx, "reports", "q3.csv", token, bytes.NewReader(data))
//		return err
//	})
//
// fn's ctx is cancelled when the session behind the lock is lost. That is
// a hint, not a guarantee: a process can stall right after checking it.
// The guarantee is the token: the gateway refuses a write whose token is
// stale (409 stale-token), and, on buckets configured with the "held"
// check, a write whose lock is no longer held (409 lock-not-held).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"fencegate/api"
)

// Client talks to one fencegate gateway. Its zero value is not usable: set
// BaseURL. A Client is safe for concurrent use; do not change its fields
// while it is in use.
type Client struct {
	// BaseURL is the gateway's URL, such as "http://127.0.0.1:8080".
	// Required.
	BaseURL string
	// HTTPClient sends the requests. Nil means http.DefaultClient. A
	// Timeout on it must exceed api.MaxLockWait, or lock waits fail.
	HTTPClient *http.Client
	// SessionTTL is the TTL of the sessions that WithLock creates, rounded
	// up to whole seconds. Zero means api.DefaultSessionTTL seconds.
	SessionTTL time.Duration
	// APIKey, when not empty, is sent with every request as
	// "Authorization: Bearer <APIKey>", for gateways that authenticate
	// clients by API key. Empty sends no Authorization header (a gateway
	// without auth, or one that authenticates the client certificate
	// configured on HTTPClient's transport).
	APIKey string
	// TicketThreshold, when positive, makes PutObject send a body larger
	// than this many bytes straight to the store on a ticket
	// (PutObjectOnTicket) rather than through the gateway, when the body
	// can be read again (an io.ReadSeeker, such as *os.File,
	// *bytes.Reader, *strings.Reader); a bucket whose store takes no
	// tickets (501, GCS) is written through the gateway. Zero or negative
	// means never: every write goes through the gateway.
	TicketThreshold int64
	// TicketPartSize, when positive, makes PutObjectOnTicket (and so
	// PutObject above TicketThreshold) send a body larger than this many
	// bytes in parts of this size, on a multipart ticket completed
	// through the gateway (MultipartTicket, CompleteUpload): api.MinPartSize
	// to api.MaxPartSize, at most api.MaxParts parts, for a gateway that
	// fences multipart uploads. The parts go one after another, and their
	// tickets expire together (the gateway's ticket expiry, 15 s by
	// default): the whole body must reach the store within it. Zero or
	// negative means one PUT per ticket.
	TicketPartSize int64
}

// Error is a problem+json answer of the gateway. It unwraps to the error
// class of the problem's type, so that errors.Is(err, api.ErrStaleToken)
// and errors.As(err, new(*api.StaleTokenError)) work.
type Error struct {
	Method string
	Path   string
	// Problem is the answer's body: its type, status, detail, and
	// whether the same request may succeed later (Retryable).
	Problem api.Problem
	// retryAfter is the answer's Retry-After, zero if none.
	retryAfter time.Duration
}

func (e *Error) Error() string {
	return fmt.Sprintf("fencegate %s %s: %d %s", e.Method, e.Path, e.Problem.Status, e.Problem.Err())
}

// Unwrap returns the problem's error class (see api.Problem.Err).
func (e *Error) Unwrap() error { return e.Problem.Err() }

// maxProblemBytes bounds the error bodies the client reads.
const maxProblemBytes = 64 << 10

func (c *Client) httpClient() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return http.DefaultClient
}

// request is one call to the gateway.
type request struct {
	method string
	path   string // escaped, from the root: "/v1/locks/job"
	query  url.Values
	header http.Header
	body   io.Reader
	json   any // when set, the body, encoded
}

// send sends req and returns the answer when its status is one of ok;
// otherwise it reads the answer and returns an *Error (or a plain error
// for answers that are not problem+json). The caller closes the body.
func (c *Client) send(ctx context.Context, req request, ok ...int) (*http.Response, error) {
	resp, err := c.roundTrip(ctx, req)
	if err != nil {
		return nil, err
	}
	for _, s := range ok {
		if resp.StatusCode == s {
			return resp, nil
		}
	}
	defer resp.Body.Close()
	return nil, answerError(req.method, req.path, resp)
}

// roundTrip sends req and returns the answer, whatever its status.
func (c *Client) roundTrip(ctx context.Context, req request) (*http.Response, error) {
	if c.BaseURL == "" {
		return nil, errors.New("fencegate client: no BaseURL")
	}
	target := strings.TrimSuffix(c.BaseURL, "/") + req.path
	if len(req.query) > 0 {
		target += "?" + req.query.Encode()
	}
	body := req.body
	if req.json != nil {
		b, err := json.Marshal(req.json)
		if err != nil {
			return nil, fmt.Errorf("fencegate %s %s: %w", req.method, req.path, err)
		}
		body = bytes.NewReader(b)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, target, body)
	if err != nil {
		return nil, fmt.Errorf("fencegate %s %s: %w", req.method, req.path, err)
	}
	for name, values := range req.header {
		hr.Header[name] = values
	}
	if req.json != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if c.APIKey != "" {
		hr.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := c.httpClient().Do(hr)
	if err != nil {
		return nil, fmt.Errorf("fencegate %s %s: %w", req.method, req.path, err)
	}
	return resp, nil
}

// answerError turns an unexpected answer into an error: an *Error for
// problem+json, else a plain error with the status.
func answerError(method, path string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes))
	if strings.HasPrefix(resp.Header.Get("Content-Type"), api.ContentTypeProblem) {
		var p api.Problem
		if err := json.Unmarshal(b, &p); err == nil && p.Type != "" {
			return &Error{Method: method, Path: path, Problem: p, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"))}
		}
	}
	return fmt.Errorf("fencegate %s %s: unexpected answer %s: %.200q", method, path, resp.Status, b)
}

// sendJSON sends req and decodes a JSON answer with status ok into out.
func (c *Client) sendJSON(ctx context.Context, req request, ok int, out any) error {
	return c.sendJSONUpTo(ctx, req, maxProblemBytes, out, ok)
}

// sendJSONUpTo is sendJSON for an answer of up to limit bytes, with any
// status of ok.
func (c *Client) sendJSONUpTo(ctx context.Context, req request, limit int64, out any, ok ...int) error {
	resp, err := c.send(ctx, req, ok...)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, limit)).Decode(out); err != nil {
		return fmt.Errorf("fencegate %s %s: decoding the answer: %w", req.method, req.path, err)
	}
	return nil
}

// escapePath escapes each '/'-separated segment of p for a URL path.
func escapePath(p string) string {
	segments := strings.Split(p, "/")
	for i, s := range segments {
		segments[i] = url.PathEscape(s)
	}
	return strings.Join(segments, "/")
}

// LockState reads whether a lock is held and its queue length; the
// holder's token is not in the answer (see Session.LockState).
func (c *Client) LockState(ctx context.Context, name string) (api.LockState, error) {
	if err := api.ValidateLockName(name); err != nil {
		return api.LockState{}, err
	}
	var st api.LockState
	err := c.sendJSON(ctx, request{method: http.MethodGet, path: "/v1/locks/" + name}, http.StatusOK, &st)
	return st, err
}

// HighWaterMark reads a resource's high-water mark (zero: no token was ever
// accepted for it), such as api.ObjectResource("reports", "q3.csv").
func (c *Client) HighWaterMark(ctx context.Context, resource api.Resource) (api.Token, error) {
	var f api.Fence
	err := c.sendJSON(ctx, request{method: http.MethodGet, path: "/v1/fences/" + escapePath(string(resource))}, http.StatusOK, &f)
	return f.HighWaterMark, err
}
