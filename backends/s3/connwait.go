package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptrace"
	"time"

	"fencegate/api"
)

// errConnWait is the cause of a request's end when no connection to S3
// came free (or could be dialed) within Config.ConnWaitTimeout.
var errConnWait = errors.New("no connection to S3 within the connection wait timeout")

// boundConnWait returns ctx with a bound on the wait for a connection:
// unless the request gets one within timeout, ctx is cancelled with the
// cause errConnWait. The transport's ResponseHeaderTimeout bounds the
// wait for the answer only once the request is sent, and the pool's
// MaxConnsPerHost makes requests queue, unbounded, for a connection;
// without this, clients that hold every connection (a slow reader of a
// large object) stall every other request. Once the request has its
// connection the bound is off, so it never cuts a body in flight.
//
// The caller calls release once the request, its answer's body included,
// is done with. A timeout of zero or less means no bound.
func boundConnWait(ctx context.Context, timeout time.Duration) (_ context.Context, release func()) {
	if timeout <= 0 {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	timer := time.AfterFunc(timeout, func() { cancel(errConnWait) })
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { timer.Stop() },
	})
	return ctx, func() {
		timer.Stop()
		cancel(nil)
	}
}

// connWaitError returns err as an api.ErrUpstreamTimeout if ctx (from
// boundConnWait) ended for want of a connection, else nil: nothing was
// sent.
func connWaitError(ctx context.Context, op string, p api.ObjectPath, timeout time.Duration) error {
	if !errors.Is(context.Cause(ctx), errConnWait) {
		return nil
	}
	return fmt.Errorf("s3 %s %s/%s: %w: %w (%v)", op, p.Bucket, p.Key, api.ErrUpstreamTimeout, errConnWait, timeout)
}

// releasingBody is an answer's body that releases its request's context
// when closed.
type releasingBody struct {
	io.ReadCloser
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}
