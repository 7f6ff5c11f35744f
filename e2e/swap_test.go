//go:build linux

package e2e

import (
	"flag"
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// swapServices is the number of Services of the swap test: by default
// enough that kube-proxy's rules and nftproxy's first sync take a while,
// small enough for make test (`-args -swap-services 10000` for the scale
// run).
var swapServices = flag.Int("swap-services", 2000, "Services of TestSwapResyncAndRestartLoseNoConnection")

// TestSwapResyncAndRestartLoseNoConnection: kube-proxy's own iptables proxier
// (the oracle, iptables-legacy) programs the node for 2,000 Services; a
// client opens a new connection to one of them every 5 ms; then the
// nftproxy daemon starts on the same objects. It programs its table first
// and removes kube-proxy's rules only after, so no connection fails. Then,
// under the same traffic, another process flushes a chain (the drift
// monitor makes the daemon rewrite the live table) and the daemon is
// killed and restarted (the new one adopts the table): no connection fails
// either.
func TestSwapResyncAndRestartLoseNoConnection(t *testing.T) {
	oracle, pathDir := findOracle(t)
	tp := harness.NewTopology(t, echoBinary)
	var ips []string
	for i := 1; i <= 3; i++ {
		tp.AddPod(fmt.Sprintf("ep%d", i), harness.PodIP(i), []int{8080}, nil)
		ips = append(ips, harness.PodIP(i))
	}
	client := tp.AddPod("client", harness.PodIP(100), nil, nil)
	objs := []any{testNode()}
	for i := range *swapServices - 1 {
		name := fmt.Sprintf("svc-%d", i)
		objs = append(objs, harness.ClusterIPService("scale", name, fmt.Sprintf("10.97.%d.%d", i/250, i%250+1), httpPort),
			harness.Slice("scale", name, name+"-1", []harness.PortSpec{httpPort}, fmt.Sprintf("10.250.%d.%d", i/250, i%250+1), fmt.Sprintf("10.251.%d.%d", i/250, i%250+1)))
	}
	objs = append(objs, harness.ClusterIPService("demo", "web", "10.96.0.10", httpPort), harness.Slice("demo", "web", "web-1", []harness.PortSpec{httpPort}, ips...))
	dir := t.TempDir()
	objects := writeObjects(t, dir, objs...)

	cmd := tp.Node.Command(oracle, "-objects", objects, "-hostname", harness.LocalNode, "-node-ip", harness.NodeIP, "-cluster-cidr", harness.ClusterCIDR)
	cmd.Env = append(os.Environ(), "PATH="+pathDir+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kube-proxy oracle: %v\n%s", err, out)
	}
	if _, err := harness.TCPRequest(client.NS, "10.96.0.10:80", timeout); err != nil {
		t.Fatalf("kube-proxy's rules do not carry the Service: %v", err)
	}

	var sent, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		// A new connection every 5 ms, each on its own, so that a gap in
		// the rules fails every connection that falls into it.
		var wg sync.WaitGroup
		defer func() { wg.Wait(); close(done) }()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			sent.Add(1)
			wg.Go(func() {
				if _, err := harness.TCPRequest(client.NS, "10.96.0.10:80", 2*time.Second); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			})
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()
	time.Sleep(200 * time.Millisecond)

	start := time.Now()
	daemon := startNftproxy(t, filepath.Join(dir, "nftproxy.log"), "--objects", objects, "--netns", tp.Node.Path(), "--cluster-cidr", harness.ClusterCIDR,
		"--hostname-override", harness.LocalNode, "--metrics-bind-address", "0", "--healthz-bind-address", "0")
	var programmed, removed time.Duration
	deadline := time.Now().Add(90 * time.Second)
	for removed == 0 {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "nftproxy.log"))
			t.Fatalf("swap not done after 90 s (programmed after %v):\n%s", programmed, log)
		}
		time.Sleep(50 * time.Millisecond)
		if programmed == 0 {
			if out, _ := tp.Node.Run("nft", "list", "chain", "ip", "kube-proxy", "nat-prerouting"); strings.Contains(out, "KUBE-SERVICES") {
				programmed = time.Since(start)
			}
			continue
		}
		if out, err := tp.Node.Run("iptables-legacy-save", "-t", "nat"); err == nil && !strings.Contains(out, "KUBE-SVC-") {
			removed = time.Since(start)
		}
	}
	time.Sleep(time.Second)
	t.Logf("nftproxy hooked in after %v, kube-proxy's rules gone after %v", programmed, removed)

	// A forced full resync of the live table: another process flushes an
	// unrelated Service's chain, the drift monitor sees it and the whole
	// table is rewritten in one transaction.
	flushed := "KUBE-SVC-" // of scale/svc-0, found in the table
	table := tp.Node.MustRun(t, "nft", "list", "table", "ip", "kube-proxy")
	for _, line := range strings.Split(table, "\n") {
		if strings.Contains(line, "scale/svc-0:http cluster IP") && strings.Contains(line, "goto KUBE-SVC-") {
			flushed = line[strings.Index(line, "KUBE-SVC-"):]
			flushed = strings.Fields(strings.TrimRight(flushed, ","))[0]
		}
	}
	tp.Node.MustRun(t, "nft", "flush", "chain", "ip", "kube-proxy", flushed)
	start = time.Now()
	if _, err := poll(10*time.Second, func() error {
		if out, _ := tp.Node.Run("nft", "list", "chain", "ip", "kube-proxy", flushed); !strings.Contains(out, "goto KUBE-SEP-") {
			return fmt.Errorf("chain %s still empty", flushed)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("flushed chain %s repaired by a full resync after %v", flushed, time.Since(start))
	time.Sleep(time.Second)

	// Restart adoption: a new process takes over the live table.
	daemon.Process.Kill()
	daemon.Wait()
	startNftproxy(t, filepath.Join(dir, "nftproxy-2.log"), "--objects", objects, "--netns", tp.Node.Path(), "--cluster-cidr", harness.ClusterCIDR,
		"--hostname-override", harness.LocalNode, "--metrics-bind-address", "0", "--healthz-bind-address", "127.0.0.1:10299")
	start = time.Now()
	if _, err := poll(30*time.Second, func() error {
		if code, body, err := httpGetStatus(tp.Node, "http://127.0.0.1:10299/healthz"); err != nil || code != 200 {
			return fmt.Errorf("healthz: %d %s %v", code, body, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted nftproxy healthy after %v", time.Since(start))
	time.Sleep(time.Second)
	close(stop)
	<-done
	t.Logf("%d connections, %d failed", sent.Load(), failed.Load())
	if failed.Load() > 0 {
		t.Errorf("%d of %d connections failed during the swap, the resync or the restart; first: %v", failed.Load(), sent.Load(), firstErr.Load())
	}
	if sent.Load() < 500 {
		t.Errorf("only %d connections were tried", sent.Load())
	}
}
