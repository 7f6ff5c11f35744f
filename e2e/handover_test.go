//go:build linux

package e2e

import (
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRollbackServesConnectionsUntilKubeProxySyncs: the moment of a
// rollback, replayed. The daemon programs a Service and is stopped with
// SIGTERM (the DaemonSet's rollout); kube-proxy starts and deletes the
// kube-proxy tables (nftproxy's) before its first sync. A connection opened
// then is served at once by the handover table the daemon left, from the
// endpoints it last programmed (it was refused before the handover, and
// held for a retransmission with its first version). Once kube-proxy's
// rules are in (its own iptables proxier, with the Service now on another
// endpoint), they win: every connection reaches kube-proxy's endpoint,
// none the handover's. Then a new daemon deletes the handover.
func TestRollbackServesConnectionsUntilKubeProxySyncs(t *testing.T) {
	oracle, pathDir := findOracle(t)
	tp := harness.NewTopology(t, echoBinary)
	tp.AddPod("ep1", harness.PodIP(1), []int{8080}, nil)
	tp.AddPod("ep2", harness.PodIP(2), []int{8080}, nil)
	client := tp.AddPod("client", harness.PodIP(100), nil, nil)
	dir := t.TempDir()
	objects := writeObjects(t, dir, testNode(), harness.ClusterIPService("demo", "web", "10.96.0.70", httpPort),
		harness.Slice("demo", "web", "web-1", []harness.PortSpec{httpPort}, harness.PodIP(1)))
	logPath := filepath.Join(dir, "nftproxy.log")
	args := []string{"--objects", objects, "--netns", tp.Node.Path(), "--hostname-override", harness.LocalNode, "--cluster-cidr", harness.ClusterCIDR,
		"--metrics-bind-address", "0", "--healthz-bind-address", "0"}
	daemon := startNftproxy(t, logPath, args...)
	eventually(t, "the daemon serves the Service", 15*time.Second, func() error {
		_, err := harness.TCPRequest(client.NS, "10.96.0.70:80", time.Second)
		return err
	})
	daemon.Process.Signal(syscall.SIGTERM)
	daemon.Wait()
	if log, _ := os.ReadFile(logPath); !strings.Contains(string(log), "Left the handover table") {
		t.Fatalf("no handover on SIGTERM:\n%s", log)
	}
	if out := tp.Node.MustRun(t, "nft", "list", "set", "ip", "nftproxy-handover", "service-ips"); !strings.Contains(out, "10.96.0.70 . tcp . 80 expires") {
		t.Fatalf("the handover does not hold the Service with a timeout:\n%s", out)
	}
	// kube-proxy's start, in iptables mode: its nftables cleanup.
	tp.Node.MustRun(t, "nft", "delete", "table", "ip", "kube-proxy")
	for i := range 5 {
		start := time.Now()
		r, err := harness.TCPRequest(client.NS, "10.96.0.70:80", 800*time.Millisecond)
		if err != nil || r.Server != "ep1" {
			t.Fatalf("connection %d between kube-proxy's cleanup and its first sync: %+v, %v; want ep1 at once, from the handover", i, r, err)
		}
		if d := time.Since(start); i == 0 {
			t.Logf("served by the handover in %v", d.Round(time.Microsecond))
		}
	}
	moved := writeObjects(t, t.TempDir(), testNode(), harness.ClusterIPService("demo", "web", "10.96.0.70", httpPort),
		harness.Slice("demo", "web", "web-1", []harness.PortSpec{httpPort}, harness.PodIP(2)))
	cmd := tp.Node.Command(oracle, "-objects", moved, "-hostname", harness.LocalNode, "-node-ip", harness.NodeIP, "-cluster-cidr", harness.ClusterCIDR)
	cmd.Env = append(os.Environ(), "PATH="+pathDir+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kube-proxy's first sync (the oracle): %v\n%s", err, out)
	}
	for i := range 20 {
		if r, err := harness.TCPRequest(client.NS, "10.96.0.70:80", 2*time.Second); err != nil || r.Server != "ep2" {
			t.Fatalf("connection %d after kube-proxy's first sync: %+v, %v; want kube-proxy's endpoint ep2, never the handover's", i, r, err)
		}
	}
	// The handover's elements expire (the timeout is checked, not waited
	// for): after it, nothing of it matches.
	if out := tp.Node.MustRun(t, "nft", "list", "table", "ip", "nftproxy-handover"); strings.Count(out, fmt.Sprintf("timeout %dm", 10)) != 4 {
		t.Errorf("the handover's four sets and maps do not all have a 10 min timeout:\n%s", out)
	}

	// Roll forward: the next nftproxy deletes the handover once its own
	// rules are in place.
	startNftproxy(t, filepath.Join(dir, "nftproxy-2.log"), args...)
	eventually(t, "the next daemon deletes the handover", 15*time.Second, func() error {
		if out, _ := tp.Node.Run("nft", "list", "tables"); strings.Contains(out, "nftproxy-handover") {
			return fmt.Errorf("still there: %s", out)
		}
		return nil
	})
}
