//go:build linux

package e2e

import (
	"github.com/nftproxy/nftproxy/e2e/harness"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/google/nftables"
)

// TestKernelRejectionsTurnHealthStale makes the kernel reject every
// nftproxy transaction: another process replaces nftproxy's table with one
// it owns exclusively (an nftables "owner" table). The failures are
// counted, retried with backoff, and /healthz turns 503 after twice the
// sync period; when the other process lets go, nftproxy recovers.
func TestKernelRejectionsTurnHealthStale(t *testing.T) {
	tp := harness.NewTopology(t, echoBinary)
	tp.AddPod("ep1", harness.PodIP(1), []int{8080}, nil)
	objects := writeObjects(t, t.TempDir(), harness.ClusterIPService("demo", "web", "10.96.0.66", httpPort),
		harness.Slice("demo", "web", "web-1", []harness.PortSpec{httpPort}, harness.PodIP(1)))
	startNftproxy(t, "", "--objects", objects, "--netns", tp.Node.Path(), "--cluster-cidr", harness.ClusterCIDR,
		"--iptables-sync-period", "2s", "--iptables-min-sync-period", "100ms",
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256")
	eventually(t, "programmed", 10*time.Second, func() error {
		_, err := harness.TCPRequest(tp.External, "10.96.0.66:80", 300*time.Millisecond)
		return err
	})
	metrics := func() string {
		_, body, _ := httpGetStatus(tp.Node, "http://127.0.0.1:10249/metrics")
		return body
	}
	healthz := func() int {
		code, _, _ := httpGetStatus(tp.Node, "http://127.0.0.1:10256/healthz")
		return code
	}
	if code := healthz(); code != 200 {
		t.Fatalf("healthz before: %d", code)
	}

	// Another process takes the table over, in one transaction.
	var owner *nftables.Conn
	if err := tp.Node.Do(func() (err error) {
		if owner, err = nftables.New(nftables.AsLasting()); err != nil {
			return err
		}
		owner.DelTable(&nftables.Table{Name: "kube-proxy", Family: nftables.TableFamilyIPv4})
		owner.AddTable(&nftables.Table{Name: "kube-proxy", Family: nftables.TableFamilyIPv4, Flags: nftables.TableFlagOwner})
		return owner.Flush()
	}); err != nil {
		t.Fatalf("take the table over: %v", err)
	}
	taken := time.Now()
	d := eventually(t, "healthz turns stale", 10*time.Second, func() error {
		if healthz() != 503 {
			return errorf("still healthy")
		}
		return nil
	})
	t.Logf("kernel rejecting every transaction: /healthz 503 after %v (threshold 2 x 2 s sync period)", d)
	if d < 3*time.Second {
		t.Errorf("healthz went stale after %v, before the 4 s threshold", d)
	}
	m := regexp.MustCompile(`kubeproxy_sync_proxy_rules_nftables_sync_failures_total\{ip_family="IPv4"\} (\d+)`).FindStringSubmatch(metrics())
	failures := 0
	if m != nil {
		failures, _ = strconv.Atoi(m[1])
	}
	if failures < 2 {
		t.Errorf("sync failures counted: %d, want several retries", failures)
	}
	// Backoff: far fewer attempts than one per 100 ms min sync period.
	if max := int(time.Since(taken)/(100*time.Millisecond)) / 2; failures > max {
		t.Errorf("%d failed syncs in %v: not backing off", failures, time.Since(taken))
	}

	// The other process lets go: its owner table disappears with its socket.
	if err := owner.CloseLasting(); err != nil {
		t.Fatal(err)
	}
	d = eventually(t, "recovery", 10*time.Second, func() error {
		if _, err := harness.TCPRequest(tp.External, "10.96.0.66:80", 300*time.Millisecond); err != nil {
			return err
		}
		if healthz() != 200 {
			return errorf("healthz still stale")
		}
		return nil
	})
	t.Logf("%d failed syncs counted; recovered %v after the other process let go", failures, d)
}
