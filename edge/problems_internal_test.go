package edge

import (
	"testing"
	"time"
)

// TestEveryInterval: allow lets one call through per interval.
func TestEveryInterval(t *testing.T) {
	var e everyInterval
	start := time.Unix(1000, 0)
	steps := []struct {
		at   time.Duration
		want bool
	}{
		{0, true}, {time.Second, false}, {59 * time.Second, false}, {time.Minute, true}, {time.Minute + time.Second, false},
	}
	for _, s := range steps {
		if got := e.allow(start.Add(s.at), time.Minute); got != s.want {
			t.Errorf("allow(start+%v) = %v; want %v", s.at, got, s.want)
		}
	}
}
