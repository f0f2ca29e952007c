package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"fencegate/backends/s3"
	"fencegate/gateway"
	"fencegate/internal/config"
	"fencegate/internal/logging"
	"fencegate/internal/testenv"
	"fencegate/partners"
	"fencegate/retention"
	"fencegate/tokenstore"
)

var updateMetricNames = flag.Bool("update-metric-names", false, "rewrite "+goldenPath+" from the gateway's registry")

// goldenPath is the list of metric names, one a line, that the deploy
// module's tests read.
const goldenPath = "../../deploy/testdata/metrics.txt"

const goldenHeader = `# The metric families that a gateway wired as fencegate serve wires it exports,
# one a line, sorted. Written by: go test ./cmd/fencegate -run TestGoldenMetricNames -update-metric-names
# (TestGoldenMetricNames fails while this list differs from the registry).
`

// TestGoldenMetricNames compares the names that the registry of a
// gateway wired as serve wires it (newGatewayWith, with every feature that
// registers metrics) describes with the golden list that the deploy
// module's alert rules and dashboard are checked against.
func TestGoldenMetricNames(t *testing.T) {
	reg := wireGateway(t)
	names, err := describedNames(reg)
	if err != nil {
		t.Fatal(err)
	}
	// The names come from the descriptions (a vector with no series yet
	// gathers nothing), so check them against what a scrape has.
	gathered, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, family := range gathered {
		if !slices.Contains(names, family.GetName()) {
			t.Errorf("gathered %s, which no description names", family.GetName())
		}
	}
	for _, name := range []string{"fencegate_requests_total", "fencegate_idempotency_records", "fencegate_lock_waiters",
		"fencegate_etcd_db_quota_bytes", "fencegate_log_records_dropped_total", "fencegate_marks_eviction_failed_passes_total"} {
		if !slices.Contains(names, name) {
			t.Errorf("the wired gateway describes no %s: the wiring misses the part that registers it", name)
		}
	}

	if *updateMetricNames {
		if err := os.WriteFile(goldenPath, []byte(goldenHeader+strings.Join(names, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("%v (write it with go test ./cmd/fencegate -run TestGoldenMetricNames -update-metric-names)", err)
	}
	if diff := compareNames(parseGolden(string(data)), names); diff != "" {
		t.Errorf("%s is stale (rewrite it with go test ./cmd/fencegate -run TestGoldenMetricNames -update-metric-names, then check deploy/ with make deploy-test):\n%s", goldenPath, diff)
	}
}

// wireGateway builds a gateway as serve does (newGatewayWith) on a real
// etcd and S3 server, with a partner route (the partner door's metrics),
// and returns its registry.
func wireGateway(t *testing.T) *prometheus.Registry {
	t.Helper()
	etcd := testenv.StartEtcd(t)
	server := testenv.StartS3(t)
	upstream := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(upstream.Close)
	upstreamURL, err := url.Parse(upstream.URL)
	if err != nil {
		t.Fatal(err)
	}
	logger, closer := logging.New(io.Discard, logging.Config{})
	t.Cleanup(func() { _ = closer.Close() })
	routes := []partners.PartnerRoute{{Name: "payments", Upstream: upstreamURL, Methods: []string{http.MethodPost}, Resource: "accounts/{account}"}}
	gw, err := newGatewayWith(t.Context(), logger, etcd.Client(t), tokenstore.Config{},
		s3.Config{Endpoint: server.Endpoint(), Region: server.Region, AccessKeyID: server.AccessKey, SecretAccessKey: server.SecretKey, UsePathStyle: true},
		gateway.DefaultConfig(), retention.Config{}, config.Features{Partners: routes}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.closeStores)
	return gw.Registry()
}

// descName reads the name out of a description's String, the only place
// that client_golang shows it.
var descName = regexp.MustCompile(`^Desc\{fqName: "([a-zA-Z_:][a-zA-Z0-9_:]*)"`)

// describedNames returns the sorted names of every metric family that
// c describes, whether or not it has series yet.
func describedNames(c prometheus.Collector) ([]string, error) {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	var names []string
	var bad []string
	for desc := range ch {
		m := descName.FindStringSubmatch(desc.String())
		if m == nil {
			bad = append(bad, desc.String())
			continue
		}
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("descriptions without a readable name: %s", strings.Join(bad, "; "))
	}
	slices.Sort(names)
	return names, nil
}

// parseGolden returns the names of the golden file: every line that is
// neither empty nor a # comment.
func parseGolden(text string) []string {
	var names []string
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			names = append(names, line)
		}
	}
	return names
}

// compareNames says which names are only in golden and which only in
// exported, one a line; "" when the lists hold the same names.
func compareNames(golden, exported []string) string {
	var diff []string
	for _, name := range golden {
		if !slices.Contains(exported, name) {
			diff = append(diff, "- "+name+" (listed, no longer exported)")
		}
	}
	for _, name := range exported {
		if !slices.Contains(golden, name) {
			diff = append(diff, "+ "+name+" (exported, not listed)")
		}
	}
	return strings.Join(diff, "\n")
}

func TestCompareNames(t *testing.T) {
	for _, c := range []struct {
		name             string
		golden, exported []string
		want             string
	}{
		{"same", []string{"a_total", "b_bytes"}, []string{"a_total", "b_bytes"}, ""},
		{"removed", []string{"a_total", "b_bytes"}, []string{"a_total"}, "- b_bytes (listed, no longer exported)"},
		{"added", []string{"a_total"}, []string{"a_total", "c_seconds"}, "+ c_seconds (exported, not listed)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := compareNames(c.golden, c.exported); got != c.want {
				t.Errorf("compareNames(%q, %q) = %q; want %q", c.golden, c.exported, got, c.want)
			}
		})
	}
}

// TestDescribedNames checks that a vector without series is listed (a
// scrape would leave it out) and that each name is listed once.
func TestDescribedNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_refusals_total", Help: "h"}, []string{"reason"}),
		prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x_duration_seconds", Help: "h"}),
		prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "x", Name: "in_flight", Help: "h"}),
	)
	got, err := describedNames(reg)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"x_duration_seconds", "x_in_flight", "x_refusals_total"}
	if !slices.Equal(got, want) {
		t.Errorf("describedNames = %q; want %q", got, want)
	}
	if gathered, _ := reg.Gather(); len(gathered) == len(want) {
		t.Errorf("Gather has all %d families: this test no longer shows why names come from descriptions", len(want))
	}
}

func TestParseGolden(t *testing.T) {
	got := parseGolden("# header\n\na_total\n  b_bytes \n")
	if want := []string{"a_total", "b_bytes"}; !slices.Equal(got, want) {
		t.Errorf("parseGolden = %q; want %q", got, want)
	}
}
