package testenv

import (
	"context"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// RequestCounter counts the gRPC calls an etcd client made: every KV
// request, transaction, lease and watch call the client sends.
type RequestCounter struct {
	n atomic.Int64
}

// Count returns the number of calls so far.
func (c *RequestCounter) Count() int64 { return c.n.Load() }

// CountingClient returns a new client of e, closed when the test finishes,
// and a counter of every request it sends. Tests use it to prove that a
// code path made no etcd round trip.
func (e *Etcd) CountingClient(tb testing.TB) (*clientv3.Client, *RequestCounter) {
	tb.Helper()
	counter := &RequestCounter{}
	c := e.newClient(tb,
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			counter.n.Add(1)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			counter.n.Add(1)
			return streamer(ctx, desc, cc, method, opts...)
		}),
	)
	return c, counter
}
