//go:build linux

package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/e2e/harness"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
	"github.com/nftproxy/nftproxy/nftgen/svcmodel"
)

// shardTables lists the shard tables of the node's IPv4 family.
func shardTables(t *testing.T, tp *harness.Topology) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(tp.Node.MustRun(t, "nft", "list", "tables", "ip"), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "table ip "); ok && nftgen.IsShardTable(name) {
			out = append(out, name)
		}
	}
	return out
}

// webExternalIP is an external IP of the sharded test's Service: its
// connections are bound by the shards' unguarded stage, not the cluster IP
// guard.
const webExternalIP = "198.51.100.70"

// TestShardedLayoutMovesUnderTraffic runs new connections every 10 ms to a
// ClusterIP from a pod and to a NodePort from outside, and five held
// connections, while nftproxy programs the single table, is replaced by one
// that spreads the Services over eight shard tables (an upgrade in place),
// is restarted on its shards, and is replaced by one with the single table
// again (a downgrade), with a Service changing all the while. No connection
// may fail or break; on the shards the compat view must be render's, and a
// stop must leave no shard table behind; explain, the drift repair and
// --cleanup must see every shard.
func TestShardedLayoutMovesUnderTraffic(t *testing.T) {
	tp := harness.NewTopology(t, echoBinary)
	var eps []string
	for i := 1; i <= 3; i++ {
		tp.AddPod(fmt.Sprintf("ep%d", i), harness.PodIP(i), []int{8080}, nil)
		eps = append(eps, harness.PodIP(i))
	}
	client := tp.AddPod("client", harness.PodIP(100), nil, nil)
	dir := t.TempDir()
	write := func(flip int) string {
		objs := []any{
			harness.With(harness.ClusterIPService("demo", "web", "10.96.0.70", httpPort), harness.NodePorts(30080), harness.ExternalIPs(webExternalIP)),
			harness.Slice("demo", "web", "web-1", []harness.PortSpec{httpPort}, eps...),
		}
		// Enough Services that every shard holds some, one of them
		// changing its endpoints all the time.
		for i := range 24 {
			name := fmt.Sprintf("s%d", i)
			objs = append(objs, harness.ClusterIPService("demo", name, fmt.Sprintf("10.96.2.%d", i+1), httpPort),
				harness.Slice("demo", name, name+"-1", []harness.PortSpec{httpPort}, eps[:1+(flip+i)%3]...))
		}
		return writeObjects(t, dir, objs...)
	}
	objects := write(0)
	start := func(shards int) *exec.Cmd {
		cmd := exec.Command(nftproxyBinary, "--objects", objects, "--netns", tp.Node.Path(), "--cluster-cidr", harness.ClusterCIDR,
			"--table-shards", fmt.Sprint(shards), "--iptables-min-sync-period", "10ms", "--metrics-bind-address", "0", "--healthz-bind-address", "0")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	stopDaemon := func(cmd *exec.Cmd) {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	// waitShards waits until the node has n shard tables.
	waitShards := func(what string, n int) {
		t.Helper()
		eventually(t, what, 10*time.Second, func() error {
			if got := shardTables(t, tp); len(got) != n {
				return fmt.Errorf("shard tables %v", got)
			}
			return nil
		})
	}
	cmd := start(1)
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	served := func(what string) {
		eventually(t, what, 10*time.Second, func() error {
			_, err := harness.TCPRequest(client.NS, "10.96.0.70:80", 300*time.Millisecond)
			return err
		})
	}
	served("the single table serves")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var newOK, newFailed, heldOK, heldBroken atomic.Int64
	var firstErr atomic.Value
	fail := func(counter *atomic.Int64, err error) {
		counter.Add(1)
		firstErr.CompareAndSwap(nil, err.Error())
	}
	every := func(d time.Duration, fn func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(d):
				}
				fn()
			}
		}()
	}
	for range 5 {
		c, err := harness.DialTCP(client.NS, "10.96.0.70:80", timeout)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		every(50*time.Millisecond, func() {
			if heldBroken.Load() > 0 {
				return
			}
			if _, err := harness.Exchange(c, "held", 2*time.Second); err != nil {
				fail(&heldBroken, err)
				return
			}
			heldOK.Add(1)
		})
	}
	for _, dst := range []struct {
		ns   *harness.Pod
		addr string
	}{{client, "10.96.0.70:80"}, {nil, harness.NodeIP + ":30080"}, {nil, webExternalIP + ":80"}} {
		every(10*time.Millisecond, func() {
			ns := tp.External
			if dst.ns != nil {
				ns = dst.ns.NS
			}
			if _, err := harness.TCPRequest(ns, dst.addr, 2*time.Second); err != nil {
				fail(&newFailed, fmt.Errorf("%s: %w", dst.addr, err))
			} else {
				newOK.Add(1)
			}
		})
	}
	var flips atomic.Int64
	every(40*time.Millisecond, func() { write(int(flips.Add(1))) })

	time.Sleep(700 * time.Millisecond)
	stopDaemon(cmd) // upgrade in place: the single table stays, then shards
	cmd = start(8)
	waitShards("eight shard tables", 8)
	time.Sleep(time.Second)
	stopDaemon(cmd) // a sharded stop: handover, no table left
	if got := shardTables(t, tp); len(got) != 0 {
		t.Errorf("a sharded stop left %v", got)
	}
	if !strings.Contains(tp.Node.MustRun(t, "nft", "list", "tables"), nftgen.HandoverTableName) {
		t.Errorf("a sharded stop left no handover table")
	}
	cmd = start(8) // a restart on shards
	waitShards("eight shard tables again", 8)
	time.Sleep(time.Second)
	stopDaemon(cmd) // downgrade to the single table
	cmd = start(1)
	waitShards("no shard table", 0)
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	t.Logf("new connections: %d ok, %d failed; held exchanges: %d ok, %d connections broken", newOK.Load(), newFailed.Load(), heldOK.Load(), heldBroken.Load())
	if newFailed.Load() > 0 || heldBroken.Load() > 0 {
		t.Errorf("traffic was disrupted: %d new connections failed, %d held connections broke; first error: %v", newFailed.Load(), heldBroken.Load(), firstErr.Load())
	}
	if newOK.Load() < 200 || heldOK.Load() < 100 {
		t.Errorf("too little traffic to judge: %d new, %d held exchanges", newOK.Load(), heldOK.Load())
	}

	// On the shards, with the objects at rest: the compat view read from
	// the kernel is render's.
	stopDaemon(cmd)
	objects = write(0)
	cmd = start(8)
	served("the shards serve")
	renderedIsSaved := func() error {
		want, err := exec.Command(nftproxyBinary, "render", "--format", "iptables-save", "--table-shards", "8", "--objects", objects, "--cluster-cidr", harness.ClusterCIDR).Output()
		if err != nil {
			return err
		}
		got, err := exec.Command(nftproxyBinary, "save", "--netns", tp.Node.Path()).Output()
		if err != nil {
			return err
		}
		// save says where it read from; render prints no such header.
		if got := withoutComments(got); got != string(want) {
			return fmt.Errorf("save and render differ:\n%s", nftgentest.LineDiff(string(want), got))
		}
		return nil
	}
	eventually(t, "the compat view of the shards is render's", 10*time.Second, renderedIsSaved)

	// explain walks the shards as one table.
	if got := runExplain(t, "--netns", tp.Node.Path(), "--from", "external", "--src", harness.ExternalIP, "10.96.0.70:80").Endpoints(); len(got) != len(eps) {
		t.Errorf("explain on the shards: endpoints %v, want %d", got, len(eps))
	}
	// A Service chain flushed in its shard is repaired by the daemon.
	web := svcmodel.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "demo", Name: "web"}, Port: "http", Protocol: v1.ProtocolTCP}
	// web has a node port and an external IP, so it is placed by name
	// among the shards that look those up: find it.
	shard := ""
	for _, table := range shardTables(t, tp) {
		if _, err := tp.Node.Run("nft", "list", "chain", "ip", table, nftgen.ServiceChainName(web)); err == nil {
			shard = table
		}
	}
	if shard == "" {
		t.Fatalf("no shard table holds %s", nftgen.ServiceChainName(web))
	}
	tp.Node.MustRun(t, "nft", "flush", "chain", "ip", shard, nftgen.ServiceChainName(web))
	eventually(t, "the flushed shard chain repaired", 10*time.Second, renderedIsSaved)
	served("the repaired shard serves")

	// --cleanup removes every table.
	stopDaemon(cmd)
	if out, err := exec.Command(nftproxyBinary, "--cleanup", "--netns", tp.Node.Path()).CombinedOutput(); err != nil {
		t.Fatalf("--cleanup: %v\n%s", err, out)
	}
	if tables := tp.Node.MustRun(t, "nft", "list", "tables"); strings.Contains(tables, nftgen.TableName) {
		t.Errorf("--cleanup left:\n%s", tables)
	}
}
