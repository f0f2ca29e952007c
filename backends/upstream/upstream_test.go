package upstream

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"fencegate/api"
)

func TestReadStatus(t *testing.T) {
	cause := errors.New("store said no")
	for _, tc := range []struct {
		status int
		err    error
		want   error
	}{
		{404, cause, api.ErrNotFound},
		{412, cause, api.ErrPreconditionFailed},
		{416, cause, api.ErrRangeNotSatisfiable},
		{500, cause, api.ErrUpstream},
		{0, cause, api.ErrUpstream},
		{0, fmt.Errorf("get: %w", context.DeadlineExceeded), api.ErrUpstreamTimeout},
	} {
		got := ReadStatus(tc.status, tc.err)
		if !errors.Is(got, tc.want) || !errors.Is(got, tc.err) {
			t.Errorf("ReadStatus(%d, %v) = %v; want it to wrap %v and the cause", tc.status, tc.err, got, tc.want)
		}
	}
}
