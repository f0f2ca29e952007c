package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
)

// fenceBatchBuckets are the bounds of fencegate_fence_batch_size: powers
// of two up to the token store's largest batch (64) and one above.
var fenceBatchBuckets = prometheus.ExponentialBuckets(1, 2, 8)

// FenceBatchSizes is the histogram fencegate_fence_batch_size: how many
// fence checks each of the token store's group-commit transactions
// carried. The token store observes the sizes through a function (its
// Config.ObserveFenceBatch is Observe), as it takes no metrics client;
// WithFenceBatchSizes exports them on the gateway's registry. It is safe
// for concurrent use, before and after it is registered.
type FenceBatchSizes struct {
	histogram prometheus.Histogram
}

// NewFenceBatchSizes returns a FenceBatchSizes with nothing observed.
func NewFenceBatchSizes() *FenceBatchSizes {
	return &FenceBatchSizes{histogram: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fencegate_fence_batch_size",
		Help:    "Fence checks that each group-commit transaction sent to etcd carried: 1 for a check sent alone, more when checks that came in together shared one transaction. Checks confirmed without a write, and every check with group commit disabled, are not counted.",
		Buckets: fenceBatchBuckets,
	})}
}

// Observe records one transaction of size fence checks.
func (b *FenceBatchSizes) Observe(size int) { b.histogram.Observe(float64(size)) }

// WithFenceBatchSizes exports batches, which the token store the gateway
// checks fences with observes, on the gateway's registry. Nil exports
// nothing.
func WithFenceBatchSizes(batches *FenceBatchSizes) Option {
	return func(g *Gateway) { g.batches = batches }
}
