//go:build linux

package e2e

import (
	"github.com/nftproxy/nftproxy/e2e/harness"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// writeObjects writes objects as multi-document YAML and returns the path.
func writeObjects(t *testing.T, dir string, objs ...any) string {
	t.Helper()
	var docs []string
	for _, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	path := filepath.Join(dir, "objects.yaml")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCLISyncAndCleanupLeaveOtherTablesAlone(t *testing.T) {
	tp := harness.NewTopology(t, echoBinary)
	tp.AddPod("ep1", harness.PodIP(1), []int{8080}, nil)
	tp.AddPod("ep2", harness.PodIP(2), []int{8080}, nil)
	foreignBefore := loadForeignTable(t, tp.Node, "inet", "cni-plugin",
		"table inet cni-plugin {\n\tchain forward {\n\t\ttype filter hook forward priority 0; policy accept;\n\t\tct state established accept\n\t}\n}\n")

	objects := writeObjects(t, t.TempDir(),
		harness.ClusterIPService("demo", "web", "10.96.0.30", httpPort),
		harness.Slice("demo", "web", "web-1", []harness.PortSpec{httpPort}, harness.PodIP(1), harness.PodIP(2)))
	out, err := exec.Command(nftproxyBinary, "sync", "--objects", objects, "--netns", tp.Node.Path(), "--cluster-cidr", harness.ClusterCIDR).CombinedOutput()
	if err != nil {
		t.Fatalf("nftproxy sync: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	for i := 0; i < 40; i++ {
		r, err := harness.TCPRequest(tp.External, "10.96.0.30:80", timeout)
		if err != nil {
			t.Fatal(err)
		}
		seen[r.Server] = true
	}
	if !seen["ep1"] || !seen["ep2"] {
		t.Errorf("after nftproxy sync, answered by %v, want ep1 and ep2", seen)
	}
	if got := tp.Node.MustRun(t, "nft", "list", "table", "inet", "cni-plugin"); got != foreignBefore {
		t.Errorf("sync changed another table:\n%s", got)
	}

	// Cleanup from inside the namespace, as on a node.
	out, err = tp.Node.Command(nftproxyBinary, "--cleanup").CombinedOutput()
	if err != nil {
		t.Fatalf("nftproxy --cleanup: %v\n%s", err, out)
	}
	tables := tp.Node.MustRun(t, "nft", "list", "tables")
	if strings.Contains(tables, "kube-proxy") {
		t.Errorf("tables after --cleanup: %s", tables)
	}
	if got := tp.Node.MustRun(t, "nft", "list", "table", "inet", "cni-plugin"); got != foreignBefore {
		t.Errorf("--cleanup changed another table:\n%s", got)
	}
}

func TestRenderNeedsNoRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to switch to an unprivileged user (CI runs it as root)")
	}
	// t.TempDir's parent is private to root; use a directory of our own
	// that the unprivileged user can traverse.
	dir, err := os.MkdirTemp("", "nftproxy-render-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "nftproxy")
	data, _ := os.ReadFile(nftproxyBinary)
	os.WriteFile(bin, data, 0o755)
	example, _ := os.ReadFile("../deploy/examples/services.yaml")
	objects := filepath.Join(dir, "services.yaml")
	os.WriteFile(objects, example, 0o644)
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin, "render", "--objects", objects)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("render as nobody: %v: %s", err, stderr)
	}
	if !strings.Contains(string(out), "table ip kube-proxy {") || !strings.Contains(string(out), "numgen random mod 3") {
		t.Errorf("render as nobody printed:\n%s", out)
	}
}

// TestRunLoopFollowsFileAndRepairsDrift runs nftproxy as a long-lived
// process: it picks up changes to the objects file, a full resync repairs a
// map element deleted by hand, and SIGTERM leaves the rules in place.
func TestRunLoopFollowsFileAndRepairsDrift(t *testing.T) {
	tp := harness.NewTopology(t, echoBinary)
	tp.AddPod("ep1", harness.PodIP(1), []int{8080}, nil)
	tp.AddPod("ep2", harness.PodIP(2), []int{8080}, nil)
	dir := t.TempDir()
	svc := harness.ClusterIPService("demo", "web", "10.96.0.31", httpPort)
	objects := writeObjects(t, dir, svc, harness.Slice("demo", "web", "web-1", []harness.PortSpec{httpPort}, harness.PodIP(1)))
	logPath := filepath.Join(dir, "nftproxy.log")
	cmd := startNftproxy(t, logPath, "--objects", objects, "--netns", tp.Node.Path(), "--cluster-cidr", harness.ClusterCIDR,
		"--iptables-sync-period", "1s", "--iptables-min-sync-period", "100ms")
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("nftproxy log:\n%s", b)
		}
	})

	answeredBy := func(names ...string) func() error {
		return func() error {
			seen := map[string]bool{}
			for i := 0; i < 10*len(names); i++ {
				r, err := harness.TCPRequest(tp.External, "10.96.0.31:80", 500*time.Millisecond)
				if err != nil {
					return err
				}
				seen[r.Server] = true
			}
			if got := slices.Sorted(maps.Keys(seen)); !slices.Equal(got, names) {
				return errorf("answered by %v, want %v", got, names)
			}
			return nil
		}
	}
	eventually(t, "initial sync", 5*time.Second, answeredBy("ep1"))

	writeObjects(t, dir, svc, harness.Slice("demo", "web", "web-1", []harness.PortSpec{httpPort}, harness.PodIP(1), harness.PodIP(2)))
	d := eventually(t, "file change applied", 5*time.Second, answeredBy("ep1", "ep2"))
	t.Logf("file change applied after %v", d)

	tp.Node.MustRun(t, "nft", "delete", "element", "ip", "kube-proxy", "service-ips", "{ 10.96.0.31 . tcp . 80 }")
	if _, err := harness.TCPRequest(tp.External, "10.96.0.31:80", 300*time.Millisecond); err == nil {
		// The resync may already have run; that is fine, but say so.
		t.Log("service answered right after tampering (resync was quicker)")
	}
	d = eventually(t, "drift repaired", 5*time.Second, answeredBy("ep1", "ep2"))
	t.Logf("deleted map element repaired after %v", d)

	// Periodic syncs (every second here) only rewrite the table once it is
	// an hour old or found drifted, as kube-proxy's iptables mode does.
	syncCounts := func() (full, partial int) {
		_, body, err := httpGetStatus(tp.Node, "http://127.0.0.1:10249/metrics")
		if err != nil {
			t.Fatalf("metrics: %v", err)
		}
		return metricSum(body, "kubeproxy_sync_full_proxy_rules_duration_seconds_count"),
			metricSum(body, "kubeproxy_sync_partial_proxy_rules_duration_seconds_count")
	}
	// The repair's own full sync may be counted a moment after traffic
	// already shows it; start the window once the count holds still.
	full0, partial0 := syncCounts()
	for range 10 {
		time.Sleep(200 * time.Millisecond)
		f, p := syncCounts()
		if f == full0 {
			break
		}
		full0, partial0 = f, p
	}
	time.Sleep(3500 * time.Millisecond)
	full1, partial1 := syncCounts()
	t.Logf("over 3.5 s of 1 s sync periods: %d full and %d partial syncs (counted per IP family)", full1-full0, partial1-partial0)
	if full1 != full0 || partial1-partial0 < 2 {
		t.Errorf("idle periodic syncs: full %d -> %d, partial %d -> %d; want no full sync and at least 2 partial", full0, full1, partial0, partial1)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	if err := answeredBy("ep1", "ep2")(); err != nil {
		t.Errorf("rules did not stay in place after SIGTERM: %v", err)
	}
}

// TestCLILocalPolicyHealthCheckAndLocalhostNodePort runs the binary for a
// node named by --hostname-override: it must read its Node object, serve the
// health check node port inside the node namespace, and enable
// route_localnet there so that localhost NodePorts work.
func TestCLILocalPolicyHealthCheckAndLocalhostNodePort(t *testing.T) {
	tp := harness.NewTopology(t, echoBinary)
	a1 := tp.AddPod("a1", harness.PodIP(1), []int{8080}, nil)
	b1 := tp.AddPod("b1", harness.PodIP(2), []int{8080}, nil)
	node := &v1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: harness.LocalNode},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: harness.NodeIP}}}}
	svc := harness.With(harness.ClusterIPService("demo", "web", "10.96.0.90", httpPort), harness.LoadBalancer(""), harness.NodePorts(30090), harness.ExternalLocal(32090))
	slice := harness.SliceOf("demo", "web", "web-1", []harness.PortSpec{httpPort}, harness.EP{IP: a1.IP.String(), Node: harness.LocalNode}, harness.EP{IP: b1.IP.String(), Node: harness.RemoteNode})
	objects := writeObjects(t, t.TempDir(), node, svc, slice)
	startNftproxy(t, "", "--objects", objects, "--netns", tp.Node.Path(), "--cluster-cidr", harness.ClusterCIDR, "--hostname-override", harness.LocalNode)

	eventually(t, "NodePort served", 5*time.Second, func() error {
		_, err := harness.TCPRequest(tp.External, harness.NodeIP+":30090", 300*time.Millisecond)
		return err
	})
	for i := 0; i < 10; i++ {
		r, err := harness.TCPRequest(tp.External, harness.NodeIP+":30090", timeout)
		if err != nil || r.Server != "a1" || r.Source.Addr().String() != harness.ExternalIP {
			t.Fatalf("external to NodePort with Local policy: %+v %v, want a1 seeing %s", r, err, harness.ExternalIP)
		}
	}
	checkHealth(t, vantage{"external host", tp.External, ""}, harness.NodeIP+":32090", 200, 1, "web")
	if got := strings.TrimSpace(tp.Node.MustRun(t, "sysctl", "-n", "net.ipv4.conf.all.route_localnet")); got != "1" {
		t.Errorf("route_localnet in the node namespace = %s, want 1", got)
	}
	if _, err := harness.TCPRequest(tp.Node, "127.0.0.1:30090", timeout); err != nil {
		t.Errorf("localhost NodePort: %v", err)
	}
}
