// Package metricref checks the PromQL of the alert rules and the
// dashboard against the metrics that the gateway exports: every query
// must parse with Prometheus's own parser, and every metric it selects
// must be one of the gateway's (testdata/metrics.txt, which the main
// module's cmd/fencegate TestGoldenMetricNames keeps true to the gateway's registry).
// A rule or a panel that names a metric the gateway does not export
// never fires or stays empty without telling anyone: this is where it
// is caught instead.
package metricref

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// GoldenPath is the list of exported metric names, relative to a
// package directory one level under deploy/.
const GoldenPath = "../testdata/metrics.txt"

// seriesSuffixes are the suffixes of the series that a histogram or a
// summary family exports besides its own name.
var seriesSuffixes = []string{"_bucket", "_sum", "_count"}

// Known is the set of metric family names the gateway exports.
type Known map[string]bool

// LoadKnown reads a list of metric family names, one a line; empty lines
// and lines starting with # are left out.
func LoadKnown(path string) (Known, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load metric names: %w", err)
	}
	known := Known{}
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			known[line] = true
		}
	}
	if len(known) == 0 {
		return nil, fmt.Errorf("load metric names: %s lists none", path)
	}
	return known, nil
}

// Exports reports whether name is a series of an exported family: the
// family's own name, or a histogram's or summary's _bucket, _sum or
// _count.
func (k Known) Exports(name string) bool {
	if k[name] {
		return true
	}
	for _, suffix := range seriesSuffixes {
		if base, ok := strings.CutSuffix(name, suffix); ok && k[base] {
			return true
		}
	}
	return false
}

// newParser is Prometheus's PromQL parser with its default options, as
// promtool and the Prometheus server use it for rules.
func newParser() parser.Parser { return parser.NewParser(parser.Options{}) }

// Parse parses a PromQL expression.
func Parse(expr string) (parser.Expr, error) {
	return newParser().ParseExpr(expr)
}

// Names returns the sorted metric names that expr selects, parsed with
// Prometheus's parser. A selector without a name (by __name__ matching a
// regular expression, or none) is an error: what it selects cannot be
// checked.
func Names(expr string) ([]string, error) {
	ast, err := Parse(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var errs []error
	parser.Inspect(ast, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		if name == "" {
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
		}
		if name == "" {
			errs = append(errs, fmt.Errorf("selector %s names no metric", vs))
			return nil
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
		return nil
	})
	slices.Sort(names)
	return names, errors.Join(errs...)
}

// Check parses expr and returns an error naming each metric it selects
// that the gateway does not export.
func (k Known) Check(expr string) error {
	names, err := Names(expr)
	if err != nil {
		return err
	}
	var unknown []string
	for _, name := range names {
		if !k.Exports(name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("names metrics the gateway does not export: %s (the list: deploy/testdata/metrics.txt)", strings.Join(unknown, ", "))
	}
	return nil
}
