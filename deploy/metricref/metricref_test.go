package metricref

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var known = Known{
	"fencegate_requests_total":               true,
	"fencegate_fence_check_duration_seconds": true,
	"fencegate_etcd_db_size_bytes":           true,
	"fencegate_etcd_db_quota_bytes":          true,
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name, expr string
		wantErr    string // "" for none
	}{
		{"counter", `sum(rate(fencegate_requests_total{problem="fence-unavailable"}[5m]))`, ""},
		{"histogram series", `histogram_quantile(0.99, sum by (le) (rate(fencegate_fence_check_duration_seconds_bucket[5m])))`, ""},
		{"two metrics", `max(fencegate_etcd_db_size_bytes / fencegate_etcd_db_quota_bytes) > 0.8`, ""},
		{"name by matcher", `{__name__="fencegate_requests_total"}`, ""},
		{"unknown metric", `rate(fencegate_fence_refusals_total[5m]) > 0`, "fencegate_fence_refusals_total"},
		{"unknown suffix of a known counter", `fencegate_requests_total_bucket`, ""},
		{"unknown beside a known one", `fencegate_etcd_db_size_bytes / fencegate_etcd_db_limit_bytes`, "fencegate_etcd_db_limit_bytes"},
		{"regexp name", `{__name__=~"fencegate_.*"}`, "names no metric"},
		{"syntax error", `sum(rate(fencegate_requests_total[5m])`, "unclosed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := known.Check(c.expr)
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("Check(%q) = %v; want nil", c.expr, err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("Check(%q) = %v; want an error naming %q", c.expr, err, c.wantErr)
			}
		})
	}
}

func TestExports(t *testing.T) {
	for _, c := range []struct {
		name string
		want bool
	}{
		{"fencegate_requests_total", true},
		{"fencegate_fence_check_duration_seconds_bucket", true},
		{"fencegate_fence_check_duration_seconds_count", true},
		{"fencegate_fence_check_duration_seconds_total", false},
		{"fencegate_requests", false},
	} {
		if got := known.Exports(c.name); got != c.want {
			t.Errorf("Exports(%q) = %v; want %v", c.name, got, c.want)
		}
	}
}

func TestNames(t *testing.T) {
	got, err := Names(`sum(rate(b_total[5m])) / sum(rate(a_total[5m])) + sum(rate(b_total[1h]))`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a_total", "b_total"}; !slices.Equal(got, want) {
		t.Errorf("Names = %q; want %q", got, want)
	}
}

func TestLoadKnown(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, text string
		want       Known // nil: an error
	}{
		{"names and comments", "# header\n\nx_total\n y_bytes \n", Known{"x_total": true, "y_bytes": true}},
		{"only comments", "# header\n", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
			if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := LoadKnown(path)
			if c.want == nil {
				if err == nil {
					t.Errorf("LoadKnown(%q) = %v; want an error", c.text, got)
				}
				return
			}
			if err != nil || len(got) != len(c.want) || !got["x_total"] || !got["y_bytes"] {
				t.Errorf("LoadKnown(%q) = %v, %v; want %v", c.text, got, err, c.want)
			}
		})
	}
}

// TestGoldenList checks that the gateway's list is there and holds the
// metrics the rules and the dashboard are built on.
func TestGoldenList(t *testing.T) {
	known, err := LoadKnown(GoldenPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fencegate_requests_total", "fencegate_etcd_db_quota_bytes"} {
		if !known[name] {
			t.Errorf("%s does not list %s", GoldenPath, name)
		}
	}
}
