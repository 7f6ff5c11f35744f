//go:build linux

package e2e

import (
	"bufio"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/e2e/testns"
)

// httpGet fetches url from inside ns and fails the test unless it
// answers 200.
func httpGet(t *testing.T, ns *testns.NS, url string) string {
	t.Helper()
	code, body, err := httpGetStatus(ns, url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if code != 200 {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	return body
}

func countRules(save string) int {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(save))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "-A") {
			n++
		}
	}
	return n
}

func stripComments(save string) string {
	var out []string
	for _, l := range strings.Split(save, "\n") {
		if !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestRulesMetricAndHTTPCompatView runs the daemon loop and checks that
// kubeproxy_sync_proxy_rules_iptables_total equals the -A count of
// `nftproxy save` for each table, and that /compat/iptables-save serves the
// same view as the CLI.
func TestRulesMetricAndHTTPCompatView(t *testing.T) {
	ns := nodeNamespace(t, "nfp-metrics")
	var objs []any
	objs = append(objs, testNode())
	for _, sc := range legacyScenarios()[:8] {
		objs = append(objs, sc.objects...)
	}
	objects := writeObjects(t, t.TempDir(), objs...)
	startNftproxy(t, "", "--objects", objects, "--netns", ns.Path(), "--hostname-override", harness.LocalNode,
		"--cluster-cidr", harness.ClusterCIDR, "--metrics-bind-address", "127.0.0.1:10249")

	metricRe := regexp.MustCompile(`(?m)^kubeproxy_sync_proxy_rules_iptables_total\{ip_family="IPv4",table="(nat|filter)"\} (\d+)$`)
	var metrics string
	eventually(t, "rules metric set by a sync", 10*time.Second, func() error {
		code, body, err := httpGetStatus(ns, "http://127.0.0.1:10249/metrics")
		if err != nil {
			return err
		}
		metrics = body
		// The series exist at 0 from the start, as kube-proxy's do; the
		// first sync sets them (both tables have rules here).
		if m := metricRe.FindAllStringSubmatch(metrics, -1); code != 200 || len(m) != 2 || m[0][2] == "0" || m[1][2] == "0" {
			return errorf("status %d:\n%s", code, grepLines(metrics, "rules_iptables_total"))
		}
		return nil
	})
	for _, m := range metricRe.FindAllStringSubmatch(metrics, -1) {
		out, err := exec.Command(nftproxyBinary, "save", "-t", m[1], "--netns", ns.Path()).Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := countRules(string(out)); m[2] != strconv.Itoa(got) {
			t.Errorf("table %s: metric %s, nftproxy save -t %s | grep -c '^-A' = %d", m[1], m[2], m[1], got)
		} else {
			t.Logf("table %s: metric = %s = -A lines of nftproxy save", m[1], m[2])
		}
	}
	cli, err := exec.Command(nftproxyBinary, "save", "--netns", ns.Path()).Output()
	if err != nil {
		t.Fatal(err)
	}
	web := httpGet(t, ns, "http://127.0.0.1:10249/compat/iptables-save")
	if stripComments(web) != stripComments(string(cli)) {
		t.Errorf("/compat/iptables-save differs from nftproxy save")
	}
	// The image's iptables-save link (a runbook's `kubectl exec ... --
	// iptables-save -t nat`) prints the same view.
	link := filepath.Join(t.TempDir(), "iptables-save")
	if err := os.Symlink(nftproxyBinary, link); err != nil {
		t.Fatal(err)
	}
	viaLink, err := exec.Command(link, "-t", "nat", "--netns", ns.Path()).Output()
	if err != nil {
		t.Fatalf("iptables-save (a link to nftproxy): %v", err)
	}
	natOnly, _ := exec.Command(nftproxyBinary, "save", "-t", "nat", "--netns", ns.Path()).Output()
	if !strings.Contains(string(viaLink), "-A KUBE-SERVICES") || stripComments(string(viaLink)) != stripComments(string(natOnly)) {
		t.Errorf("iptables-save -t nat through the link differs from nftproxy save -t nat:\n%s", viaLink)
	}
	if mode := httpGet(t, ns, "http://127.0.0.1:10249/proxyMode"); mode != "iptables" {
		t.Errorf("/proxyMode = %q", mode)
	}
}

// TestDriftShowsInSaveAndDiff tampers with the table by hand (one map
// element deleted, one KUBE-SEP- chain flushed): save shows it and diff
// against the view from before reports exactly those rules.
func TestDriftShowsInSaveAndDiff(t *testing.T) {
	ns := nodeNamespace(t, "nfp-drift")
	sc := legacyScenarios()[0] // clusterip: 3 endpoints
	dir := t.TempDir()
	objects := writeObjects(t, dir, append([]any{testNode()}, sc.objects...)...)
	if out, err := exec.Command(nftproxyBinary, "sync", "--objects", objects, "--netns", ns.Path(), "--cluster-cidr", harness.ClusterCIDR, "--hostname-override", harness.LocalNode).CombinedOutput(); err != nil {
		t.Fatalf("sync: %v\n%s", err, out)
	}
	before, err := exec.Command(nftproxyBinary, "save", "--netns", ns.Path()).Output()
	if err != nil {
		t.Fatal(err)
	}
	baseline := filepath.Join(dir, "before.save")
	os.WriteFile(baseline, before, 0o644)
	if out, err := exec.Command(nftproxyBinary, "diff", baseline, "--netns", ns.Path()).CombinedOutput(); err != nil {
		t.Fatalf("diff before tampering: %v\n%s", err, out)
	}

	sep := regexp.MustCompile(`:(KUBE-SEP-\w+)`).FindStringSubmatch(string(before))[1]
	ns.MustRun(t, "nft", "delete", "element", "ip", "kube-proxy", "service-ips", "{ 10.96.0.10 . tcp . 80 }")
	ns.MustRun(t, "nft", "flush", "chain", "ip", "kube-proxy", sep)

	after, err := exec.Command(nftproxyBinary, "save", "--netns", ns.Path()).Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(after), "-A KUBE-SERVICES -d 10.96.0.10/32") || strings.Contains(string(after), "-A "+sep+" ") {
		t.Errorf("save still shows the tampered rules:\n%s", after)
	}
	out, err := exec.Command(nftproxyBinary, "diff", baseline, "--netns", ns.Path()).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("diff after tampering: %v (want exit 1)\n%s", err, out)
	}
	report := string(out)
	if !strings.Contains(report, "3 differences") ||
		!strings.Contains(report, `missing in nat KUBE-SERVICES:`) || !strings.Contains(report, `-d 10.96.0.10/32 -p tcp -m comment --comment "ns/web:http cluster IP"`) ||
		strings.Count(report, "missing in nat "+sep) != 2 || !strings.Contains(report, "Service ns/web:http:") {
		t.Errorf("diff report does not show exactly the tampering:\n%s", report)
	}
	t.Logf("diff after tampering:\n%s", report)
}
