// Package upstream maps the failures that object stores answer alike to
// the api error classes: the HTTP status of a failed read, and transport
// failures. Each backend first maps what is its store's own (S3's error
// codes, the GCS client's sentinel errors), then hands the rest here, so
// that the same status means the same class on every store.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"fencegate/api"
)

// ReadStatus maps the failure err of a read whose answer had HTTP status
// status (0: none): 404 to api.ErrNotFound, 412 (a read's If-Match or
// If-Unmodified-Since) to api.ErrPreconditionFailed, 416 (a range past the
// end) to api.ErrRangeNotSatisfiable, and anything else as Transport does.
func ReadStatus(status int, err error) error {
	switch status {
	case http.StatusNotFound:
		return fmt.Errorf("%w: %w", api.ErrNotFound, err)
	case http.StatusPreconditionFailed:
		return fmt.Errorf("%w: %w", api.ErrPreconditionFailed, err)
	case http.StatusRequestedRangeNotSatisfiable:
		return fmt.Errorf("%w: %w", api.ErrRangeNotSatisfiable, err)
	}
	return Transport(err)
}

// Transport maps timeouts to api.ErrUpstreamTimeout and everything else
// to api.ErrUpstream.
func Transport(err error) error {
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout() {
		return fmt.Errorf("%w: %w", api.ErrUpstreamTimeout, err)
	}
	return fmt.Errorf("%w: %w", api.ErrUpstream, err)
}
