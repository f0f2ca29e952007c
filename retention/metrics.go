package retention

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// stats count what the evictor did; the Prometheus metrics read them.
type stats struct {
	scanned      atomic.Int64
	failedPasses atomic.Int64
	lastPass     atomic.Int64 // Unix nanoseconds at the end of the last complete pass; 0 before
	keptBy       map[string]*atomic.Int64
	evictedBy    map[string]*atomic.Int64
}

func newStats() *stats {
	s := &stats{keptBy: make(map[string]*atomic.Int64), evictedBy: make(map[string]*atomic.Int64)}
	for _, r := range []string{keptYoung, keptDiffers, keptTombstone, keptRaised, keptUnknown, keptNotObject, keptUploading, keptUnconfirmed} {
		s.keptBy[r] = new(atomic.Int64)
	}
	for _, k := range []string{evictedObject, evictedTombstone} {
		s.evictedBy[k] = new(atomic.Int64)
	}
	return s
}

func (s *stats) kept(reason string)  { s.keptBy[reason].Add(1) }
func (s *stats) evicted(kind string) { s.evictedBy[kind].Add(1) }

// Stats is what an Evictor has done since it was made.
type Stats struct {
	// Scanned counts the marks read.
	Scanned int64
	// Evicted counts the marks evicted, by kind: "object" (the object
	// records the mark's token) and "tombstone" (the object is absent).
	Evicted map[string]int64
	// Kept counts the marks read and kept, by reason: "young" (raised
	// less than the retention ago), "differs" (the object records another
	// token, or none), "tombstone" (the object is absent, within the
	// tombstone retention), "raised" (raised between the read and the
	// eviction), "unobserved" (observing the object or evicting failed,
	// or an object seen absent was there when asked again), "not_object"
	// (a name under s3/ that is not an object's), "uploading" (the object
	// is absent and a multipart upload of it is in progress),
	// "unconfirmed" (the object looked absent, but the store did not say
	// that the bucket holds no such key: a missing bucket, a 404 that did
	// not come from the store, a failure).
	Kept map[string]int64
	// FailedPasses counts the passes that ended early on an error, and
	// the failed samples of an evictor whose turn it is not.
	FailedPasses int64
	// LastPass is when the last complete pass ended (Unix nanoseconds of
	// Config.Now); zero before the first.
	LastPass int64
}

// Stats returns the Evictor's counts.
func (e *Evictor) Stats() Stats {
	s := Stats{
		Scanned:      e.stats.scanned.Load(),
		Evicted:      make(map[string]int64),
		Kept:         make(map[string]int64),
		FailedPasses: e.stats.failedPasses.Load(),
		LastPass:     e.stats.lastPass.Load(),
	}
	for k, n := range e.stats.evictedBy {
		s.Evicted[k] = n.Load()
	}
	for r, n := range e.stats.keptBy {
		s.Kept[r] = n.Load()
	}
	return s
}

// The Evictor's metrics, which it collects itself: register the Evictor
// with the gateway's registry (gateway.Gateway.Registry).
var (
	scannedDesc = prometheus.NewDesc("fencegate_marks_scanned_total",
		"High-water marks of objects read by the mark evictor.", nil, nil)
	evictedDesc = prometheus.NewDesc("fencegate_marks_evicted_total",
		"High-water marks evicted from etcd, by kind: object (the object records the mark's token) or tombstone (the object is absent).", []string{"kind"}, nil)
	keptDesc = prometheus.NewDesc("fencegate_marks_kept_total",
		"High-water marks read and kept by the mark evictor, by reason.", []string{"reason"}, nil)
	failedPassesDesc = prometheus.NewDesc("fencegate_marks_eviction_failed_passes_total",
		"Passes of the mark evictor that ended early on an error (etcd unavailable).", nil, nil)
	lastPassDesc = prometheus.NewDesc("fencegate_marks_last_pass_timestamp_seconds",
		"When the mark evictor's last complete pass ended, in Unix seconds; 0 before the first.", nil, nil)
)

var _ prometheus.Collector = (*Evictor)(nil)

// Describe implements prometheus.Collector.
func (e *Evictor) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{scannedDesc, evictedDesc, keptDesc, failedPassesDesc, lastPassDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (e *Evictor) Collect(ch chan<- prometheus.Metric) {
	s := e.Stats()
	ch <- prometheus.MustNewConstMetric(scannedDesc, prometheus.CounterValue, float64(s.Scanned))
	for k, n := range s.Evicted {
		ch <- prometheus.MustNewConstMetric(evictedDesc, prometheus.CounterValue, float64(n), k)
	}
	for r, n := range s.Kept {
		ch <- prometheus.MustNewConstMetric(keptDesc, prometheus.CounterValue, float64(n), r)
	}
	ch <- prometheus.MustNewConstMetric(failedPassesDesc, prometheus.CounterValue, float64(s.FailedPasses))
	ch <- prometheus.MustNewConstMetric(lastPassDesc, prometheus.GaugeValue, float64(s.LastPass)/1e9)
}
