package partners

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fencegate/api"
)

// IdempotencyUsageReader is what the metrics of idempotency budgets need
// of a PartnerStore, if it has it (tokenstore.Partners has).
type IdempotencyUsageReader interface {
	// IdempotencyUsage returns what the completed idempotency records of
	// account (an api.IdempotencyBudget's) hold in the token store.
	IdempotencyUsage(ctx context.Context, account string) (api.IdempotencyUsage, error)
}

// budgetMetrics export the partner routes' idempotency budgets: the
// records and bytes each route's completed records hold (read at each
// scrape, through the token store's cache of a second), and the requests
// refused because a budget was used up; and each route's budget itself,
// set once from the configuration (a bound that is none is left out), so
// that an alert can fire as the use nears it.
type budgetMetrics struct {
	h            *API
	usage        IdempotencyUsageReader // nil: the store does not say
	records      *prometheus.Desc
	bytes        *prometheus.Desc
	refusals     *prometheus.CounterVec // route
	recordsLimit *prometheus.GaugeVec   // route
	bytesLimit   *prometheus.GaugeVec   // route
}

func newBudgetMetrics(h *API, store PartnerStore) *budgetMetrics {
	m := &budgetMetrics{
		h: h,
		records: prometheus.NewDesc("fencegate_idempotency_records",
			"Completed idempotency records a partner route holds in etcd, over every gateway, as its budget counts them (until their idempotency_ttl ends, and up to a 24th of it more).", []string{"route"}, nil),
		bytes: prometheus.NewDesc("fencegate_idempotency_bytes",
			"Bytes (keys and values) of the completed idempotency records a partner route holds in etcd, over every gateway, as its budget counts them.", []string{"route"}, nil),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencegate_idempotency_budget_refusals_total",
			Help: "Partner requests refused with 503 idempotency-budget-exhausted (the route's or the identity's budget of idempotency records was used up), by route. Nothing was forwarded.",
		}, []string{"route"}),
		recordsLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fencegate_idempotency_limit_records",
			Help: "A partner route's budget of completed idempotency records (its budget.records), which fencegate_idempotency_records is held to; left out for a route with no bound.",
		}, []string{"route"}),
		bytesLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fencegate_idempotency_limit_bytes",
			Help: "A partner route's budget of bytes of completed idempotency records (its budget.bytes), which fencegate_idempotency_bytes is held to; left out for a route with no bound.",
		}, []string{"route"}),
	}
	if ip, ok := store.(*instrumentedPartners); ok {
		store = ip.PartnerStore
	}
	m.usage, _ = store.(IdempotencyUsageReader)
	return m
}

// setLimits exports route's budget: each bound it has, none when it
// has none (zero or negative once its defaults are filled in).
func (m *budgetMetrics) setLimits(route *partnerRoute) {
	if route.Budget.Records > 0 {
		m.recordsLimit.WithLabelValues(route.Name).Set(float64(route.Budget.Records))
	}
	if route.Budget.Bytes > 0 {
		m.bytesLimit.WithLabelValues(route.Name).Set(float64(route.Budget.Bytes))
	}
}

// Describe implements prometheus.Collector.
func (m *budgetMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.records
	ch <- m.bytes
	m.refusals.Describe(ch)
	m.recordsLimit.Describe(ch)
	m.bytesLimit.Describe(ch)
}

// Collect implements prometheus.Collector. A route whose usage cannot be
// read is left out of the scrape.
func (m *budgetMetrics) Collect(ch chan<- prometheus.Metric) {
	m.refusals.Collect(ch)
	m.recordsLimit.Collect(ch)
	m.bytesLimit.Collect(ch)
	if m.usage == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for name := range m.h.routes {
		u, err := m.usage.IdempotencyUsage(ctx, routeAccount(name))
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(m.records, prometheus.GaugeValue, float64(u.Records), name)
		ch <- prometheus.MustNewConstMetric(m.bytes, prometheus.GaugeValue, float64(u.Bytes), name)
	}
}
