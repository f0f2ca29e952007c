package retention

import (
	"testing"
	"time"
)

// TestRevisionClock: revisionAt(t) is the revision of the newest sample
// taken at or before t (zero when none is that old), thinning only makes
// it smaller, and old samples are dropped.
func TestRevisionClock(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := newRevisionClock(256 * time.Second) // resolution 1 s
	c.record(t0, 10)
	c.record(t0.Add(10*time.Second), 20)
	c.record(t0.Add(10*time.Second+100*time.Millisecond), 21) // kept until the next replaces it
	c.record(t0.Add(10*time.Second+200*time.Millisecond), 22) // replaces 21
	c.record(t0.Add(20*time.Second), 30)
	c.record(t0.Add(30*time.Second), 25) // an older revision tells nothing
	for _, tt := range []struct {
		at   time.Duration
		want int64
	}{
		{-time.Second, 0},
		{0, 10},
		{10 * time.Second, 20},
		{10*time.Second + 150*time.Millisecond, 20}, // 21 was replaced by 22, taken later
		{15 * time.Second, 22},
		{time.Hour, 30},
	} {
		if got := c.revisionAt(t0.Add(tt.at)); got != tt.want {
			t.Errorf("revisionAt(t0%+v) = %d; want %d", tt.at, got, tt.want)
		}
	}
	c.record(t0.Add(time.Hour), 40)
	if n := len(c.samples); n != 2 {
		t.Fatalf("after an hour, %d samples kept (%v); want 2: the newest older than 256 s, and the new one", n, c.samples)
	}
	if got := c.revisionAt(t0.Add(time.Hour - 256*time.Second)); got != 30 {
		t.Fatalf("revisionAt(an hour - 256 s) = %d; want 30", got)
	}
}

// TestRevisionClockLearn: samples learned out of order (read back from
// etcd) take their place, and only samples that some other one makes
// useless (as old or older, with as large a revision or larger) go.
func TestRevisionClockLearn(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	c := newRevisionClock(time.Hour)
	c.record(at(10), 100)
	c.record(at(100), 200)
	c.learn(at(50), 150)  // between
	c.learn(at(60), 120)  // useless: 150 was reached earlier
	c.learn(at(5), 100)   // makes the sample (10, 100) useless
	c.learn(at(100), 250) // makes (100, 200) useless
	c.learn(at(1), 10)
	want := []revisionSample{{at(1), 10}, {at(5), 100}, {at(50), 150}, {at(100), 250}}
	if len(c.samples) != len(want) {
		t.Fatalf("samples %v; want %v", c.samples, want)
	}
	for i := range want {
		if !c.samples[i].at.Equal(want[i].at) || c.samples[i].revision != want[i].revision {
			t.Fatalf("samples %v; want %v", c.samples, want)
		}
	}
	if got := c.revisionAt(at(7)); got != 100 {
		t.Fatalf("revisionAt(7 s) = %d; want 100", got)
	}
}
