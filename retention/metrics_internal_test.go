package retention

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"fencegate/gateway"
)

// TestMetricsOnTheGatewaysEndpoint registers an evictor with a gateway's
// registry and reads its counts on the gateway's /metrics.
func TestMetricsOnTheGatewaysEndpoint(t *testing.T) {
	st := newStack(t)
	gw, url := st.gatewayServer(t, gateway.Config{})
	st.mustWrite(t, url, "recorded", 5, []byte("v"), http.StatusCreated)
	st.mustWrite(t, url, "deleted", 5, []byte("v"), http.StatusCreated)
	st.mustWrite(t, url, "deleted", 6, nil, http.StatusNoContent)
	e := st.evictor(t, Config{Retention: testRetention})
	gw.Registry().MustRegister(e)
	agedPass(t, st, e, testRetention)
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"fencegate_marks_scanned_total 4",
		`fencegate_marks_evicted_total{kind="object"} 1`,
		`fencegate_marks_evicted_total{kind="tombstone"} 0`,
		`fencegate_marks_kept_total{reason="young"} 2`,
		`fencegate_marks_kept_total{reason="tombstone"} 1`,
		`fencegate_marks_kept_total{reason="differs"} 0`,
		"fencegate_marks_eviction_failed_passes_total 0",
		"fencegate_marks_last_pass_timestamp_seconds 1.0036e+06",
	} {
		if !strings.Contains(string(body), "\n"+line+"\n") {
			t.Errorf("/metrics has no line %q", line)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
