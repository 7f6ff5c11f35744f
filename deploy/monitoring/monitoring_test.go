package monitoring

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// promtool returns promtool's path; .ci/deps installs it (Debian's
// prometheus package), and its absence fails the test.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed (bash .ci/deps installs it)")
	}
	return p
}

// TestAlertsPassPromtool checks the rules with promtool and runs their
// unit tests (testdata/alerts_test.yaml): every alert fires on its
// condition and not on a healthy node.
func TestAlertsPassPromtool(t *testing.T) {
	tool := promtool(t)
	dir := t.TempDir()
	for name, bare := range map[string]bool{"full.yaml": false, "rules.yaml": true} {
		rules, err := RuleFile(bare)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), rules, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests, err := os.ReadFile("testdata/alerts_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", "full.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.Command(tool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// TestEveryAlertIsTestedAndDocumented: each alert has a summary, a
// description, a runbook section in docs/operating.md, and a promtool test
// in which it fires.
func TestEveryAlertIsTestedAndDocumented(t *testing.T) {
	groups, err := Groups()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/alerts_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(raw, &tests); err != nil {
		t.Fatal(err)
	}
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	docs, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range groups {
		for _, r := range g.Rules {
			n++
			if !fires[r.Alert] {
				t.Errorf("%s: no promtool test fires it", r.Alert)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s", r.Alert, a)
				}
			}
			if r.Labels["severity"] == "" {
				t.Errorf("%s: no severity", r.Alert)
			}
			anchor := strings.ToLower(r.Alert)
			if !strings.HasSuffix(r.Annotations["runbook_url"], "docs/operating.md#"+anchor) {
				t.Errorf("%s: runbook_url %q does not point at docs/operating.md#%s", r.Alert, r.Annotations["runbook_url"], anchor)
			}
			if !regexp.MustCompile(`(?m)^#+ ` + r.Alert + `$`).Match(docs) {
				t.Errorf("%s: docs/operating.md has no section named after it", r.Alert)
			}
		}
	}
	if n < 8 {
		t.Errorf("%d alerts, want the kit's nine", n)
	}
}

// TestDashboardQueries: the dashboard parses, every panel queries, and the
// names it and the alerts use are nftproxy's or kube-proxy's (the e2e
// checks them against a running daemon's /metrics).
func TestDashboardQueries(t *testing.T) {
	queries, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) < 20 {
		t.Errorf("%d queries, want kube-proxy's panels and nftproxy's", len(queries))
	}
	names, err := MetricNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kubeproxy_network_programming_duration_seconds", "nftproxy_refused_destinations", "nftproxy_drift_repairs_total"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("no query of %s: %v", want, names)
		}
	}
	if _, err := os.Stat("kustomization.yaml"); errors.Is(err, os.ErrNotExist) {
		t.Error("no kustomization.yaml")
	}
}
