package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"fencegate/api"
)

// PutResult is the answer of a fenced write.
type PutResult struct {
	Resource api.Resource `json:"resource"`
	Token    api.Token    `json:"token"`
	ETag     string       `json:"etag"`
	// Created is true when the write created the object.
	Created bool `json:"created"`
	// ReplacedETag is the ETag of the version the write replaced, empty
	// when it created the object.
	ReplacedETag string `json:"replaced_etag,omitempty"`
}

func objectPath(bucket, key string) string {
	return "/v1/objects/" + escapePath(bucket) + "/" + escapePath(key)
}

func tokenHeader(token api.Token) http.Header {
	return http.Header{api.HeaderFenceToken: {token.String()}}
}

// PutObject writes body to bucket/key through the gateway with the fencing
// token. A stale token fails with an error wrapping api.ErrStaleToken (and
// an *api.StaleTokenError with the high-water mark); see the README's API
// section for the other answers. Bodies of known length (*bytes.Reader,
// *bytes.Buffer, *strings.Reader) are sent with a Content-Length; others
// are chunked, which the gateway accepts up to its buffer size (8 MiB by
// default).
//
// With Client.TicketThreshold, a body above it that is an io.ReadSeeker
// goes to the store on a ticket (PutObjectOnTicket), with the same
// answers.
func (c *Client) PutObject(ctx context.Context, bucket, key string, token api.Token, body io.Reader) (*PutResult, error) {
	if res, done, err := c.putAboveThreshold(ctx, bucket, key, token, body); done {
		return res, err
	}
	return c.sendWrite(ctx, request{method: http.MethodPut, path: objectPath(bucket, key), header: tokenHeader(token), body: body})
}

// sendWrite sends req, a fenced write, and returns its result: 201 when
// it created the object, 200 when it replaced one.
func (c *Client) sendWrite(ctx context.Context, req request) (*PutResult, error) {
	var res PutResult
	if err := c.sendJSONUpTo(ctx, req, maxProblemBytes, &res, http.StatusOK, http.StatusCreated); err != nil {
		return nil, err
	}
	return &res, nil
}

// DeleteObject deletes bucket/key through the gateway with the fencing
// token. The high-water mark stays, so a stale writer cannot re-create
// the object. Deleting an absent object is not an error.
func (c *Client) DeleteObject(ctx context.Context, bucket, key string, token api.Token) error {
	resp, err := c.send(ctx, request{method: http.MethodDelete, path: objectPath(bucket, key), header: tokenHeader(token)}, http.StatusNoContent)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// GetOption changes what GetObject asks for.
type GetOption func(http.Header)

// Range asks GetObject for the bytes from first to last, inclusive; a
// negative last means to the end. A range that starts past the end is an
// error wrapping api.ErrRangeNotSatisfiable; the object's ContentRange
// says which bytes came (empty when the gateway sent the whole object).
func Range(first, last int64) GetOption {
	value := "bytes=" + strconv.FormatInt(first, 10) + "-"
	if last >= 0 {
		value += strconv.FormatInt(last, 10)
	}
	return func(h http.Header) { h.Set("Range", value) }
}

// GetObject reads bucket/key, or the part of it that a Range option names.
// The caller closes the object's Body. Token is the fencing token
// recorded on the object (zero: none). An absent object is an error
// wrapping api.ErrNotFound.
func (c *Client) GetObject(ctx context.Context, bucket, key string, opts ...GetOption) (*api.Object, error) {
	header := http.Header{}
	for _, opt := range opts {
		opt(header)
	}
	resp, err := c.send(ctx, request{method: http.MethodGet, path: objectPath(bucket, key), header: header}, http.StatusOK, http.StatusPartialContent)
	if err != nil {
		return nil, err
	}
	obj := &api.Object{
		Body:         resp.Body,
		Size:         resp.ContentLength,
		ContentType:  resp.Header.Get("Content-Type"),
		ETag:         resp.Header.Get("ETag"),
		ContentRange: resp.Header.Get("Content-Range"),
	}
	if t, err := time.Parse(http.TimeFormat, resp.Header.Get("Last-Modified")); err == nil {
		obj.LastModified = t
	}
	if v := resp.Header.Get(api.HeaderFenceToken); v != "" {
		n, err := strconv.ParseUint(v, 10, 63)
		if err != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("fencegate GET %s/%s: %s %q: %w", bucket, key, api.HeaderFenceToken, v, err)
		}
		obj.Token = api.Token(n)
	}
	return obj, nil
}
