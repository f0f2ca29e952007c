package grafana

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"fencegate/deploy/metricref"
)

const dashboardFile = "fencegate.json"

// dashboard is the part of a Grafana dashboard that the checks read.
type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int     `json:"id"`
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"` // a collapsed row's
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

// rateInterval is what Grafana puts in place of $__rate_interval: a
// duration, as PromQL's range needs one.
const rateInterval = "5m"

// variable matches a Grafana variable in a query: $name or ${name}.
var variable = regexp.MustCompile(`\$\{?([A-Za-z0-9_]+)\}?`)

// labelValues matches a query variable's label_values(metric, label).
var labelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)$`)

// checkDashboard parses a dashboard and checks every panel's queries:
// each, with the dashboard's variables put in as Grafana does, parses as
// PromQL and names only metrics in known. Panel ids are unique, and a
// panel that is not a row has a query.
func checkDashboard(data []byte, known metricref.Known) error {
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	if d.Title == "" || d.UID == "" {
		return errors.New("dashboard: no title or uid")
	}
	values := map[string]string{"__rate_interval": rateInterval}
	var errs []error
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			values[v.Name] = "prometheus"
		case "query":
			values[v.Name] = ".+" // a multi-value variable's All, in a =~ matcher
			var q struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &q); err != nil {
				errs = append(errs, fmt.Errorf("variable %s: %w", v.Name, err))
				continue
			}
			m := labelValues.FindStringSubmatch(q.Query)
			switch {
			case m == nil:
				errs = append(errs, fmt.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, q.Query))
			case !known.Exports(m[1]):
				errs = append(errs, fmt.Errorf("variable %s: %s is not a metric the gateway exports", v.Name, m[1]))
			}
		default:
			errs = append(errs, fmt.Errorf("variable %s: type %q is not checked", v.Name, v.Type))
		}
	}
	ids := map[int]string{}
	var walk func([]panel)
	walk = func(panels []panel) {
		for _, p := range panels {
			if other, ok := ids[p.ID]; ok {
				errs = append(errs, fmt.Errorf("panels %q and %q have the same id %d", other, p.Title, p.ID))
			}
			ids[p.ID] = p.Title
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			if len(p.Targets) == 0 {
				errs = append(errs, fmt.Errorf("panel %q has no query", p.Title))
			}
			for _, target := range p.Targets {
				expr, err := interpolate(target.Expr, values)
				if err == nil {
					err = known.Check(expr)
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("panel %q, query %s: %w", p.Title, target.RefID, err))
				}
			}
		}
	}
	walk(d.Panels)
	return errors.Join(errs...)
}

// interpolate puts values in place of the variables of expr, as Grafana
// does before it sends a query; a variable the dashboard does not define
// is an error.
func interpolate(expr string, values map[string]string) (string, error) {
	var unknown []string
	out := variable.ReplaceAllStringFunc(expr, func(v string) string {
		name := variable.FindStringSubmatch(v)[1]
		value, ok := values[name]
		if !ok {
			unknown = append(unknown, v)
			return v
		}
		return value
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("undefined variables %s", strings.Join(unknown, ", "))
	}
	return out, nil
}

func TestDashboard(t *testing.T) {
	known, err := metricref.LoadKnown(metricref.GoldenPath)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	// Each case changes the dashboard as its edit says.
	for _, c := range []struct {
		name, from, to string
		wantErr        string // "" for none
	}{
		{"fencegate.json", "", "", ""},
		{"a query that does not parse", `sum by (source) (rate(fencegate_stale_refusals_total{job=~\"$job\"}[$__rate_interval]))`,
			`sum by (source) (rate(fencegate_stale_refusals_total{job=~\"$job\"}[$__rate_interval])`, "Stale refusals, by source"},
		{"a metric the gateway does not export", `fencegate_s3_lost_races_total`, `fencegate_s3_lost_races`, "fencegate_s3_lost_races "},
		{"an undefined variable", `{job=~\"$job\"}`, `{job=~\"$cluster\"}`, "$cluster"},
		{"a variable over a metric the gateway does not export", `label_values(fencegate_requests_total, job)`, `label_values(fencegate_requests, job)`, "variable job"},
		{"two panels with one id", `"id": 3,`, `"id": 2,`, "same id 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			edited := string(data)
			if c.from != "" {
				if !strings.Contains(edited, c.from) {
					t.Fatalf("%s has no %s to change", dashboardFile, c.from)
				}
				edited = strings.ReplaceAll(edited, c.from, c.to)
			}
			err := checkDashboard([]byte(edited), known)
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("checkDashboard: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("checkDashboard = %v; want an error naming %q", err, c.wantErr)
			}
		})
	}
}
