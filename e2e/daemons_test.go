//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
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

	"github.com/nftproxy/nftproxy/e2e/harness"
	"github.com/nftproxy/nftproxy/e2e/testns"
	"github.com/nftproxy/nftproxy/e2e/tools/benchreport"
)

// daemonSizes are the Service counts of TestDaemonsSideBySide
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
	if _, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: harness.ScaleNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 16 {
		wg.Go(func() {
			for i := range work {
				svc, sl := harness.ScaleObjects(i, 10)
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

// proxyDaemon is one proxy daemon of the side-by-side run: how to start
// it in the node namespace.
type proxyDaemon struct {
	name  string
	start func(t *testing.T) *exec.Cmd
}

// newScaleCluster starts a real API server holding n scale Services x 10
// endpoints, the endpoint pods ep1 and ep2, a client pod and the probe
// Service (its endpoint ep1); it returns the cluster, the client and the
// admin kubeconfig the daemons use.
func newScaleCluster(t *testing.T, n int) (*daemonCluster, *harness.Pod, string) {
	t.Helper()
	c := newDaemonCluster(t)
	createScaleObjects(t, c.admin, n)
	c.AddPod("ep1", harness.PodIP(1), []int{8080}, nil)
	c.AddPod("ep2", harness.PodIP(2), []int{8080}, nil)
	client := c.AddPod("client", harness.PodIP(100), nil, nil)
	ctx := context.Background()
	if _, err := c.admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.CoreV1().Services("probe").Create(ctx, harness.ClusterIPService("probe", "web", probeIP, httpPort), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setProbeSlice(t, c, harness.PodIP(1))
	return c, client, c.api.Kubeconfig("admin", c.api.AdminToken)
}

// nftproxyDaemon is nftproxy's daemon against c's API server, with
// kube-proxy's default sync periods of the side-by-side runs.
func nftproxyDaemon(c *daemonCluster, admin string) proxyDaemon {
	return proxyDaemon{name: "nftproxy", start: func(t *testing.T) *exec.Cmd {
		c.kubeconfig = admin
		args := []string{"--iptables-min-sync-period", c.benchMinSync(), "--iptables-sync-period", "30s"}
		if os.Getenv("NFTPROXY_DAEMON_PROFILE") != "" {
			args = append(args, "--profiling")
		}
		c.startDaemon(t, args...)
		return c.daemon
	}}
}

// nftproxyBuilds returns nftproxy's daemon of each binary in bins, twice
// each, alternated; each is named by its binary.
func nftproxyBuilds(c *daemonCluster, admin string, bins []string) []proxyDaemon {
	var out []proxyDaemon
	for range 2 {
		for _, bin := range bins {
			d := nftproxyDaemon(c, admin)
			start := d.start
			d.name, d.start = "nftproxy "+filepath.Base(bin), func(t *testing.T) *exec.Cmd { c.binary = bin; return start(t) }
			out = append(out, d)
		}
	}
	return out
}

// kubeProxyDaemon is kube-proxy (binary kubeProxy) in mode against c's API
// server, with env added to its environment.
func kubeProxyDaemon(c *daemonCluster, kubeProxy, admin, mode string, env ...string) proxyDaemon {
	return proxyDaemon{name: "kube-proxy " + mode, start: func(t *testing.T) *exec.Cmd {
		kp := c.Node.Command(kubeProxy, "--kubeconfig", admin, "--hostname-override", harness.LocalNode, "--proxy-mode", mode,
			"--cluster-cidr", harness.ClusterCIDR, "--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256",
			"--conntrack-max-per-core", "0", "--conntrack-tcp-timeout-established", "0", "--conntrack-tcp-timeout-close-wait", "0",
			"--iptables-min-sync-period", c.benchMinSync(), "--oom-score-adj", "0")
		kp.Env = append(os.Environ(), env...)
		log := harness.LogFile(c.api.Dir, "kube-proxy-"+mode+".log")
		kp.Stdout, kp.Stderr = log, log
		if err := kp.Start(); err != nil {
			t.Fatal(err)
		}
		return kp
	}}
}

// metricSumCount returns the sum and the count of the histogram series
// that re finds (its groups: "sum" or "count", then the value) on the
// daemon's metrics, over every label set; zeros when it cannot be read.
func metricSumCount(c *daemonCluster, re *regexp.Regexp) (sum, count float64) {
	_, body, err := httpGetStatus(c.Node, "http://127.0.0.1:10249/metrics")
	if err != nil {
		return 0, 0
	}
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		if m[1] == "sum" {
			sum += v
		} else {
			count += v
		}
	}
	return sum, count
}

// cleanupProxies deletes the rules a proxy daemon leaves in ns:
// kube-proxy's (either mode) or nftproxy's tables, shards and handover, and
// kube-proxy's iptables chains, with `nftproxy --cleanup`.
func cleanupProxies(ns *testns.NS) {
	// nftproxy's own cleanup, not `nft list tables`: nft fills its cache
	// with every chain of every table first, minutes at 30,000 Services.
	_, _ = ns.Run(nftproxyBinary, "--cleanup")
}

// daemonRun is what one daemon showed with N Services.
type daemonRun struct {
	// firstSync is from the process's start until the probe Service,
	// created after all the others, answers; timedOut if it never did.
	firstSync time.Duration
	timedOut  bool
	// ownSync is the daemon's own kubeproxy_sync_full_proxy_rules_duration_seconds
	// (sum over count) when the probe first answered; -1 if not exported.
	ownSync float64
	// change is from an EndpointSlice update of the probe Service until
	// all its traffic goes to the new endpoint; ownChange is the daemon's
	// own network programming latency of that update, in seconds (-1 if
	// not observed).
	change    time.Duration
	ownChange float64
	// apiWrite is the median time the API server took to write the
	// moves' EndpointSlice updates, part of change and ownChange.
	apiWrite time.Duration
	// peakRSS is the process's VmHWM in MiB after the change.
	peakRSS float64
}

// probeIP is the probe Service's cluster IP: in the service range, above
// every scale Service's (10.96.0.0 to 10.97.134.161 at 100,000).
const probeIP = "10.110.0.10"

var fullSyncMetric = regexp.MustCompile(`kubeproxy_sync_full_proxy_rules_duration_seconds_(sum|count)(?:\{[^}]*\})? ([0-9.e+-]+)`)

// ownFullSync reads a daemon's mean full-sync duration from its metrics,
// waiting up to 30 s for the first observation: traffic flows from the
// commit on, the metric is observed when the sync returns.
func ownFullSync(c *daemonCluster) float64 {
	own := -1.0
	_, _ = poll(30*time.Second, func() error {
		if own = fullSyncMean(c); own < 0 {
			return errorf("no full sync observed yet")
		}
		return nil
	})
	return own
}

// fullSyncMean is a daemon's mean full-sync duration now, -1 if none.
func fullSyncMean(c *daemonCluster) float64 {
	sum, count := metricSumCount(c, fullSyncMetric)
	if count == 0 {
		return -1
	}
	return sum / count
}

var programmingMetric = regexp.MustCompile(`kubeproxy_network_programming_duration_seconds_(sum|count)(?:\{[^}]*\})? ([0-9.e+-]+)`)

// runDaemon starts d against c's API server, which holds the scale
// objects and the probe Service (endpoint ep1), and measures it; then it
// stops d and removes its tables.
func runDaemon(t *testing.T, c *daemonCluster, d proxyDaemon, client *harness.Pod, limit time.Duration) daemonRun {
	request := func() (harness.Reply, error) {
		return harness.TCPRequest(client.NS, probeIP+":80", 300*time.Millisecond)
	}
	var run daemonRun
	cmd := d.start(t)
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		cleanupProxies(c.Node)
	}()
	var err error
	if run.firstSync, err = poll(limit, servedBy(request, "ep1")); err != nil {
		run.timedOut = true
		if rss, err := peakRSS(cmd.Process.Pid); err == nil {
			run.peakRSS = rss
		}
		t.Logf("%s: the probe Service did not answer within %v: %v", d.name, limit, err)
		return run
	}
	run.ownSync = ownFullSync(c)
	saveProfiles(t, c, d.name, "first-sync-"+strings.ReplaceAll(d.name, " ", "-"))
	// Past the minimum sync period, and past the API server's work of
	// serving the daemon's first lists (a fast first sync otherwise meets
	// a busy API server).
	time.Sleep(changeSettle)
	sum0, count0 := metricSumCount(c, programmingMetric)
	var changes, writes []float64
	for k := 0; k < changeMoves; k++ {
		target := []string{"ep2", "ep1"}[k%2]
		start := time.Now()
		writes = append(writes, setProbeSlice(t, c, harness.PodIP(2-k%2)).Seconds())
		if _, err := pollEvery(limit, 5*time.Millisecond, servedBy(request, target)); err != nil {
			t.Errorf("%s: an endpoint change was not followed within %v: %v", d.name, limit, err)
		}
		changes = append(changes, time.Since(start).Seconds())
		if k < changeMoves-1 {
			time.Sleep(1500 * time.Millisecond) // past the minimum sync period again
		}
	}
	run.change = time.Duration(benchreport.Quantile(changes, 0.5) * float64(time.Second))
	run.apiWrite = time.Duration(benchreport.Quantile(writes, 0.5) * float64(time.Second))
	// The daemon observes its programming latency once the sync returns.
	run.ownChange = -1
	_, _ = poll(5*time.Second, func() error {
		if sum, count := metricSumCount(c, programmingMetric); count >= count0+changeMoves {
			run.ownChange = (sum - sum0) / (count - count0)
			return nil
		}
		return errorf("not every network programming latency observed yet")
	})
	setProbeSlice(t, c, harness.PodIP(1)) // where the next daemon expects it
	if run.peakRSS, err = peakRSS(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: probe answered %v after start (own full sync %.2f s), change followed in %v (median of %d; API write %v; own programming latency %.3f s), peak RSS %.0f MiB",
		d.name, run.firstSync.Round(time.Millisecond), run.ownSync, run.change.Round(time.Millisecond), changeMoves, run.apiWrite.Round(time.Millisecond), run.ownChange, run.peakRSS)
	return run
}

// changeMoves is how many times the daemons bench moves the probe's
// endpoint (the one change is their median), changeSettle how long it
// waits after the first sync before the first.
const (
	changeMoves  = 3
	changeSettle = 10 * time.Second
)

// setProbeSlice points the probe Service's EndpointSlice at ip and returns
// how long the API server took to write it.
func setProbeSlice(t *testing.T, c *daemonCluster, ip string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sl := harness.Slice("probe", "web", "web-1", []harness.PortSpec{httpPort}, ip)
	// As the EndpointSlice controller marks a change, so that each daemon
	// reports its network programming latency of it.
	sl.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: time.Now().UTC().Format(time.RFC3339Nano)}
	start := time.Now()
	if _, err := c.admin.DiscoveryV1().EndpointSlices("probe").Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		if _, err := c.admin.DiscoveryV1().EndpointSlices("probe").Create(ctx, sl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return time.Since(start)
}

// TestDaemonsSideBySide runs nftproxy's daemon, then kube-proxy v1.37.2 in
// nftables mode, then kube-proxy in iptables mode (iptables-legacy), each
// in turn in the same node namespace against the same real API server
// holding N Services x 10 endpoints and one probe Service with a real
// endpoint, and measures each: from its start until the probe answers,
// its own full-sync duration metric, how long one EndpointSlice change
// takes to reach traffic, and its peak resident memory (kube-proxy's
// iptables-restore and nft children are not counted). A daemon that does
// not program the probe within the limit is recorded as such. With
// NFTPROXY_BENCH_OUT set it writes daemons.md there; with
// NFTPROXY_DAEMONS=nftproxy it runs nftproxy's daemon only (to profile it),
// and with NFTPROXY_DAEMON_BINARIES (comma-separated paths) the nftproxy
// builds given, twice each, alternated, against the same objects (to
// compare two builds in one run).
func TestDaemonsSideBySide(t *testing.T) {
	kubeProxy, err := harness.Tool(".", "kube-proxy")
	if err != nil {
		t.Fatal(err)
	}
	_, legacyPath := findOracle(t)
	var rows []string
	for _, n := range daemonSizes(t) {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			start := time.Now()
			c, client, admin := newScaleCluster(t, n)
			t.Logf("%d Services and EndpointSlices created in %v", n, time.Since(start).Round(time.Millisecond))
			daemons := []proxyDaemon{
				nftproxyDaemon(c, admin),
				kubeProxyDaemon(c, kubeProxy, admin, "nftables"),
				kubeProxyDaemon(c, kubeProxy, admin, "iptables", "PATH="+legacyPath+":"+os.Getenv("PATH")),
			}
			if os.Getenv("NFTPROXY_DAEMONS") == "nftproxy" {
				daemons = daemons[:1]
			}
			if v := os.Getenv("NFTPROXY_DAEMON_BINARIES"); v != "" {
				daemons = nftproxyBuilds(c, admin, strings.Split(v, ","))
			}
			limit := 2*time.Minute + time.Duration(n)*20*time.Millisecond
			runs := make([]daemonRun, len(daemons))
			for i, d := range daemons {
				runs[i] = runDaemon(t, c, d, client, limit)
			}
			for i, d := range daemons {
				r := runs[i]
				first, own, change := fmt.Sprintf("%.1f", r.firstSync.Seconds()), "-", fmt.Sprintf("%.0f", float64(r.change.Microseconds())/1000)
				ownChange := "-"
				if r.ownChange >= 0 {
					ownChange = fmt.Sprintf("%.0f", 1000*r.ownChange)
					if i > 0 && runs[0].ownChange > 0 {
						ownChange += fmt.Sprintf(" (%.1fx nftproxy's)", r.ownChange/runs[0].ownChange)
					}
				}
				if r.timedOut {
					first, change, ownChange = fmt.Sprintf("> %.0f (not programmed)", limit.Seconds()), "-", "-"
				}
				if r.ownSync >= 0 && !r.timedOut {
					own = fmt.Sprintf("%.2f", r.ownSync)
				}
				ratio := "-"
				if i > 0 && runs[0].peakRSS > 0 && r.peakRSS > 0 {
					ratio = fmt.Sprintf("%.2f", runs[0].peakRSS/r.peakRSS)
				}
				write := fmt.Sprintf("%.0f", float64(r.apiWrite.Microseconds())/1000)
				if r.timedOut {
					write = "-"
				}
				rows = append(rows, fmt.Sprintf("| %d | %s | %s | %s | %s | %s | %s | %.0f | %s |", n, d.name, first, own, change, write, ownChange, r.peakRSS, ratio))
			}
			if runs[0].timedOut {
				t.Errorf("nftproxy did not program %d Services within %v", n, limit)
			}
		})
	}
	if out := os.Getenv("NFTPROXY_BENCH_OUT"); out != "" && len(rows) > 0 {
		text := "# Daemons side by side: nftproxy, kube-proxy nftables mode, kube-proxy iptables mode\n\n" +
			"Written by `make bench` (e2e TestDaemonsSideBySide) on " + time.Now().UTC().Format(time.RFC3339) + ", " + machineSummary() + ". " +
			"Each daemon in turn, in the same node namespace, against the same real kube-apiserver holding N Services x 10 endpoints " +
			"and one probe Service (created last) whose endpoint is a real server. kube-proxy v1.37.2; iptables mode on iptables-legacy. " +
			"First sync: from the process's start until the probe Service answers (an outside probe; all Services are programmed in that one sync). " +
			"Own metric: the daemon's kubeproxy_sync_full_proxy_rules_duration_seconds (mean) at that moment. " +
			"One change: 10 s after that (past each daemon's 1 s minimum sync period, and past the API server's serving of the daemon's first lists) the probe's EndpointSlice moved to another endpoint (with the last-change-trigger-time annotation the EndpointSlice controller sets), until all its traffic goes there (polled every 5 ms, ten requests); " +
			fmt.Sprintf("the median of %d moves 1.5 s apart; API write: the median time the API server took to accept those updates, part of both latencies; ", changeMoves) +
			"own programming latency: the daemon's kubeproxy_network_programming_duration_seconds of those changes, their mean (from the annotation to its rules committed). " +
			"Peak RSS: VmHWM of the daemon process after that (kube-proxy's iptables-restore and nft children not counted); " +
			"ratio: nftproxy's peak RSS over that daemon's.\n\n" +
			"| Services | daemon | first sync: probe answers (s) | own full-sync metric (s) | one change (ms) | API write (ms) | own programming latency (ms) | peak RSS (MiB) | nftproxy RSS ratio |\n" +
			"|---:|---|---:|---:|---:|---:|---:|---:|---:|\n" + strings.Join(rows, "\n") + "\n"
		if err := os.WriteFile(filepath.Join(out, "daemons.md"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// machineSummary is machineDetails without the side-by-side benchmark's
// own settings, on one line.
func machineSummary() string {
	var parts []string
	for _, kv := range machineDetails(benchConfig{}) {
		switch kv[0] {
		case "date", "sizes", "connections per round x rounds", "load timeouts: iptables restores / nft -f":
			continue
		}
		parts = append(parts, kv[0]+": "+kv[1])
	}
	return strings.Join(parts, "; ")
}

// saveProfiles writes the nftproxy daemon's heap (after a GC) and
// allocation profiles to NFTPROXY_DAEMON_PROFILE, named by when, if that
// is set and the daemon is nftproxy (started with --profiling then).
func saveProfiles(t *testing.T, c *daemonCluster, daemon, when string) {
	dir := os.Getenv("NFTPROXY_DAEMON_PROFILE")
	if dir == "" || !strings.HasPrefix(daemon, "nftproxy") {
		return
	}
	if peak, err := peakRSS(c.daemon.Process.Pid); err == nil {
		t.Logf("nftproxy at %s: peak RSS %.0f MiB", when, peak)
	}
	for _, p := range []string{"heap?gc=1", "allocs"} {
		_, body, err := httpGetStatus(c.Node, "http://127.0.0.1:10249/debug/pprof/"+p)
		if err != nil {
			t.Errorf("profile %s: %v", p, err)
			continue
		}
		name := filepath.Join(dir, fmt.Sprintf("%s-%s.pb.gz", when, strings.TrimSuffix(p, "?gc=1")))
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Error(err)
		}
	}
}
