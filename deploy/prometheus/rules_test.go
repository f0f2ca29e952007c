package prometheus

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"fencegate/deploy/metricref"
)

const (
	rulesFile = "alerts.yaml"
	testsFile = "alerts_test.yaml"
	// promtoolEnv names the promtool binary; its default is the one
	// make promtool builds.
	promtoolEnv     = "FENCEGATE_PROMTOOL"
	defaultPromtool = "../../bin/promtool"
)

// checkRules parses a rule file as Prometheus does (unknown fields are
// errors) and checks every rule's expression against known.
func checkRules(path string, known metricref.Known) error {
	groups, errs := rulefmt.ParseFile(path, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, group := range groups.Groups {
		for _, rule := range group.Rules {
			if err := known.Check(rule.Expr); err != nil {
				errs = append(errs, fmt.Errorf("%s: rule %s%s: %w", path, rule.Alert, rule.Record, err))
			}
		}
	}
	return errors.Join(errs...)
}

func TestRulesNameExportedMetrics(t *testing.T) {
	known, err := metricref.LoadKnown(metricref.GoldenPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, c := range []struct {
		name    string
		path    string
		wantErr string // "" for none
	}{
		{"alerts.yaml", rulesFile, ""},
		{"a metric the gateway does not export", write("unknown.yaml", `groups:
  - name: g
    rules:
      - alert: Refusals
        expr: rate(fencegate_fence_refusals_total[5m]) > 0
`), "fencegate_fence_refusals_total"},
		{"a query that does not parse", write("syntax.yaml", `groups:
  - name: g
    rules:
      - alert: Broken
        expr: rate(fencegate_requests_total[5m] > 0
`), "Broken"},
		{"an unknown field", write("field.yaml", `groups:
  - name: g
    rules:
      - alert: Typo
        expr: fencegate_requests_total > 0
        labels: {severity: warning}
        anotations: {summary: x}
`), "anotations"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkRules(c.path, known)
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("checkRules(%s) = %v; want nil", c.path, err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("checkRules(%s) = %v; want an error naming %q", c.path, err, c.wantErr)
			}
		})
	}
}

// untested returns the alerts of rulesPath that testsPath does not test
// both firing (a case expecting alerts) and not firing (a case
// expecting none).
func untested(rulesPath, testsPath string) ([]string, error) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	for path, into := range map[string]any{rulesPath: &rules, testsPath: &tests} {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if err := yaml.Unmarshal(data, into); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, test := range tests.Tests {
		for _, c := range test.AlertRuleTest {
			if len(c.ExpAlerts) > 0 {
				firing[c.Alertname] = true
			} else {
				quiet[c.Alertname] = true
			}
		}
	}
	var missing []string
	for _, group := range rules.Groups {
		for _, rule := range group.Rules {
			if rule.Alert == "" {
				continue
			}
			if !firing[rule.Alert] {
				missing = append(missing, rule.Alert+" (firing)")
			}
			if !quiet[rule.Alert] {
				missing = append(missing, rule.Alert+" (not firing)")
			}
		}
	}
	return missing, nil
}

func TestEveryAlertIsTestedBothWays(t *testing.T) {
	dir := t.TempDir()
	onlyFiring := filepath.Join(dir, "tests.yaml")
	if err := os.WriteFile(onlyFiring, []byte(`tests:
  - alert_rule_test:
      - alertname: FencegateEtcdOutOfSpace
        exp_alerts: [{exp_labels: {severity: critical}}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, tests string
		want        func([]string) bool
	}{
		{"alerts_test.yaml", testsFile, func(m []string) bool { return len(m) == 0 }},
		{"one alert tested firing only", onlyFiring, func(m []string) bool {
			return slices.Contains(m, "FencegateEtcdOutOfSpace (not firing)") && !slices.Contains(m, "FencegateEtcdOutOfSpace (firing)") &&
				slices.Contains(m, "FencegateEtcdNearQuota (firing)")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			missing, err := untested(rulesFile, c.tests)
			if err != nil {
				t.Fatal(err)
			}
			if !c.want(missing) {
				t.Errorf("untested(%s, %s) = %q", rulesFile, c.tests, missing)
			}
		})
	}
}

// promtool returns the promtool binary's path, failing the test when it
// is missing.
func promtool(t *testing.T) string {
	t.Helper()
	path := os.Getenv(promtoolEnv) // relative to this package's directory
	if path == "" {
		path = defaultPromtool
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("promtool not found at %s (%v): run make promtool, or set %s to a promtool binary", abs, err, promtoolEnv)
	}
	return abs
}

// runPromtool runs the promtool at path with args in dir, returning its
// output and an error when it exits non-zero.
func runPromtool(path, dir string, args ...string) (string, error) {
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestPromtool runs promtool's own checks: the rule file's lint, and the
// unit tests of every rule. A test that expects an alert the rules do not
// raise must fail.
func TestPromtool(t *testing.T) {
	tool := promtool(t)
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	wrong := t.TempDir()
	if err := os.WriteFile(filepath.Join(wrong, rulesFile), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	// etcd at 85% of its quota is not out of space: expecting
	// FencegateEtcdOutOfSpace there must fail.
	if err := os.WriteFile(filepath.Join(wrong, testsFile), []byte(`rule_files: [alerts.yaml]
tests:
  - interval: 1m
    input_series:
      - series: fencegate_etcd_db_size_bytes
        values: 850x20
      - series: fencegate_etcd_db_quota_bytes
        values: 1000x20
    alert_rule_test:
      - eval_time: 15m
        alertname: FencegateEtcdOutOfSpace
        exp_alerts: [{exp_labels: {severity: critical}}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		dir      string
		args     []string
		wantPass bool
	}{
		{"check rules", ".", []string{"check", "rules", rulesFile}, true},
		{"test rules", ".", []string{"test", "rules", testsFile}, true},
		{"test rules expecting an alert that does not fire", wrong, []string{"test", "rules", testsFile}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := runPromtool(tool, c.dir, c.args...)
			if passed := err == nil; passed != c.wantPass {
				t.Errorf("promtool %s: passed %v; want %v\n%s", strings.Join(c.args, " "), passed, c.wantPass, out)
			}
		})
	}
}
