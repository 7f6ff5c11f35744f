//go:build linux

package e2e

import (
	"context"
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nftproxy/nftproxy/e2e/testns"
)

// daemonCluster is a topology whose node runs etcd, kube-apiserver and the
// nftproxy daemon, which talks to the API server with the ServiceAccount
// token of deploy/base's least-privilege ClusterRole.
type daemonCluster struct {
	*harness.Topology
	api        *harness.APIServer
	admin      kubernetes.Interface
	daemon     *exec.Cmd
	kubeconfig string
	token      string
	// minSyncPeriod is the daemons' --iptables-min-sync-period in the
	// side-by-side benches ("" for 1s, kube-proxy's default).
	minSyncPeriod string
	// binary is the nftproxy binary startDaemon runs (the one TestMain
	// built when "").
	binary string
}

// benchMinSync is c's minSyncPeriod, 1s unless set.
func (c *daemonCluster) benchMinSync() string {
	if c.minSyncPeriod == "" {
		return "1s"
	}
	return c.minSyncPeriod
}

func newDaemonCluster(t *testing.T) *daemonCluster {
	bins, err := harness.FindClusterBinaries(".")
	if err != nil {
		t.Fatal(err)
	}
	tp := harness.NewTopology(t, echoBinary)
	c := &daemonCluster{Topology: tp}
	c.api = harness.StartAPIServer(t, tp.Node, bins)
	c.admin = c.api.Admin(t)
	ctx := context.Background()
	if out, err := c.api.Kubectl("apply", "-f", "../deploy/base/serviceaccount.yaml", "-f", "../deploy/base/rbac.yaml"); err != nil {
		t.Fatalf("apply RBAC: %v\n%s", err, out)
	}
	tok, err := c.admin.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "nftproxy",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for the nftproxy ServiceAccount: %v", err)
	}
	c.token = tok.Status.Token
	c.kubeconfig = c.api.Kubeconfig("nftproxy", c.token)
	node := testNode()
	node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: harness.NodeIP}}
	if _, err := c.admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c
}

func ptrTo[T any](v T) *T { return &v }

// startDaemon runs nftproxy in the node namespace against the API server.
func (c *daemonCluster) startDaemon(t *testing.T, extra ...string) {
	args := append([]string{"--kubeconfig", c.kubeconfig, "--hostname-override", harness.LocalNode, "--cluster-cidr", harness.ClusterCIDR,
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256",
		"--iptables-min-sync-period", "100ms", "--iptables-sync-period", "10s"}, extra...)
	bin := nftproxyBinary
	if c.binary != "" {
		bin = c.binary
	}
	c.daemon = c.Node.Command(bin, args...)
	logDir, logName := c.api.Dir, "nftproxy.log"
	if dir := os.Getenv("NFTPROXY_DAEMON_PROFILE"); dir != "" {
		// Profiling: keep each run's log, with the collector's trace.
		c.daemon.Env = append(os.Environ(), "GODEBUG=gctrace=1")
		logDir, logName = dir, fmt.Sprintf("%s-%d.log", filepath.Base(bin), time.Now().UnixNano())
	}
	c.daemon.Stdout, c.daemon.Stderr = harness.LogFile(logDir, logName), harness.LogFile(logDir, logName)
	if err := c.daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.daemon.Process.Kill(); _ = c.daemon.Wait() })
}

func servedBy(ns func() (harness.Reply, error), want ...string) func() error {
	return func() error {
		seen := map[string]bool{}
		for i := 0; i < 10*len(want); i++ {
			r, err := ns()
			if err != nil {
				return err
			}
			seen[r.Server] = true
		}
		for _, w := range want {
			if !seen[w] {
				return errorf("answered by %v, want %v", seen, want)
			}
		}
		if len(seen) != len(want) {
			return errorf("answered by %v, want only %v", seen, want)
		}
		return nil
	}
}

type testError string

func (e testError) Error() string { return string(e) }

func errorf(format string, args ...any) error { return testError(fmt.Sprintf(format, args...)) }

func TestDaemonAgainstRealAPIServer(t *testing.T) {
	testns.RequireRoot(t)
	c := newDaemonCluster(t)
	ctx := context.Background()

	t.Run("deploy manifests pass server-side dry-run", func(t *testing.T) {
		if out, err := c.api.Kubectl("apply", "-k", "../deploy/base", "--dry-run=server"); err != nil {
			t.Errorf("kubectl apply -k deploy/base --dry-run=server: %v\n%s", err, out)
		}
	})
	t.Run("the ServiceAccount has exactly the ClusterRole's permissions", func(t *testing.T) {
		sa := "system:serviceaccount:kube-system:nftproxy"
		for _, check := range []struct {
			verb, resource string
			want           string
		}{
			{"list", "services", "yes"}, {"watch", "services", "yes"},
			{"list", "endpointslices.discovery.k8s.io", "yes"}, {"watch", "endpointslices.discovery.k8s.io", "yes"},
			{"list", "nodes", "yes"}, {"watch", "nodes", "yes"},
			{"create", "events", "yes"}, {"create", "events.events.k8s.io", "yes"},
			{"get", "nodes", "no"}, {"get", "secrets", "no"}, {"list", "pods", "no"}, {"create", "services", "no"},
			{"update", "endpointslices.discovery.k8s.io", "no"}, {"delete", "events", "no"}, {"list", "configmaps", "no"},
		} {
			out, _ := c.api.Kubectl("auth", "can-i", check.verb, check.resource, "--as", sa, "-A")
			if got := strings.TrimSpace(out); got != check.want {
				t.Errorf("can-i %s %s = %q, want %q", check.verb, check.resource, got, check.want)
			}
		}
	})

	c.AddPod("ep1", harness.PodIP(1), []int{8080}, nil)
	c.AddPod("ep2", harness.PodIP(2), []int{8080}, nil)
	client := c.AddPod("client", harness.PodIP(100), nil, nil)
	c.startDaemon(t)

	svc := harness.ClusterIPService("web", "api", "10.96.0.77", httpPort)
	if _, err := c.admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.CoreV1().Services("web").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setSlice := func(ips ...string) {
		t.Helper()
		sl := harness.Slice("web", "api", "api-1", []harness.PortSpec{httpPort}, ips...)
		sl.Annotations = map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": time.Now().UTC().Format(time.RFC3339Nano)}
		if _, err := c.admin.DiscoveryV1().EndpointSlices("web").Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
			if _, err := c.admin.DiscoveryV1().EndpointSlices("web").Create(ctx, sl, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	request := func() (harness.Reply, error) { return harness.TCPRequest(client.NS, "10.96.0.77:80", time.Second) }

	setSlice(harness.PodIP(1))
	d := eventually(t, "first endpoint programmed", 30*time.Second, servedBy(request, "ep1"))
	t.Logf("Service and EndpointSlice created with client-go: traffic after %v", d)
	setSlice(harness.PodIP(1), harness.PodIP(2))
	d = eventually(t, "scale up", 10*time.Second, servedBy(request, "ep1", "ep2"))
	t.Logf("scale up followed after %v", d)
	setSlice(harness.PodIP(2))
	d = eventually(t, "scale down", 10*time.Second, servedBy(request, "ep2"))
	t.Logf("scale down followed after %v", d)

	// The histogram is observed just after the commit that traffic already
	// shows, so it may lag a scrape by a moment.
	programmed := regexp.MustCompile(`kubeproxy_network_programming_duration_seconds_count\{ip_family="IPv4"\} (\d+)`)
	var metrics string
	eventually(t, "network_programming_duration_seconds populated", 5*time.Second, func() error {
		metrics = httpGet(t, c.Node, "http://127.0.0.1:10249/metrics")
		if m := programmed.FindStringSubmatch(metrics); m == nil || m[1] == "0" {
			return errorf("not populated:\n%s", grepLines(metrics, "network_programming"))
		}
		return nil
	})
	if hz := httpGet(t, c.Node, "http://127.0.0.1:10256/healthz"); !strings.Contains(hz, `"healthy":true`) || !strings.Contains(hz, `"nodeEligible":true`) {
		t.Errorf("/healthz: %s", hz)
	}

	// An EndpointSlice without a service label cannot be programmed: an
	// Event says so.
	orphan := harness.Slice("web", "api", "orphan", []harness.PortSpec{httpPort}, harness.PodIP(1))
	orphan.Labels = map[string]string{"app": "x"}
	if _, err := c.admin.DiscoveryV1().EndpointSlices("web").Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "event for the orphan slice", 10*time.Second, func() error {
		evs, err := c.admin.EventsV1().Events("web").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "orphan" && e.Reason == "FailedToProgram" {
				return nil
			}
		}
		return errorf("no FailedToProgram event among %d", len(evs.Items))
	})

	// A health check node port that is taken: kube-proxy's
	// FailedToStartServiceHealthcheck Event on the Service.
	var taken net.Listener
	if err := c.Node.Do(func() (err error) { taken, err = net.Listen("tcp", ":32077"); return err }); err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	hc := harness.With(harness.ClusterIPService("web", "hc", "10.96.0.78", httpPort), harness.LoadBalancer(""), harness.ExternalLocal(32077))
	if _, err := c.admin.CoreV1().Services("web").Create(ctx, hc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "event for the taken health check node port", 15*time.Second, func() error {
		evs, err := c.admin.EventsV1().Events("web").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "hc" && e.Reason == "FailedToStartServiceHealthcheck" && strings.Contains(e.Note, "32077") {
				return nil
			}
		}
		return errorf("no FailedToStartServiceHealthcheck event among %d", len(evs.Items))
	})

	// kube-proxy's start-up Event on the Node.
	eventually(t, "Starting event on the Node", 15*time.Second, func() error {
		evs, err := c.admin.EventsV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Node" && e.Reason == "Starting" && e.ReportingController == "kube-proxy" {
				return nil
			}
		}
		return errorf("no Starting event on the Node among %d", len(evs.Items))
	})

	if cz := httpGet(t, c.Node, "http://127.0.0.1:10249/configz"); !strings.Contains(cz, `"kubeproxy.config.k8s.io"`) || !strings.Contains(cz, `"clusterCIDR":"`+harness.ClusterCIDR+`"`) {
		t.Errorf("/configz: %s", cz)
	}
	if m := regexp.MustCompile(`nftproxy_table_objects\{ip_family="IPv4",kind="chains"\} (\d+)`).FindStringSubmatch(metrics); m == nil || m[1] == "0" {
		t.Errorf("nftproxy_table_objects not set:\n%s", grepLines(metrics, "table_objects"))
	}

	// The API server goes away for 60 s, longer than the health timeout
	// (twice the 10 s sync period): the rules stay, traffic flows, and, as
	// with kube-proxy, /healthz stays healthy because no update is waiting.
	c.api.Stop()
	stopped := time.Now()
	for time.Since(stopped) < 60*time.Second {
		if _, err := request(); err != nil {
			t.Fatalf("%v after the API server stopped: %v", time.Since(stopped).Round(time.Second), err)
		}
		time.Sleep(2 * time.Second)
	}
	if hz := httpGet(t, c.Node, "http://127.0.0.1:10256/healthz"); !strings.Contains(hz, `"healthy":true`) {
		t.Errorf("/healthz with the API server gone but rules in sync: %s", hz)
	}
	c.api.Start(t)
	returned := time.Now()
	setSlice(harness.PodIP(1), harness.PodIP(2))
	d = eventually(t, "change after the API server returned", 60*time.Second, servedBy(request, "ep1", "ep2"))
	t.Logf("API server back after %v down; a change made then was applied after %v", returned.Sub(stopped).Round(time.Second), d)
	if d > 2*time.Second {
		log, _ := os.ReadFile(filepath.Join(c.api.Dir, "nftproxy.log"))
		t.Errorf("a change after the API server returned took %v, want at most 2 s; daemon log:\n%s", d, grepLines(string(log), "API server"))
	}

	t.Run("hostile objects through the API server", func(t *testing.T) { hostileThroughAPI(t, c, client.NS) })

	if err := c.admin.CoreV1().Services("web").Delete(ctx, "api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = c.admin.DiscoveryV1().EndpointSlices("web").Delete(ctx, "api-1", metav1.DeleteOptions{})
	eventually(t, "deletion", 10*time.Second, func() error {
		table := c.Node.MustRun(t, "nft", "list", "table", "ip", "kube-proxy")
		if strings.Contains(table, "10.96.0.77") || strings.Contains(table, "web/api:http") {
			return errorf("service still programmed")
		}
		return nil
	})
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// hostileThroughAPI sends the hostile corpus through the API server. What
// validation rejects never reaches nftproxy; what it admits is skipped by
// nftproxy with an Event, while 999 good Services carry traffic.
func hostileThroughAPI(t *testing.T, c *daemonCluster, from *testns.NS) {
	ctx := context.Background()
	bad, _ := hostileObjects(harness.PodIP(1))
	rejected, admitted := 0, 0
	for _, o := range bad {
		var err error
		switch o := o.(type) {
		case *v1.Service:
			ensureNamespace(ctx, c.admin, o.Namespace)
			_, err = c.admin.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *discovery.EndpointSlice:
			ensureNamespace(ctx, c.admin, o.Namespace)
			_, err = c.admin.DiscoveryV1().EndpointSlices(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			rejected++
		} else {
			admitted++
		}
	}
	t.Logf("API validation rejected %d hostile objects and admitted %d", rejected, admitted)
	if rejected == 0 || admitted == 0 {
		t.Errorf("expected both rejected and admitted objects, got %d and %d", rejected, admitted)
	}
	ensureNamespace(ctx, c.admin, "good")
	const good = 999
	vip := func(i int) string { return fmt.Sprintf("10.98.%d.%d", 10+i/250, i%250+1) }
	for i := 0; i < good; i++ {
		name := fmt.Sprintf("good%d", i)
		if _, err := c.admin.CoreV1().Services("good").Create(ctx, harness.ClusterIPService("good", name, vip(i), httpPort), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.admin.DiscoveryV1().EndpointSlices("good").Create(ctx, harness.Slice("good", name, name+"-1", []harness.PortSpec{httpPort}, harness.PodIP(1)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "999 good Services programmed and carrying traffic", 60*time.Second, func() error {
		for i := 0; i < good; i++ {
			if _, err := harness.TCPRequest(from, vip(i)+":80", time.Second); err != nil {
				return errorf("good%d: %v", i, err)
			}
		}
		return nil
	})
	eventually(t, "Events for the admitted hostile objects", 15*time.Second, func() error {
		want := map[string]bool{"no-label": false, "node-ip": false}
		evs, err := c.admin.EventsV1().Events("bad").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if _, ok := want[e.Regarding.Name]; ok && e.Reason == "FailedToProgram" {
				want[e.Regarding.Name] = true
			}
		}
		for name, seen := range want {
			if !seen {
				return errorf("no FailedToProgram event for %s", name)
			}
		}
		return nil
	})
}

func ensureNamespace(ctx context.Context, c kubernetes.Interface, name string) {
	_, _ = c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
}
