//go:build linux

package e2e

import (
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestRestartsDoNotDisruptTraffic runs long-lived TCP connections and new
// connections at a steady rate through ClusterIPs while nftproxy is killed
// with SIGKILL in the middle of a stream of syncs, restarted, stopped with
// SIGTERM and replaced by another binary. No established connection may
// break and no new connection may fail.
func TestRestartsDoNotDisruptTraffic(t *testing.T) {
	tp := harness.NewTopology(t, echoBinary)
	for i := 1; i <= 3; i++ {
		tp.AddPod(fmt.Sprintf("ep%d", i), harness.PodIP(i), []int{8080}, nil)
	}
	client := tp.AddPod("client", harness.PodIP(100), nil, nil)
	dir := t.TempDir()
	eps := []string{harness.PodIP(1), harness.PodIP(2), harness.PodIP(3)}
	write := func(flip int) string {
		objs := []any{harness.ClusterIPService("demo", "web", "10.96.0.70", httpPort), harness.Slice("demo", "web", "web-1", []harness.PortSpec{httpPort}, eps...)}
		// A second Service that keeps changing, so that syncs run all the time.
		objs = append(objs, harness.ClusterIPService("demo", "churn", fmt.Sprintf("10.96.1.%d", 1+flip%200), httpPort))
		return writeObjects(t, dir, objs...)
	}
	objects := write(0)
	start := func(bin string) *exec.Cmd {
		cmd := exec.Command(bin, "--objects", objects, "--netns", tp.Node.Path(), "--cluster-cidr", harness.ClusterCIDR,
			"--iptables-min-sync-period", "10ms", "--metrics-bind-address", "0", "--healthz-bind-address", "0")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	cmd := start(nftproxyBinary)
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	eventually(t, "service programmed", 10*time.Second, func() error {
		_, err := harness.TCPRequest(client.NS, "10.96.0.70:80", 300*time.Millisecond)
		return err
	})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var newOK, newFailed, heldOK, heldBroken atomic.Int64
	var firstErr atomic.Value
	fail := func(counter *atomic.Int64, err error) {
		counter.Add(1)
		firstErr.CompareAndSwap(nil, err.Error())
	}
	// Five long-lived connections exchange a line every 50 ms.
	for i := 0; i < 5; i++ {
		c, err := harness.DialTCP(client.NS, "10.96.0.70:80", timeout)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(c net.Conn) {
			defer wg.Done()
			defer c.Close()
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				if _, err := harness.Exchange(c, "held", 2*time.Second); err != nil {
					fail(&heldBroken, err)
					return
				}
				heldOK.Add(1)
			}
		}(c)
	}
	// New connections at a steady rate (every 10 ms).
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if _, err := harness.TCPRequest(client.NS, "10.96.0.70:80", 2*time.Second); err != nil {
				fail(&newFailed, err)
			} else {
				newOK.Add(1)
			}
		}
	}()
	// Churn the objects file so that syncs keep running.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(15 * time.Millisecond):
			}
			write(i)
		}
	}()

	for i := 0; i < 3; i++ { // SIGKILL in the middle of syncs, restart at once
		time.Sleep(700 * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		cmd = start(nftproxyBinary)
	}
	// Upgrade: SIGTERM (rules stay), then a different binary takes over.
	time.Sleep(700 * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	data, _ := os.ReadFile(nftproxyBinary)
	upgraded := filepath.Join(dir, "nftproxy-v2")
	os.WriteFile(upgraded, data, 0o755)
	time.Sleep(300 * time.Millisecond) // no nftproxy running at all
	cmd = start(upgraded)
	time.Sleep(1 * time.Second)
	close(stop)
	wg.Wait()

	t.Logf("new connections: %d ok, %d failed; held exchanges: %d ok, %d connections broken", newOK.Load(), newFailed.Load(), heldOK.Load(), heldBroken.Load())
	if newFailed.Load() > 0 || heldBroken.Load() > 0 {
		t.Errorf("traffic was disrupted: %d new connections failed, %d held connections broke; first error: %v", newFailed.Load(), heldBroken.Load(), firstErr.Load())
	}
	if newOK.Load() < 100 || heldOK.Load() < 100 {
		t.Errorf("too little traffic to judge: %d new, %d held exchanges", newOK.Load(), heldOK.Load())
	}
}
