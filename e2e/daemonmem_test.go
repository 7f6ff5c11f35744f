//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// daemonSizes are the Service counts of TestDaemonMemoryAgainstKubeProxy
// (NFTPROXY_DAEMON_SIZES, comma-separated; make bench sets larger ones).
func daemonSizes(t *testing.T) []int {
	sizes := []int{1000}
	if v := os.Getenv("NFTPROXY_DAEMON_SIZES"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				t.Fatalf("NFTPROXY_DAEMON_SIZES: bad size %q", f)
			}
			sizes = append(sizes, n)
		}
	}
	return sizes
}

// createScaleObjects creates n Services with 10 endpoints each through the
// API server, from several goroutines. They are scale objects 2 to n+1: the
// API server keeps 10.96.0.0 (the network address) and 10.96.0.1 (the
// kubernetes Service) for itself.
func createScaleObjects(t *testing.T, c kubernetes.Interface, n int) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ScaleNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 16 {
		wg.Go(func() {
			for i := range work {
				svc, sl := ScaleObjects(i, 10)
				_, err := c.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
				if err == nil {
					_, err = c.DiscoveryV1().EndpointSlices(sl.Namespace).Create(ctx, sl, metav1.CreateOptions{})
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("object %d: %w", i, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		work <- i + 2
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}

// peakRSS returns a running process's peak resident set (VmHWM) in MiB.
func peakRSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
	}
	kb, _ := strconv.ParseFloat(string(m[1]), 64)
	return kb / 1024, nil
}

// syncedRules waits until the proxy on the metrics address of c's node has
// finished a sync that programs n Services (its nat rule count, as either
// proxy reports it, reaches 2 rules per endpoint) and returns how long
// that took.
func (c *daemonCluster) syncedRules(t *testing.T, n int, limit time.Duration) time.Duration {
	t.Helper()
	re := regexp.MustCompile(`kubeproxy_sync_proxy_rules_iptables_total\{(?:ip_family="IPv4",)?table="nat"\} (\d+)`)
	return eventually(t, fmt.Sprintf("a sync of %d Services", n), limit, func() error {
		_, body, err := httpGetStatus(c.Node, "http://127.0.0.1:10249/metrics")
		if err != nil {
			return err
		}
		m := re.FindStringSubmatch(body)
		if m == nil {
			return errorf("no nat rule count yet")
		}
		if got, _ := strconv.Atoi(m[1]); got < 20*n {
			return errorf("%d nat rules", got)
		}
		return nil
	})
}

// TestDaemonMemoryAgainstKubeProxy runs nftproxy's daemon and then kube-
// proxy v1.37.2's (iptables mode, iptables-legacy) against the same real
// API server holding N Services x 10 endpoints, in the same node
// namespace, and compares their peak resident memory once each has
// programmed everything. kube-proxy's iptables-restore children are not
// counted. With NFTPROXY_BENCH_OUT set it writes daemon-memory.md there.
func TestDaemonMemoryAgainstKubeProxy(t *testing.T) {
	kubeProxy, err := Tool(".", "kube-proxy")
	if err != nil {
		t.Fatal(err)
	}
	_, legacyPath := findOracle(t)
	var rows []string
	for _, n := range daemonSizes(t) {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			c := newDaemonCluster(t)
			start := time.Now()
			createScaleObjects(t, c.admin, n)
			t.Logf("%d Services and EndpointSlices created in %v", n, time.Since(start).Round(time.Millisecond))
			admin := c.api.Kubeconfig("admin", c.api.AdminToken)
			limit := 2*time.Minute + time.Duration(n)*10*time.Millisecond

			c.kubeconfig = admin
			c.startDaemon(t, "--iptables-min-sync-period", "1s")
			took := c.syncedRules(t, n, limit)
			time.Sleep(2 * time.Second)
			ours, err := peakRSS(c.daemon.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			_ = c.daemon.Process.Kill()
			_ = c.daemon.Wait()
			c.Node.MustRun(t, "nft", "delete", "table", "ip", "kube-proxy")
			c.Node.Run("nft", "delete", "table", "ip6", "kube-proxy")
			t.Logf("nftproxy: synced after %v, peak RSS %.0f MiB", took.Round(time.Millisecond), ours)

			kp := c.Node.Command(kubeProxy, "--kubeconfig", admin, "--hostname-override", LocalNode, "--proxy-mode", "iptables",
				"--cluster-cidr", ClusterCIDR, "--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256",
				"--conntrack-max-per-core", "0", "--conntrack-tcp-timeout-established", "0", "--conntrack-tcp-timeout-close-wait", "0",
				"--iptables-min-sync-period", "1s", "--oom-score-adj", "0")
			kp.Env = append(os.Environ(), "PATH="+legacyPath+":"+os.Getenv("PATH"))
			logPath := filepath.Join(c.api.Dir, "kube-proxy.log")
			kp.Stdout, kp.Stderr = logFile(c.api.Dir, "kube-proxy.log"), logFile(c.api.Dir, "kube-proxy.log")
			if err := kp.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = kp.Process.Kill(); _ = kp.Wait() })
			t.Cleanup(func() {
				if t.Failed() {
					b, _ := os.ReadFile(logPath)
					t.Logf("kube-proxy log (tail):\n%s", tail(b, 3000))
				}
			})
			took = c.syncedRules(t, n, limit)
			time.Sleep(2 * time.Second)
			theirs, err := peakRSS(kp.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("kube-proxy: synced after %v, peak RSS %.0f MiB; nftproxy/kube-proxy %.2f", took.Round(time.Millisecond), theirs, ours/theirs)
			if ours <= 0 || theirs <= 0 {
				t.Fatalf("peak RSS %.0f / %.0f MiB", ours, theirs)
			}
			rows = append(rows, fmt.Sprintf("| %d | %.0f | %.0f | %.2f |", n, ours, theirs, ours/theirs))
		})
	}
	if out := os.Getenv("NFTPROXY_BENCH_OUT"); out != "" && len(rows) > 0 {
		text := "# Daemon memory: nftproxy against kube-proxy\n\nWritten by `make bench` (e2e TestDaemonMemoryAgainstKubeProxy). Each daemon in turn, in the same node namespace, against the same real kube-apiserver holding N Services x 10 endpoints; peak RSS (VmHWM) once it has programmed them all. kube-proxy v1.37.2, iptables mode on iptables-legacy; its iptables-restore children are not counted.\n\n" +
			"| Services | nftproxy peak RSS (MiB) | kube-proxy peak RSS (MiB) | ratio |\n|---:|---:|---:|---:|\n" + strings.Join(rows, "\n") + "\n"
		if err := os.WriteFile(filepath.Join(out, "daemon-memory.md"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
