package retention

import (
	"sync"
	"time"
)

// revisionClock tells how old an etcd revision is, from samples of
// (time, revision) taken as the evictor reads etcd: a sample (t, r) says
// that revision r had been reached by time t, since t is taken after the
// answer that carried r came back. So a mark whose mod revision is at
// most r was raised at or before t. Times are the process's clock
// (Config.Now, time.Now by default, whose monotonic reading makes the
// differences immune to changes of the wall clock). Samples are kept in
// memory only: a new process knows no old revision, and evicts nothing
// until it has run for the retention.
type revisionClock struct {
	// resolution is the least time between two kept samples, and keep
	// the longest age asked for: older samples than the newest one past
	// keep are dropped.
	resolution time.Duration
	keep       time.Duration

	mu      sync.Mutex
	samples []revisionSample // by time, and so by revision
}

type revisionSample struct {
	at       time.Time
	revision int64
}

// newRevisionClock returns a clock that answers revisionAt for times up
// to keep ago, keeping about 256 samples over that span.
func newRevisionClock(keep time.Duration) *revisionClock {
	return &revisionClock{keep: keep, resolution: keep / 256}
}

// record notes that revision had been reached by time at.
func (c *revisionClock) record(at time.Time, revision int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.samples); n > 0 {
		last := c.samples[n-1]
		if revision <= last.revision || at.Before(last.at) {
			return // tells nothing new
		}
		if n > 1 && at.Sub(c.samples[n-2].at) < c.resolution {
			// Thin: the newest sample gives way to a later one, which
			// only makes marks look younger than they are (evicted a
			// little later), never older.
			c.samples[n-1] = revisionSample{at, revision}
			return
		}
	}
	c.samples = append(c.samples, revisionSample{at, revision})
	// Drop the samples that an age of at most keep never needs: all but
	// the newest of those taken keep or more before at.
	horizon := at.Add(-c.keep)
	drop := 0
	for drop+1 < len(c.samples) && !c.samples[drop+1].at.After(horizon) {
		drop++
	}
	c.samples = c.samples[drop:]
}

// learn adds a sample of any age, such as one read back from etcd
// (Evictor.loadRecorded), keeping only the samples that no other makes
// useless: one is useless when another is at least as old and its
// revision at least as large.
func (c *revisionClock) learn(at time.Time, revision int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sample := revisionSample{at, revision}
	kept := make([]revisionSample, 0, len(c.samples)+1)
	inserted := false
	for _, s := range c.samples {
		if !s.at.After(at) && s.revision >= revision {
			return // useless
		}
		if !s.at.Before(at) && s.revision <= revision {
			continue // made useless
		}
		if !inserted && s.at.After(at) {
			kept, inserted = append(kept, sample), true
		}
		kept = append(kept, s)
	}
	if !inserted {
		kept = append(kept, sample)
	}
	c.samples = kept
}

// revisionAt returns the largest revision known to have been reached by
// time t, or zero when no sample is that old: every mark whose mod
// revision is at most the answer was raised at or before t.
func (c *revisionClock) revisionAt(t time.Time) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var r int64
	for _, s := range c.samples {
		if s.at.After(t) {
			break
		}
		r = s.revision
	}
	return r
}
