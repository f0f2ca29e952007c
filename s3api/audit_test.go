package s3api_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"fencegate/gateway"
)

// syncBuffer is a log sink that tests read while the door writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// counter returns the value of the gateway's counter name with label
// value, summed over its series that have it.
func counter(tb testing.TB, gw *gateway.Gateway, name, value string) float64 {
	tb.Helper()
	families, err := gw.Registry().Gather()
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// TestRefusedWritesAreAudited: a stale PutObject and a forbidden one
// through the door are counted and get the gateway's audit line, as on
// the REST API.
func TestRefusedWritesAreAudited(t *testing.T) {
	var logs syncBuffer
	d := newDoor(t, doorOptions{gateway: gateway.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
	w := d.client(writerKey)
	if _, err := d.put(t, w, "audited", 10, "x"); err != nil {
		t.Fatal(err)
	}
	_, err := d.put(t, w, "audited", 9, "y")
	wantAPIError(t, err, http.StatusConflict, "StaleFenceToken")
	_, err = d.put(t, d.client(readerKey), "audited", 11, "z")
	wantAPIError(t, err, http.StatusForbidden, "AccessDenied")
	if n := counter(t, d.gw, "fencegate_stale_refusals_total", "cache"); n != 1 {
		t.Errorf("stale refusals from the cache = %v; want 1", n)
	}
	if n := counter(t, d.gw, "fencegate_refused_writes_total", "stale-token"); n != 1 {
		t.Errorf("refused writes (stale-token) = %v; want 1", n)
	}
	if n := counter(t, d.gw, "fencegate_refused_writes_total", "forbidden"); n != 1 {
		t.Errorf("refused writes (forbidden) = %v; want 1", n)
	}
	out := logs.String()
	for _, want := range []string{
		`msg="write refused" resource=s3/` + d.bucket + `/audited token=9 high_water_mark=10`,
		`identity=writer api=s3`,
		`identity=reader api=s3`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
}
