//go:build linux

package e2e

import (
	"github.com/nftproxy/nftproxy/e2e/harness"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cpuSeconds returns the user and system CPU time a process used so far.
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command name (which may hold spaces).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// TestSecondInstanceDefersToTheFirst: two daemons with different flags
// (the masquerade bit) on one node for a minute, as a rolling update with
// maxSurge or a run by hand beside the DaemonSet would start them. The
// second waits for the first instead of rewriting its table: each uses
// under 15% of one CPU, the table never changes and the Service answers
// throughout. When the first exits, the second takes over with its flags.
func TestSecondInstanceDefersToTheFirst(t *testing.T) {
	tp, dir, objects := oneServiceNode(t, "10.96.0.61")
	args := func(bit string) []string {
		return []string{"--objects", objects, "--netns", tp.Node.Path(), "--cluster-cidr", harness.ClusterCIDR, "--iptables-sync-period", "5s",
			"--iptables-min-sync-period", "100ms", "--masquerade-bit", bit, "--metrics-bind-address", "0", "--healthz-bind-address", "0"}
	}
	list := func() string {
		out, _ := tp.Node.Run("nft", "list", "table", "ip", "kube-proxy")
		return regexp.MustCompile(`packets \d+ bytes \d+`).ReplaceAllString(out, "")
	}
	first := startNftproxy(t, filepath.Join(dir, "first.log"), args("14")...)
	eventually(t, "the first daemon programs its table", 10*time.Second, func() error {
		if !strings.Contains(list(), "10.96.0.61") {
			return errorf("no 10.96.0.61 in the table")
		}
		return nil
	})
	baseline := list()
	secondLog := filepath.Join(dir, "second.log")
	second := startNftproxy(t, secondLog, args("15")...)
	cpu0 := map[int]float64{first.Process.Pid: cpuSeconds(t, first.Process.Pid), second.Process.Pid: cpuSeconds(t, second.Process.Pid)}
	start := time.Now()
	const span = time.Minute
	for time.Since(start) < span {
		if got := list(); got != baseline {
			t.Fatalf("after %v the table changed:\n%s\nwas:\n%s", time.Since(start).Round(time.Second), got, baseline)
		}
		if _, err := harness.TCPRequest(tp.External, "10.96.0.61:80", timeout); err != nil {
			t.Fatalf("after %v: %v", time.Since(start).Round(time.Second), err)
		}
		time.Sleep(time.Second)
	}
	elapsed := time.Since(start).Seconds()
	for pid, before := range cpu0 {
		share := (cpuSeconds(t, pid) - before) / elapsed
		t.Logf("pid %d: %.1f%% of one CPU over %.0f s", pid, 100*share, elapsed)
		if share > 0.15 {
			t.Errorf("pid %d used %.1f%% of one CPU, want under 15%%", pid, 100*share)
		}
	}
	logs, _ := os.ReadFile(secondLog)
	if n := strings.Count(string(logs), "Another nftproxy programs this node's rules"); n != 1 {
		t.Errorf("the second daemon said it waits %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(string(logs), "holderPID="+strconv.Itoa(first.Process.Pid)) {
		t.Errorf("the second daemon did not name the first (pid %d):\n%s", first.Process.Pid, logs)
	}
	// The first exits: the second takes over with its own masquerade bit.
	_ = first.Process.Kill()
	_, _ = first.Process.Wait()
	eventually(t, "the second daemon takes over", 10*time.Second, func() error {
		if !strings.Contains(list(), "0x00008000") {
			return errorf("the masquerade bit is not the second daemon's")
		}
		return nil
	})
	if _, err := harness.TCPRequest(tp.External, "10.96.0.61:80", timeout); err != nil {
		t.Fatal(err)
	}
}

// TestForeignWriterIsRepairedWithBackoff: another process flushes
// nftproxy's KUBE-SERVICES chain every 200 ms for 25 s (a change each time
// nftproxy refilled it). nftproxy
// repairs it each time later (the minimum sync period doubled per return),
// names the writer once per step, counts its commits, reports the table as
// contested on /healthz, and uses little CPU; once the writer stops, the
// table is repaired.
func TestForeignWriterIsRepairedWithBackoff(t *testing.T) {
	tp, dir, objects := oneServiceNode(t, "10.96.0.62")
	logPath := filepath.Join(dir, "nftproxy.log")
	cmd := startNftproxy(t, logPath, "--objects", objects, "--netns", tp.Node.Path(), "--cluster-cidr", harness.ClusterCIDR,
		"--iptables-sync-period", "1m", "--iptables-min-sync-period", "1s",
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256")
	list := func() string {
		out, _ := tp.Node.Run("nft", "list", "chain", "ip", "kube-proxy", "KUBE-SERVICES")
		return out
	}
	eventually(t, "nftproxy programs its table", 10*time.Second, func() error {
		if !strings.Contains(list(), "service-ips") {
			return errorf("KUBE-SERVICES is empty")
		}
		return nil
	})
	cpu0 := cpuSeconds(t, cmd.Process.Pid)
	start := time.Now()
	flushes := 0
	contested := false
	for time.Since(start) < 25*time.Second {
		tp.Node.MustRun(t, "nft", "flush", "chain", "ip", "kube-proxy", "KUBE-SERVICES")
		flushes++
		time.Sleep(200 * time.Millisecond)
		if !contested {
			if code, body, err := httpGetStatus(tp.Node, "http://127.0.0.1:10256/healthz"); err == nil && code == 503 && strings.Contains(body, `"contestedBy":"nft[`) {
				contested = true
				t.Logf("/healthz says contested after %v: %s", time.Since(start).Round(time.Second), strings.TrimSpace(body))
			}
		}
	}
	share := (cpuSeconds(t, cmd.Process.Pid) - cpu0) / time.Since(start).Seconds()
	eventually(t, "the table is repaired once the writer stopped", 30*time.Second, func() error {
		if !strings.Contains(list(), "service-ips") {
			return errorf("KUBE-SERVICES is still empty")
		}
		return nil
	})
	metrics := httpGet(t, tp.Node, "http://127.0.0.1:10249/metrics")
	repairs := metricSum(metrics, "nftproxy_drift_repairs_total")
	commits := metricSum(metrics, "nftproxy_foreign_commits_total")
	logs, _ := os.ReadFile(logPath)
	named := strings.Count(string(logs), "Another process keeps changing nftproxy's table")
	t.Logf("%d flushes: %d repairs, %d foreign commits counted, writer named %d times, %.1f%% of one CPU", flushes, repairs, commits, named, 100*share)
	if repairs < 3 || repairs > 10 {
		t.Errorf("%d repairs for %d flushes over 25 s, want a handful (backoff)", repairs, flushes)
	}
	// A flush of the chain already empty changes nothing and is not
	// reported: every repair is undone by one commit that is.
	if commits < repairs {
		t.Errorf("foreign commits counted %d, want at least one per repair (%d)", commits, repairs)
	}
	if named < 2 || named > 8 {
		t.Errorf("the writer was named %d times, want once per step of the backoff", named)
	}
	if !contested {
		t.Errorf("/healthz never reported the table as contested")
	}
	if share > 0.15 {
		t.Errorf("nftproxy used %.1f%% of one CPU while another writer fought it", 100*share)
	}
	if _, err := harness.TCPRequest(tp.External, "10.96.0.62:80", timeout); err != nil {
		t.Errorf("after the repair: %v", err)
	}
}

// oneServiceNode is a topology with one endpoint pod and an objects file
// (in dir) of one Service demo/web at clusterIP:80 with that endpoint.
func oneServiceNode(t *testing.T, clusterIP string) (tp *harness.Topology, dir, objects string) {
	tp = harness.NewTopology(t, echoBinary)
	tp.AddPod("ep1", harness.PodIP(1), []int{8080}, nil)
	dir = t.TempDir()
	objects = writeObjects(t, dir, harness.ClusterIPService("demo", "web", clusterIP, httpPort),
		harness.Slice("demo", "web", "web-1", []harness.PortSpec{httpPort}, harness.PodIP(1)))
	return tp, dir, objects
}
