//go:build linux

package e2e

import (
	"github.com/nftproxy/nftproxy/e2e/harness"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTamperingIsRepairedWithinASecond tampers with nftproxy's table in
// four ways while the daemon runs (with a 1-minute periodic resync, so only
// the netlink monitor can explain a fast repair) and checks that each is
// repaired within 1 s, counted and logged, and that another table is never
// touched.
func TestTamperingIsRepairedWithinASecond(t *testing.T) {
	tp := harness.NewTopology(t, echoBinary)
	tp.AddPod("ep1", harness.PodIP(1), []int{8080}, nil)
	otherBefore := loadForeignTable(t, tp.Node, "inet", "other-tool",
		"table inet other-tool {\n\tchain input {\n\t\ttype filter hook input priority 0; policy accept;\n\t\ttcp dport 22 accept\n\t}\n}\n")

	dir := t.TempDir()
	objects := writeObjects(t, dir, harness.ClusterIPService("demo", "web", "10.96.0.60", httpPort),
		harness.Slice("demo", "web", "web-1", []harness.PortSpec{httpPort}, harness.PodIP(1)))
	logPath := filepath.Join(dir, "nftproxy.log")
	startNftproxy(t, logPath, "--objects", objects, "--netns", tp.Node.Path(), "--cluster-cidr", harness.ClusterCIDR,
		"--iptables-sync-period", "1m", "--iptables-min-sync-period", "100ms", "--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "0")

	// Repairs honour the minimum sync period (100 ms here, kube-proxy's
	// default is 1 s): the seven tamperings follow each other at once.
	// The listing with its objects sorted: a chain made anew is listed
	// last, with the same meaning.
	list := func() string {
		out, _ := tp.Node.Run("nft", "list", "table", "ip", "kube-proxy")
		return sortedObjects(out)
	}
	eventually(t, "nftproxy programs its table", 10*time.Second, func() error {
		if !strings.Contains(list(), "10.96.0.60") {
			return errorf("no 10.96.0.60 in the table")
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond)
	baseline := list()

	tampers := []struct {
		name string
		args []string
	}{
		{"table deleted", []string{"delete", "table", "ip", "kube-proxy"}},
		{"chain flushed", []string{"flush", "chain", "ip", "kube-proxy", "KUBE-SERVICES"}},
		{"map element removed", []string{"delete", "element", "ip", "kube-proxy", "service-ips", "{ 10.96.0.60 . tcp . 80 }"}},
		{"foreign rule inserted", []string{"insert", "rule", "ip", "kube-proxy", "KUBE-SERVICES", "ip", "daddr", "10.96.0.60", "drop"}},
		{"table made dormant", []string{"add", "table", "ip", "kube-proxy", "{ flags dormant; }"}},
		{"base chain policy set to drop", []string{"add", "chain", "ip", "kube-proxy", "filter-input", "{ type filter hook input priority -110; policy drop; }"}},
		{"base chain replaced at another priority", []string{"delete chain ip kube-proxy nat-output; add chain ip kube-proxy nat-output { type nat hook output priority 50; }"}},
	}
	for _, tm := range tampers {
		tp.Node.MustRun(t, "nft", tm.args...)
		start := time.Now()
		for list() != baseline {
			if time.Since(start) > time.Second {
				logs, _ := os.ReadFile(logPath)
				t.Fatalf("%s: not repaired within 1 s:\n%s\n%s", tm.name, list(), logs)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("%s: repaired after %v", tm.name, time.Since(start).Round(time.Millisecond))
		if _, err := harness.TCPRequest(tp.External, "10.96.0.60:80", timeout); err != nil {
			t.Errorf("%s: traffic after repair: %v", tm.name, err)
		}
	}
	metrics := httpGet(t, tp.Node, "http://127.0.0.1:10249/metrics")
	total := 0
	for _, m := range regexp.MustCompile(`nftproxy_drift_repairs_total\{reason="[^"]+"\} (\d+)`).FindAllStringSubmatch(metrics, -1) {
		n := 0
		for _, c := range m[1] {
			n = n*10 + int(c-'0')
		}
		total += n
	}
	// One repair per tampering: nftproxy's own repairs must not count as
	// drift (the kernel names the committing thread, not the process).
	if total < len(tampers) || total > 2*len(tampers) {
		t.Errorf("nftproxy_drift_repairs_total = %d, want %d (one per tampering):\n%s", total, len(tampers), grepLines(metrics, "drift"))
	}
	logs, _ := os.ReadFile(logPath)
	if n := strings.Count(string(logs), "Repairing nftproxy's table changed by another process"); n < len(tampers) || n > 2*len(tampers) {
		t.Errorf("%d repair log lines, want %d", n, len(tampers))
	}
	if got := tp.Node.MustRun(t, "nft", "list", "table", "inet", "other-tool"); got != otherBefore {
		t.Errorf("another table was touched:\n%s", got)
	}
}

// sortedObjects returns an `nft list table` listing with its top-level
// objects (chains, maps, sets, counters) in sorted order.
func sortedObjects(listing string) string {
	var blocks []string
	for _, line := range strings.Split(listing, "\n") {
		if len(line) > 1 && line[0] == '\t' && line[1] != '\t' || len(blocks) == 0 {
			blocks = append(blocks, "")
		}
		blocks[len(blocks)-1] += line + "\n"
	}
	slices.Sort(blocks[1:])
	return strings.Join(blocks, "")
}
