//go:build linux

package e2e

import (
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftproxy/nftproxy/e2e/testns"
)

// legacyScenario is one input for the comparison with kube-proxy.
type legacyScenario struct {
	name    string
	objects []any
	// Flags, in kube-proxy's terms.
	clusterCIDR       string
	masqueradeAll     bool
	masqueradeBit     int
	nodePortAddresses string
	noLocalhost       bool
	ipv6              bool
	// explained is a phrase diff must print: a difference nftproxy makes
	// on purpose, explained rather than reported as drift.
	explained string
}

// scenarioFlagNames names a scenario's settings on one command line.
type scenarioFlagNames struct {
	clusterCIDR, masqueradeAll, masqueradeBit, nodePortAddresses, localhostNodePorts string
}

var (
	oracleFlagNames   = scenarioFlagNames{"-cluster-cidr", "-masquerade-all", "-masquerade-bit", "-nodeport-addresses", "-localhost-nodeports"}
	nftproxyFlagNames = scenarioFlagNames{"--cluster-cidr", "--masquerade-all", "--iptables-masquerade-bit", "--nodeport-addresses", "--iptables-localhost-nodeports"}
)

// flags returns the scenario's non-default settings as command-line flags
// with the given names.
func (sc legacyScenario) flags(names scenarioFlagNames) []string {
	var out []string
	if sc.clusterCIDR != "" {
		out = append(out, names.clusterCIDR, sc.clusterCIDR)
	}
	if sc.masqueradeAll {
		out = append(out, names.masqueradeAll)
	}
	if sc.masqueradeBit != 0 {
		out = append(out, names.masqueradeBit, fmt.Sprint(sc.masqueradeBit))
	}
	if sc.nodePortAddresses != "" {
		out = append(out, names.nodePortAddresses, sc.nodePortAddresses)
	}
	if sc.noLocalhost {
		out = append(out, names.localhostNodePorts+"=false")
	}
	return out
}

// findOracle returns kube-proxy's iptables proxier (the e2e/legacy module,
// k8s.io/kubernetes v1.37.2, built by `make e2e-binaries`) and a PATH
// directory in which iptables is iptables-legacy.
func findOracle(t *testing.T) (oracle, pathDir string) {
	t.Helper()
	oracle, err := harness.Tool(".", "kube-proxy-oracle")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pathDir = filepath.Join(dir, "bin")
	os.Mkdir(pathDir, 0o755)
	for _, v := range []string{"", "6"} {
		for _, suffix := range []string{"", "-save", "-restore"} {
			target, err := exec.LookPath("ip" + v + "tables-legacy" + suffix)
			if err != nil {
				t.Fatalf("iptables-legacy is not installed: %v", err)
			}
			if err := os.Symlink(target, filepath.Join(pathDir, "ip"+v+"tables"+suffix)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return oracle, pathDir
}

// nodeNamespace is a namespace with the node's addresses on lo.
func nodeNamespace(t *testing.T, prefix string) *testns.NS {
	ns := testns.New(t, prefix)
	ns.MustRun(t, "ip", "addr", "add", "192.0.2.1/32", "dev", "lo")
	ns.MustRun(t, "ip", "-6", "addr", "add", "2001:db8:9::1/128", "dev", "lo", "nodad")
	return ns
}

func testNode() *v1.Node {
	return &v1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: harness.LocalNode, Labels: map[string]string{v1.LabelTopologyZone: harness.LocalZone}},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: "192.0.2.1"}, {Type: v1.NodeInternalIP, Address: "2001:db8:9::1"}}}}
}

func ep(ip, node string) harness.EP { return harness.EP{IP: ip, Node: node} }

func legacyScenarios() []legacyScenario {
	hp := []harness.PortSpec{httpPort}
	svc := func(name, ip string, mut ...func(*v1.Service)) *v1.Service {
		return harness.With(harness.ClusterIPService("ns", name, ip, hp...), mut...)
	}
	slice := func(name string, eps ...harness.EP) *discovery.EndpointSlice {
		return harness.SliceOf("ns", name, name+"-1", hp, eps...)
	}
	three := []harness.EP{ep("10.244.0.2", harness.LocalNode), ep("10.244.1.3", harness.RemoteNode), ep("10.244.1.10", harness.RemoteNode)}
	cidr := harness.ClusterCIDR
	all := []legacyScenario{
		{name: "clusterip", clusterCIDR: cidr, objects: []any{svc("web", "10.96.0.10"), slice("web", three...)}},
		{name: "no-endpoints", clusterCIDR: cidr, objects: []any{svc("empty", "10.96.0.11", harness.NodePorts(30011), harness.ExternalIPs("198.51.100.11"))}},
		{name: "nodeport", clusterCIDR: cidr, objects: []any{svc("np", "10.96.0.12", harness.NodePorts(30012)), slice("np", three...)}},
		{name: "nodeport-local", clusterCIDR: cidr, objects: []any{svc("npl", "10.96.0.13", harness.LoadBalancer(""), harness.NodePorts(30013), harness.ExternalLocal(32013)), slice("npl", three...)}},
		{name: "nodeport-local-none", clusterCIDR: cidr, objects: []any{svc("npn", "10.96.0.14", harness.LoadBalancer(""), harness.NodePorts(30014), harness.ExternalLocal(32014)), slice("npn", ep("10.244.1.4", harness.RemoteNode))}},
		{name: "external-ips", clusterCIDR: cidr, objects: []any{svc("ext", "10.96.0.15", harness.ExternalIPs("198.51.100.15", "198.51.100.16")), slice("ext", three...)}},
		{name: "loadbalancer-ranges", clusterCIDR: cidr, objects: []any{svc("lb", "10.96.0.16", harness.LoadBalancer("203.0.113.16", "192.0.2.0/24", "198.18.0.0/16"), harness.NodePorts(30016)), slice("lb", three...)}},
		{name: "loadbalancer-local", clusterCIDR: cidr, objects: []any{svc("lbl", "10.96.0.17", harness.LoadBalancer("203.0.113.17"), harness.NodePorts(30017), harness.ExternalLocal(32017)), slice("lbl", three...)}},
		{name: "internal-local", clusterCIDR: cidr, objects: []any{svc("il", "10.96.0.18", harness.InternalLocal), slice("il", three...),
			svc("iln", "10.96.0.19", harness.InternalLocal), slice("iln", ep("10.244.1.19", harness.RemoteNode))}},
		{name: "affinity", clusterCIDR: cidr, objects: []any{svc("aff", "10.96.0.20", harness.Affinity(600)), slice("aff", three...)}},
		{name: "terminating", clusterCIDR: cidr, objects: []any{svc("term", "10.96.0.21"), slice("term",
			harness.EP{IP: "10.244.0.21", Node: harness.LocalNode, NotReady: true, Terminating: true}, harness.EP{IP: "10.244.1.21", Node: harness.RemoteNode, NotReady: true})}},
		{name: "topology", clusterCIDR: cidr, objects: []any{svc("topo", "10.96.0.22"), slice("topo",
			harness.EP{IP: "10.244.0.22", Node: harness.LocalNode, Zone: harness.LocalZone}, harness.EP{IP: "10.244.1.22", Node: harness.RemoteNode, Zone: "zone-b"})}},
		{name: "udp-sctp-multiport", clusterCIDR: cidr, objects: []any{
			harness.With(harness.ClusterIPService("ns", "multi", "10.96.0.23", httpPort, dnsPort, harness.PortSpec{Name: "sctp", Protocol: v1.ProtocolSCTP, Port: 9000, Target: 9000}), harness.NodePorts(30023, 30053, 30090)),
			harness.SliceOf("ns", "multi", "multi-1", []harness.PortSpec{httpPort, dnsPort, {Name: "sctp", Protocol: v1.ProtocolSCTP, Port: 9000, Target: 9000}}, three...)}},
		{name: "masquerade-all", clusterCIDR: cidr, masqueradeAll: true, objects: []any{svc("web", "10.96.0.24"), slice("web", three...)}},
		{name: "no-cluster-cidr", objects: []any{svc("web", "10.96.0.25", harness.NodePorts(30025), harness.ExternalLocal(32025)), slice("web", three...)}},
		{name: "nodeport-local-no-health-check", clusterCIDR: cidr, objects: []any{svc("npl", "10.96.0.31", harness.NodePorts(30031), harness.ExternalLocal(32031)), slice("npl", three...)}},
		{name: "nodeport-addresses", clusterCIDR: cidr, nodePortAddresses: "192.0.2.0/24", objects: []any{svc("np", "10.96.0.26", harness.NodePorts(30026)), slice("np", three...)}},
		{name: "no-localhost-nodeports", clusterCIDR: cidr, noLocalhost: true, objects: []any{svc("np", "10.96.0.27", harness.NodePorts(30027)), slice("np", three...)}},
		{name: "masquerade-bit", clusterCIDR: cidr, masqueradeBit: 5, objects: []any{svc("web", "10.96.0.28", harness.NodePorts(30028)), slice("web", three...)}},
		{name: "ipv6", clusterCIDR: harness.ClusterCIDR6, ipv6: true, objects: []any{
			svc("v6", "fd00:10:96::29", harness.NodePorts(30029), harness.LoadBalancer("2001:db8:99::29", "2001:db8:9::/64")),
			harness.SliceOf("ns", "v6", "v6-1", hp, ep("fd00:10:244::2", harness.LocalNode), ep("fd00:10:244:1::3", harness.RemoteNode))}},
		{name: "dual-stack", clusterCIDR: cidr, objects: []any{svc("dual", "10.96.0.30", harness.DualStack("fd00:10:96::30")), slice("dual", three...),
			harness.SliceOf("ns", "dual", "dual-v6", hp, ep("fd00:10:244::30", harness.LocalNode))}},
		// Found by the differential test; each failed before its fix.
		// kube-proxy writes the health check node port rule once per port.
		{name: "health-check-per-port", clusterCIDR: cidr, objects: []any{
			harness.With(harness.ClusterIPService("ns", "ingress", "10.96.0.40", httpPort, harness.PortSpec{Name: "https", Protocol: v1.ProtocolTCP, Port: 443, Target: 8443}),
				harness.LoadBalancer("203.0.113.40"), harness.NodePorts(30040, 30041), harness.ExternalLocal(32040)),
			harness.SliceOf("ns", "ingress", "ingress-1", []harness.PortSpec{httpPort, {Name: "https", Protocol: v1.ProtocolTCP, Port: 443, Target: 8443}}, three...)}},
		// A Service without endpoints names another one's load balancer IP
		// and port: kube-proxy keeps the DNAT of the one and the (filter,
		// after DNAT) reject of the other.
		{name: "reject-beside-dnat", clusterCIDR: cidr, objects: []any{
			svc("web", "10.96.0.41", harness.LoadBalancer("203.0.113.41"), harness.NodePorts(30042)), slice("web", three...),
			svc("aaa-empty", "10.96.0.42", harness.ExternalIPs("203.0.113.41"))}},
		// A dual-stack Service whose only external IP is IPv6 is not
		// externally accessible in IPv4: no KUBE-EXT- chain there.
		{name: "dual-stack-v6-external-ip", clusterCIDR: cidr, objects: []any{
			svc("dual", "10.96.0.43", harness.DualStack("fd00:10:96::43"), harness.ExternalIPs("2001:db8:ff::43")), slice("dual", three...),
			harness.SliceOf("ns", "dual", "dual-v6", hp, ep("fd00:10:244::43", harness.LocalNode))}},
		// Source ranges that do not parse: kube-proxy writes no firewall
		// (every source gets in), nftproxy one that lets none in; diff
		// explains it instead of reporting drift.
		{name: "loadbalancer-ranges-unparsable", clusterCIDR: cidr, explained: "fails closed", objects: []any{
			svc("lbbad", "10.96.0.45", harness.LoadBalancer("203.0.113.45", "198.51.100.0/33", "not-a-range"), harness.NodePorts(30045)), slice("lbbad", three...)}},
		// kube-proxy expands "primary" to the node IP.
		{name: "nodeport-addresses-primary", clusterCIDR: cidr, nodePortAddresses: "primary", objects: []any{svc("np", "10.96.0.44", harness.NodePorts(30044)), slice("np", three...)}},
	}
	// 1,000 Services with 10 endpoints each: kube-proxy's large cluster
	// mode (no per-endpoint comments).
	scale := legacyScenario{name: "scale-1000x10", clusterCIDR: cidr}
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("s%d", i)
		var eps []harness.EP
		for j := 0; j < 10; j++ {
			eps = append(eps, ep(fmt.Sprintf("10.%d.%d.%d", 128+i/250, i%250, j+1), harness.RemoteNode))
		}
		scale.objects = append(scale.objects, svc(name, fmt.Sprintf("10.97.%d.%d", i/250, i%250+1)), slice(name, eps...))
	}
	return append(all, scale)
}

// TestCompatMatchesKubeProxyIptablesMode runs kube-proxy's own iptables
// proxier and nftproxy over the same objects and flags, each in a
// namespace of its own, and asserts that `nftproxy diff` finds no
// difference between kube-proxy's iptables-legacy-save and the compat view
// read back from nftproxy's kernel table.
func TestCompatMatchesKubeProxyIptablesMode(t *testing.T) {
	testns.RequireRoot(t)
	oracle, pathDir := findOracle(t)
	for _, sc := range legacyScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			dir := t.TempDir()
			objects := writeObjects(t, dir, append([]any{testNode()}, sc.objects...)...)

			legacyNS := nodeNamespace(t, "nfp-legacy")
			args := []string{"-objects", objects, "-hostname", harness.LocalNode, "-node-ip", "192.0.2.1"}
			if sc.ipv6 {
				args = append(args, "-family", "IPv6", "-node-ip", "2001:db8:9::1")
			}
			args = append(args, sc.flags(oracleFlagNames)...)
			cmd := legacyNS.Command(oracle, args...)
			cmd.Env = append(os.Environ(), "PATH="+pathDir+":"+os.Getenv("PATH"))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("kube-proxy oracle: %v\n%s", err, out)
			}
			save := "iptables-legacy-save"
			if sc.ipv6 {
				save = "ip6tables-legacy-save"
			}
			legacyFile := filepath.Join(dir, "legacy.save")
			os.WriteFile(legacyFile, []byte(legacyNS.MustRun(t, save)), 0o644)

			nftNS := nodeNamespace(t, "nfp-compat")
			flags := []string{"--objects", objects, "--netns", nftNS.Path(), "--hostname-override", harness.LocalNode}
			flags = append(flags, sc.flags(nftproxyFlagNames)...)
			if out, err := exec.Command(nftproxyBinary, append([]string{"sync"}, flags...)...).CombinedOutput(); err != nil {
				t.Fatalf("nftproxy sync: %v\n%s", err, out)
			}
			diffArgs := []string{"diff", legacyFile, "--netns", nftNS.Path()}
			if sc.ipv6 {
				diffArgs = append(diffArgs, "-6")
			}
			out, err := exec.Command(nftproxyBinary, diffArgs...).CombinedOutput()
			if err != nil {
				report := string(out)
				if len(report) > 6000 {
					report = report[:6000] + "\n..."
				}
				t.Errorf("nftproxy diff: %v\n%s", err, report)
			}
			if !strings.Contains(string(out), sc.explained) {
				t.Errorf("nftproxy diff does not explain %q:\n%s", sc.explained, out)
			}
			rules := strings.Count(legacyNS.MustRun(t, save), "\n-A ")
			t.Logf("zero differences over %d kube-proxy rules", rules)
		})
	}
}
