//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftproxy/nftproxy/deploy/monitoring"
	"github.com/nftproxy/nftproxy/e2e/testns"
)

// TestMonitoringKitAgainstARealPrometheus runs Debian's Prometheus in the
// node's namespace, scraping the daemon (against the real API server)
// every second with deploy/monitoring's alerts, provokes what it can (a
// refused destination, another process that keeps flushing a chain, the
// API server stopped) and sees each alert go pending; every dashboard
// panel's queries return data; and every metric name the kit uses is one
// the daemon exports, so a rename breaks this test.
func TestMonitoringKitAgainstARealPrometheus(t *testing.T) {
	testns.RequireRoot(t)
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed (bash .ci/deps installs it)")
	}
	c := newDaemonCluster(t)
	ctx := context.Background()
	c.AddPod("ep1", harness.PodIP(1), []int{8080}, nil)
	c.startDaemon(t)
	if _, err := c.admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A Service whose external IP is the node's own address: refused.
	svc := harness.With(harness.ClusterIPService("web", "api", "10.96.0.81", httpPort), harness.ExternalIPs(harness.NodeIP))
	if _, err := c.admin.CoreV1().Services("web").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sl := harness.Slice("web", "api", "api-1", []harness.PortSpec{httpPort}, harness.PodIP(1))
	sl.Annotations = map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": time.Now().UTC().Format(time.RFC3339Nano)}
	if _, err := c.admin.DiscoveryV1().EndpointSlices("web").Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	rules, err := monitoring.RuleFile(false)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	config := "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [rules.yaml]\n" +
		"scrape_configs:\n  - job_name: kube-proxy\n    static_configs:\n      - targets: ['127.0.0.1:10249']\n        labels: {instance: " + harness.LocalNode + "}\n"
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := c.Node.Command(prom, "--config.file", filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path", filepath.Join(dir, "data"),
		"--web.listen-address", "127.0.0.1:9090")
	logf, _ := os.Create(filepath.Join(dir, "prometheus.log"))
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	query := func(q string) ([]json.RawMessage, error) {
		code, body, err := httpGetStatus(c.Node, "http://127.0.0.1:9090/api/v1/query?query="+url.QueryEscape(q))
		if err != nil {
			return nil, err
		}
		var r struct {
			Status string `json:"status"`
			Data   struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil || code != 200 || r.Status != "success" {
			return nil, errorf("query %s: %d %s", q, code, body)
		}
		return r.Data.Result, nil
	}
	pending := func(alert string) func() error {
		return func() error {
			res, err := query(`ALERTS{alertname="` + alert + `"}`)
			if err != nil {
				return err
			}
			if len(res) == 0 {
				return errorf("%s is not pending or firing", alert)
			}
			return nil
		}
	}
	eventually(t, "Prometheus scrapes the daemon", 30*time.Second, func() error {
		res, err := query(`up{job="kube-proxy"} == 1`)
		if err != nil || len(res) == 0 {
			return errorf("not scraped yet: %v", err)
		}
		return nil
	})
	d := eventually(t, "NftproxyRefusedDestinations", 30*time.Second, pending("NftproxyRefusedDestinations"))
	t.Logf("refused destination: alert pending after %v", d)

	// Another process flushes KUBE-SERVICES after every repair.
	stop := make(chan struct{})
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		for {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
				_, _ = c.Node.Run("nft", "flush", "chain", "ip", "kube-proxy", "KUBE-SERVICES")
			}
		}
	}()
	d = eventually(t, "NftproxyForeignWriter", 60*time.Second, pending("NftproxyForeignWriter"))
	t.Logf("foreign writer: alert pending after %v", d)
	d = eventually(t, "NftproxyDriftRepaired", 60*time.Second, pending("NftproxyDriftRepaired"))
	t.Logf("drift repaired: alert pending after %v", d)
	close(stop)
	<-flushed

	// Every dashboard panel has data (one of its queries at least).
	_, _, _ = httpGetStatus(c.Node, "http://127.0.0.1:10256/healthz")
	queries, err := monitoring.Queries()
	if err != nil {
		t.Fatal(err)
	}
	panels := map[string]bool{}
	for _, q := range queries {
		expr := strings.ReplaceAll(q.Expr, "$instance", ".+")
		if res, err := query(expr); err == nil && len(res) > 0 {
			panels[q.Panel] = true
		} else if _, ok := panels[q.Panel]; !ok {
			panels[q.Panel] = false
		}
	}
	for p, ok := range panels {
		if !ok {
			t.Errorf("dashboard panel %q: no query returns data", p)
		}
	}

	// The API server goes away.
	c.api.Stop()
	d = eventually(t, "NftproxyAPIServerUnreachable", 90*time.Second, pending("NftproxyAPIServerUnreachable"))
	t.Logf("API server stopped: alert pending after %v", d)

	// Every name the kit uses is one the daemon exports.
	metrics := httpGet(t, c.Node, "http://127.0.0.1:10249/metrics")
	names, err := monitoring.MetricNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !strings.Contains(metrics, "# TYPE "+n+" ") {
			t.Errorf("the monitoring kit uses %s, which the daemon does not export", n)
		}
	}
	t.Logf("%d metric names of the kit checked against /metrics, %d dashboard panels with data", len(names), len(panels))
}
