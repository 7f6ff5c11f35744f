//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRollbackHoldsConnectionsUntilKubeProxySyncs: the moment of a
// rollback, replayed. The daemon programs a Service and is stopped with
// SIGTERM (the DaemonSet's rollout); kube-proxy starts and deletes the
// kube-proxy tables (nftproxy's) before its first sync. A connection opened
// then is not refused: the handover table the daemon left drops its first
// SYN, and the retransmission meets kube-proxy's rules (its own iptables
// proxier, loaded 400 ms later). Then a new daemon deletes the handover.
func TestRollbackHoldsConnectionsUntilKubeProxySyncs(t *testing.T) {
	oracle, pathDir := findOracle(t)
	tp := NewTopology(t, echoBinary)
	tp.AddPod("ep1", PodIP(1), []int{8080}, nil)
	client := tp.AddPod("client", PodIP(100), nil, nil)
	dir := t.TempDir()
	objects := writeObjects(t, dir, testNode(), ClusterIPService("demo", "web", "10.96.0.70", httpPort),
		Slice("demo", "web", "web-1", []PortSpec{httpPort}, PodIP(1)))
	logPath := filepath.Join(dir, "nftproxy.log")
	args := []string{"--objects", objects, "--netns", tp.Node.Path(), "--hostname-override", LocalNode, "--cluster-cidr", ClusterCIDR,
		"--metrics-bind-address", "0", "--healthz-bind-address", "0"}
	daemon := startNftproxy(t, logPath, args...)
	eventually(t, "the daemon serves the Service", 15*time.Second, func() error {
		_, err := TCPRequest(client.NS, "10.96.0.70:80", time.Second)
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
	result := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := TCPRequest(client.NS, "10.96.0.70:80", 5*time.Second)
		result <- err
	}()
	time.Sleep(400 * time.Millisecond)
	cmd := tp.Node.Command(oracle, "-objects", objects, "-hostname", LocalNode, "-node-ip", NodeIP, "-cluster-cidr", ClusterCIDR)
	cmd.Env = append(os.Environ(), "PATH="+pathDir+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kube-proxy's first sync (the oracle): %v\n%s", err, out)
	}
	if err := <-result; err != nil {
		t.Fatalf("a connection opened between kube-proxy's cleanup and its first sync failed: %v", err)
	}
	t.Logf("the connection opened in the gap succeeded after %v (its SYN retransmitted)", time.Since(start).Round(time.Millisecond))
	// A destination kube-proxy does not serve is not held for ever: the
	// elements expire (here the set's timeout is checked, not waited for).
	if out := tp.Node.MustRun(t, "nft", "list", "table", "ip", "nftproxy-handover"); !strings.Contains(out, fmt.Sprintf("timeout %dm", 10)) {
		t.Errorf("the handover sets have no 10 min timeout:\n%s", out)
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
