//go:build linux

package e2e

import (
	"github.com/nftproxy/nftproxy/e2e/harness"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftproxy/nftproxy/proxier"
)

// TestRefusedDestinationsInEveryReader: a newcomer (namespace first by
// name) names an established Service's external IP, and a third Service
// names an address on one of the node's interfaces that the Node object
// does not report. Against the live table: only the holder's rule in the
// compat view, explain walks to the holder's endpoint, traffic reaches the
// holder, the node's address is nobody's, and the daemon's
// nftproxy_refused_destinations counts both, by reason.
func TestRefusedDestinationsInEveryReader(t *testing.T) {
	tp := harness.NewTopology(t, echoBinary)
	tp.AddPod("holder", harness.PodIP(1), []int{8080}, nil)
	tp.AddPod("thief", harness.PodIP(2), []int{8080}, nil)
	tp.Node.MustRun(t, "ip", "addr", "add", "192.0.2.77/32", "dev", "lo")
	created := func(at time.Time) func(*v1.Service) {
		return func(s *v1.Service) { s.CreationTimestamp = metav1.NewTime(at) }
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	objects := writeObjects(t, t.TempDir(),
		harness.With(harness.ClusterIPService("zzz", "holder", "10.96.0.71", httpPort), harness.ExternalIPs("198.51.100.71"), created(base)),
		harness.Slice("zzz", "holder", "holder-1", []harness.PortSpec{httpPort}, harness.PodIP(1)),
		harness.With(harness.ClusterIPService("aaa", "thief", "10.96.0.72", httpPort), harness.ExternalIPs("198.51.100.71"), created(base.Add(time.Hour))),
		harness.Slice("aaa", "thief", "thief-1", []harness.PortSpec{httpPort}, harness.PodIP(2)),
		harness.With(harness.ClusterIPService("aaa", "vip", "10.96.0.73", httpPort), harness.ExternalIPs("192.0.2.77"), created(base)),
		harness.Slice("aaa", "vip", "vip-1", []harness.PortSpec{httpPort}, harness.PodIP(2)))
	logPath := filepath.Join(t.TempDir(), "nftproxy.log")
	startNftproxy(t, logPath, "--objects", objects, "--netns", tp.Node.Path(), "--cluster-cidr", harness.ClusterCIDR,
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "0")
	var save string
	eventually(t, "the daemon programs the three Services", 10*time.Second, func() error {
		out, _ := exec.Command(nftproxyBinary, "save", "--netns", tp.Node.Path()).Output()
		save = string(out)
		if !strings.Contains(save, "10.96.0.73/32") {
			return errorf("not yet")
		}
		return nil
	})
	var extRules []string
	for _, line := range strings.Split(save, "\n") {
		if strings.Contains(line, "198.51.100.71") || strings.Contains(line, "192.0.2.77") {
			extRules = append(extRules, line)
		}
	}
	if len(extRules) != 1 || !strings.Contains(extRules[0], `"zzz/holder:http external IP"`) {
		t.Errorf("compat view: rules for the shared and the node's addresses: %q, want the holder's one rule", extRules)
	}
	e := runExplain(t, "--netns", tp.Node.Path(), "--from", "external", "--src", harness.ExternalIP, "198.51.100.71:80")
	if got := e.Endpoints(); !slices.Equal(got, []string{harness.PodIP(1) + ":8080"}) {
		t.Errorf("explain of the shared external IP: endpoints %v, want the holder's", got)
	}
	e = runExplain(t, "--netns", tp.Node.Path(), "--from", "external", "--src", harness.ExternalIP, "192.0.2.77:80")
	if got := e.Endpoints(); len(got) != 0 {
		t.Errorf("explain of the node's own address: endpoints %v, want none", got)
	}
	metrics := httpGet(t, tp.Node, "http://127.0.0.1:10249/metrics")
	for _, want := range []string{`nftproxy_refused_destinations{reason="conflict"} 1`, `nftproxy_refused_destinations{reason="node_address"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(metrics, "refused"))
		}
	}
	var ipv4 []string
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "kubeproxy_sync_proxy_rules_iptables_total{") && strings.Contains(line, `ip_family="IPv4"`) {
			ipv4 = append(ipv4, line)
		}
	}
	if got := metricSum(strings.Join(ipv4, "\n"), "kubeproxy_sync_proxy_rules_iptables_total"); got != strings.Count(save, "\n-A ") {
		t.Errorf("rules-count metric %d, compat view %d rules", got, strings.Count(save, "\n-A "))
	}
}

// TestIPVSDummyAddressesAreNotTheNodes: kube-proxy's IPVS mode leaves
// every cluster IP on its kube-ipvs0 dummy interface until its rules are
// cleaned up; those are not the node's addresses, or no cluster IP would
// be programmed after a swap from IPVS mode.
func TestIPVSDummyAddressesAreNotTheNodes(t *testing.T) {
	tp := harness.NewTopology(t, echoBinary)
	tp.Node.MustRun(t, "ip", "link", "add", "kube-ipvs0", "type", "veth", "peer", "name", "ipvs-peer") // no dummy module here; the name is what counts
	tp.Node.MustRun(t, "ip", "addr", "add", "10.96.0.99/32", "dev", "kube-ipvs0")
	tp.Node.MustRun(t, "ip", "addr", "add", "192.0.2.78/32", "dev", "lo")
	var local []netip.Addr
	if err := tp.Node.Do(func() (err error) { local, err = proxier.LocalAddresses(); return err }); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(local, netip.MustParseAddr("10.96.0.99")) || !slices.Contains(local, netip.MustParseAddr("192.0.2.78")) {
		t.Errorf("local addresses %v: want 192.0.2.78 and not kube-ipvs0's 10.96.0.99", local)
	}
}
