package monitoring

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"sigs.k8s.io/yaml"
)

//go:embed prometheusrule.yaml
var ruleFile []byte

//go:embed dashboard.json
var dashboardFile []byte

// Rule is one alerting rule of the PrometheusRule.
type Rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// RuleGroup is a group of rules, as Prometheus' rule files hold them.
type RuleGroup struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// Groups returns the PrometheusRule's groups.
func Groups() ([]RuleGroup, error) {
	var pr struct {
		Spec struct {
			Groups []RuleGroup `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(ruleFile, &pr); err != nil {
		return nil, fmt.Errorf("prometheusrule.yaml: %w", err)
	}
	return pr.Spec.Groups, nil
}

// RuleFile returns the groups as a Prometheus rule file (what promtool
// reads), without the annotations when bare is set.
func RuleFile(bare bool) ([]byte, error) {
	groups, err := Groups()
	if err != nil {
		return nil, err
	}
	if bare {
		for i := range groups {
			for j := range groups[i].Rules {
				groups[i].Rules[j].Annotations = nil
			}
		}
	}
	return yaml.Marshal(map[string]any{"groups": groups})
}

// Query is one dashboard panel's query.
type Query struct {
	Panel, Expr string
}

// Queries returns every query of the dashboard's panels.
func Queries() ([]Query, error) {
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dashboardFile, &d); err != nil {
		return nil, fmt.Errorf("dashboard.json: %w", err)
	}
	var out []Query
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, Query{Panel: p.Title, Expr: t.Expr})
		}
	}
	return out, nil
}

// seriesName matches the metric names the kit's expressions use.
var seriesName = regexp.MustCompile(`\b(?:kubeproxy|nftproxy|rest_client|process|go)_[a-z_]+\b`)

// histogramSuffix is what a histogram's series add to its name.
var histogramSuffix = regexp.MustCompile(`_(bucket|count|sum)$`)

// MetricNames returns the metric families the alerts and the dashboard
// query, without a histogram's _bucket, _count and _sum, sorted.
func MetricNames() ([]string, error) {
	groups, err := Groups()
	if err != nil {
		return nil, err
	}
	queries, err := Queries()
	if err != nil {
		return nil, err
	}
	var exprs []string
	for _, g := range groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	for _, q := range queries {
		exprs = append(exprs, q.Expr)
	}
	var out []string
	for _, e := range exprs {
		for _, n := range seriesName.FindAllString(e, -1) {
			out = append(out, histogramSuffix.ReplaceAllString(n, ""))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
