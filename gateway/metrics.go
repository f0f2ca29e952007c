package gateway

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"fencegate/api"
	"fencegate/edge"
)

// instrumentedPartners times the partner routes' admissions (their fence
// checks) like the object routes' fence checks, and traces them.
type instrumentedPartners struct {
	PartnerStore
	edge *edge.Edge
}

var _ PartnerStore = (*instrumentedPartners)(nil)

// AdmitPartner times and traces the admission as the edge times fence
// checks (edge.Edge.TimeAdmission).
func (p *instrumentedPartners) AdmitPartner(ctx context.Context, req api.PartnerAdmission) (api.Admission, error) {
	return p.edge.TimeAdmission(ctx, req, p.PartnerStore.AdmitPartner)
}

// spaceCollector exports the fence store's space reading (Config.
// StoreSpace) at each scrape, through the readiness cache: a scrape reads
// it at most once per Config.ReadinessCache, shared with /readyz. It
// exports nothing when the latest reading failed (the readiness probes
// say why), rather than a size of zero.
type spaceCollector struct {
	readiness          *readiness
	size, inUse, quota *prometheus.Desc
}

func newSpaceCollector(rd *readiness) *spaceCollector {
	return &spaceCollector{
		readiness: rd,
		size: prometheus.NewDesc("fencegate_etcd_db_size_bytes",
			"Size of etcd's database, as the member the gateway's connection reaches reports it: what etcd compares with its quota.", nil, nil),
		inUse: prometheus.NewDesc("fencegate_etcd_db_size_in_use_bytes",
			"The part of etcd's database that holds data; defragmenting gives the rest back.", nil, nil),
		quota: prometheus.NewDesc("fencegate_etcd_db_quota_bytes",
			"etcd's database quota (--quota-backend-bytes): at this size etcd raises its NOSPACE alarm and refuses every write.", nil, nil),
	}
}

// Describe sends the three gauges' descriptions.
func (c *spaceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.size
	ch <- c.inUse
	ch <- c.quota
}

// Collect reads the space (or reuses a fresh reading) and sends it.
func (c *spaceCollector) Collect(ch chan<- prometheus.Metric) {
	space, ok := c.readiness.readSpace(context.Background())
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(space.Size))
	ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(space.InUse))
	ch <- prometheus.MustNewConstMetric(c.quota, prometheus.GaugeValue, float64(space.Quota))
}

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
	return func(g *Gateway) {
		if batches != nil {
			g.withEdge = append(g.withEdge, func() { g.edge.Registry().MustRegister(batches.histogram) })
		}
	}
}
