package events_test

import (
	"fmt"
	"testing"
	"time"

	"fencegate/events"
)

// BenchmarkPublish is what one decision costs the request that makes it:
// with no subscriber (its encoding, kept in the history ring), and with
// 4, three of them drained
// as fast as they come and one never read (its buffer full: every event
// dropped for it).
func BenchmarkPublish(b *testing.B) {
	for _, subscribers := range []int{0, 4} {
		b.Run(fmt.Sprintf("subscribers=%d", subscribers), func(b *testing.B) {
			h := events.NewHub(events.Config{})
			done := make(chan struct{})
			defer close(done)
			for i := range subscribers {
				sub, err := h.Subscribe(events.Filter{Prefix: "s3/"}, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer sub.Close()
				if i == subscribers-1 {
					continue // never read
				}
				go func() {
					for {
						select {
						case <-done:
							return
						case <-time.After(50 * time.Millisecond):
						}
						for len(sub.C()) > 0 {
							<-sub.C()
						}
					}
				}()
			}
			at := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				if !h.Active() {
					continue
				}
				h.Publish(&events.Event{Time: at, Kind: events.KindWriteAccepted, Resource: "s3/demo/reports/2026/q3.csv", Token: 34, HWMBefore: 33, HWM: 34, ETag: `"0123456789abcdef0123456789abcdef"`, Status: 200, LatencyMS: 4.2, Identity: "alice"})
			}
		})
	}
}
