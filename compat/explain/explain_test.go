package explain

import (
	"bytes"
	"encoding/json"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
)

const nodeIP = "192.0.2.1"

func svc(name, vip string, port uint16, eps ...string) svcmodel.ServicePortState {
	sp := svcmodel.ServicePortState{ServicePort: svcmodel.ServicePort{
		Name:       svcmodel.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}, Port: "p", Protocol: v1.ProtocolTCP},
		ClusterIPs: []netip.Addr{netip.MustParseAddr(vip)}, Port: port,
	}}
	for _, e := range eps {
		node := "node-a"
		if strings.HasPrefix(e, "10.244.1.") {
			node = "node-b"
		}
		ap := netip.MustParseAddrPort(e)
		sp.Endpoints = append(sp.Endpoints, svcmodel.Endpoint{Addr: ap.Addr(), Port: ap.Port(), Ready: true, Serving: true, NodeName: node})
	}
	return sp
}

// table is the desired table of a small cluster on node-a (pods
// 10.244.0.0/24 here, 10.244.1.0/24 on node-b).
func table(t *testing.T, mutate ...func([]svcmodel.ServicePortState)) *nftgen.TableState {
	t.Helper()
	g, err := nftgen.NewGenerator(nftgen.Config{Family: nftgen.FamilyIPv4, LocalhostNodePorts: true,
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, Node: svcmodel.Node{Name: "node-a"},
		NodeIPs: []netip.Addr{netip.MustParseAddr(nodeIP)}})
	if err != nil {
		t.Fatal(err)
	}
	web := svc("web", "10.96.0.10", 80, "10.244.0.2:8080", "10.244.0.3:8080", "10.244.1.4:8080")
	web.NodePort = 30080
	local := svc("local", "10.96.0.12", 80, "10.244.1.5:80")
	local.NodePort, local.ExternalPolicyLocal, local.HealthCheckNodePort = 30081, true, 32001
	fw := svc("fw", "10.96.0.13", 443, "10.244.0.6:8443")
	fw.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("203.0.113.10")}
	fw.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	aff := svc("aff", "10.96.0.14", 80, "10.244.0.7:80", "10.244.1.7:80")
	aff.AffinityTimeoutSeconds = 60
	ports := []svcmodel.ServicePortState{web, svc("empty", "10.96.0.11", 80), local, fw, aff}
	for _, m := range mutate {
		m(ports)
	}
	return g.Ruleset(ports).State()
}

func explain(st *nftgen.TableState, from Vantage, src, dst string) *Explanation {
	return Explain(st, Query{From: from, Proto: nftgen.ProtoTCP, Src: netip.MustParseAddr(src), Dst: netip.MustParseAddrPort(dst)},
		LocalAddrs{netip.MustParseAddr(nodeIP), netip.MustParseAddr("10.244.0.1")})
}

func verdicts(e *Explanation) []string {
	var out []string
	for _, p := range e.Paths {
		if p.Affinity == "" && !slices.Contains(out, p.Verdict) {
			out = append(out, p.Verdict)
		}
	}
	return out
}

func TestClusterIPFromAPodPicksEachEndpointEvenly(t *testing.T) {
	e := explain(table(t), FromPod, "10.244.0.9", "10.96.0.10:80")
	if got, want := e.Endpoints(), []string{"10.244.0.2:8080", "10.244.0.3:8080", "10.244.1.4:8080"}; !slices.Equal(got, want) {
		t.Fatalf("endpoints %v, want %v", got, want)
	}
	sum := 0.0
	for _, p := range e.Paths {
		if p.Verdict != Accepted || p.Masquerade {
			t.Errorf("path %+v: want accepted without masquerade (pod source)", p)
		}
		if math.Abs(p.Probability-1.0/3) > 1e-9 {
			t.Errorf("path to %s has probability %v, want 1/3", p.Endpoint, p.Probability)
		}
		sum += p.Probability
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Errorf("probabilities sum to %v", sum)
	}
	// Each step names the nft rule and kube-proxy's iptables rule.
	var sawSVC, sawSEP bool
	for _, s := range e.Paths[0].Steps {
		for _, l := range s.Iptables {
			sawSVC = sawSVC || (strings.Contains(l, "-A KUBE-SERVICES -d 10.96.0.10/32") && strings.Contains(l, "-j KUBE-SVC-"))
			sawSEP = sawSEP || strings.Contains(l, "-j DNAT --to-destination 10.244.0.2:8080")
		}
	}
	if !sawSVC || !sawSEP {
		t.Errorf("steps lack the KUBE-SERVICES or DNAT iptables rules:\n%s", text(e))
	}
}

func TestMasqueradeReasons(t *testing.T) {
	st := table(t)
	for _, tc := range []struct {
		from      Vantage
		src, dst  string
		masq      bool
		reasonHas string
	}{
		{FromNode, nodeIP, "10.96.0.10:80", true, "outside the cluster CIDR 10.244.0.0/16"},
		{FromExternal, "198.18.0.2", nodeIP + ":30080", true, "external destination"},
		{FromPod, "10.244.0.9", "10.96.0.10:80", false, ""},
	} {
		e := explain(st, tc.from, tc.src, tc.dst)
		for _, p := range e.Paths {
			if p.Verdict != Accepted || p.Masquerade != tc.masq || !strings.Contains(p.MasqueradeReason, tc.reasonHas) {
				t.Errorf("%s %s -> %s via %s: %s masquerade=%v (%s), want masquerade=%v (%q)", tc.from, tc.src, tc.dst, p.EndpointChain, p.Verdict, p.Masquerade, p.MasqueradeReason, tc.masq, tc.reasonHas)
			}
		}
	}
	// Hairpin: the endpoint itself, when it is chosen.
	e := explain(st, FromPod, "10.244.0.2", "10.96.0.10:80")
	for _, p := range e.Paths {
		hairpin := p.Endpoint == "10.244.0.2:8080"
		if p.Masquerade != hairpin || (hairpin && !strings.Contains(p.MasqueradeReason, "hairpin")) {
			t.Errorf("to %s: masquerade=%v (%s), want %v", p.Endpoint, p.Masquerade, p.MasqueradeReason, hairpin)
		}
	}
}

func TestDropsAndRejectsSayWhy(t *testing.T) {
	st := table(t)
	for _, tc := range []struct {
		name     string
		from     Vantage
		src, dst string
		verdict  string
		cause    string
	}{
		{"no endpoints", FromPod, "10.244.0.9", "10.96.0.11:80", Rejected, "has no endpoints"},
		{"eTP=Local node port without local endpoints", FromExternal, "198.18.0.2", nodeIP + ":30081", Dropped, "has no local endpoints"},
		{"source range firewall", FromExternal, "198.18.0.2", "203.0.113.10:443", Dropped, "not accepted by KUBE-FW-"},
	} {
		e := explain(st, tc.from, tc.src, tc.dst)
		if len(e.Paths) != 1 || e.Paths[0].Verdict != tc.verdict || !strings.Contains(e.Paths[0].Cause, tc.cause) {
			t.Errorf("%s: %v, want one %s path caused by %q:\n%s", tc.name, verdicts(e), tc.verdict, tc.cause, text(e))
		}
	}
	// The same load balancer IP from inside the source range is served.
	if e := explain(st, FromExternal, "198.51.100.5", "203.0.113.10:443"); !slices.Equal(e.Endpoints(), []string{"10.244.0.6:8443"}) {
		t.Errorf("source range: endpoints %v:\n%s", e.Endpoints(), text(e))
	}
	// eTP=Local from a pod goes to the cluster-wide endpoints.
	if e := explain(st, FromPod, "10.244.0.9", nodeIP+":30081"); !slices.Equal(e.Endpoints(), []string{"10.244.1.5:80"}) {
		t.Errorf("eTP=Local from a pod: endpoints %v:\n%s", e.Endpoints(), text(e))
	}
	// Not a Service: accepted unchanged.
	e := explain(st, FromPod, "10.244.0.9", "10.96.0.99:80")
	if len(e.Paths) != 1 || e.Paths[0].Verdict != Accepted || e.Paths[0].Endpoint != "" {
		t.Errorf("not a Service: %s", text(e))
	}
}

func TestAffinityPathsAreConditional(t *testing.T) {
	e := explain(table(t), FromPod, "10.244.0.9", "10.96.0.14:80")
	var first, sticky []string
	for _, p := range e.Paths {
		if p.Affinity == "" {
			first = append(first, p.Endpoint)
		} else {
			sticky = append(sticky, p.Affinity+"="+p.Endpoint)
		}
	}
	if len(first) != 2 || len(sticky) != 2 {
		t.Fatalf("first connection %v, with affinity %v:\n%s", first, sticky, text(e))
	}
	for _, s := range sticky {
		// Each affinity set leads to its own endpoint.
		set, ep, _ := strings.Cut(s, "=")
		if !strings.HasPrefix(set, nftgen.PrefixAffinity+"KUBE-SEP-") || ep == "" {
			t.Errorf("affinity path %s", s)
		}
	}
}

func TestTamperedTablesChangeTheAnswer(t *testing.T) {
	// A flushed service chain: the packet falls through unchanged.
	flushed := table(t)
	for _, c := range flushed.Chains {
		if strings.HasPrefix(c.Name, "KUBE-SVC-") && strings.Contains(c.Rules[0].Comment, "ns/web") {
			c.Rules = nil
		}
	}
	e := explain(flushed, FromPod, "10.244.0.9", "10.96.0.10:80")
	if len(e.Paths) != 1 || e.Paths[0].Endpoint != "" || e.Paths[0].Verdict != Accepted {
		t.Errorf("flushed chain: %s", text(e))
	}
	// A removed map element: no longer a Service.
	removed := table(t)
	m := removed.Map(nftgen.MapServiceIPs)
	m.Elements = slices.DeleteFunc(m.Elements, func(el nftgen.MapElement) bool { return el.Key.Addr == netip.MustParseAddr("10.96.0.10") })
	if e := explain(removed, FromPod, "10.244.0.9", "10.96.0.10:80"); len(e.Endpoints()) != 0 {
		t.Errorf("removed element: endpoints %v", e.Endpoints())
	}
	// An expression nftproxy did not write stops the walk, with its place.
	odd := table(t)
	c := odd.Chain(nftgen.ChainServices)
	c.Rules = append([]nftgen.Rule{{Stmts: []nftgen.Stmt{nftgen.Unknown{Desc: "Log{}"}}}}, c.Rules...)
	e = explain(odd, FromPod, "10.244.0.9", "10.96.0.10:80")
	if len(e.Paths) != 1 || e.Paths[0].Verdict != Unknown || !strings.Contains(e.Paths[0].Cause, "rule 1 of KUBE-SERVICES") || !strings.Contains(e.Paths[0].Cause, "Log{}") {
		t.Errorf("unknown expression: %s", text(e))
	}
}

func TestNoTableAndJSON(t *testing.T) {
	e := explain(nil, FromPod, "10.244.0.9", "10.96.0.10:80")
	if !e.NoTable || len(e.Paths) != 1 || e.Paths[0].Verdict != Accepted {
		t.Errorf("no table: %s", text(e))
	}
	e = explain(table(t), FromNode, nodeIP, "10.96.0.10:80")
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var back Explanation
	if err := json.Unmarshal(b, &back); err != nil || len(back.Paths) != 3 || back.Paths[0].Steps[0].Hook != nftgen.HookOutput {
		t.Errorf("JSON round trip: %v %s", err, b)
	}
}

func text(e *Explanation) string {
	var b bytes.Buffer
	WriteText(&b, e)
	return b.String()
}

func TestParseQuery(t *testing.T) {
	local := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("fe80::1"), netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr(nodeIP)}
	for _, tc := range []struct {
		from, proto, src, dst string
		want                  string // "from proto src dst" or "error"
	}{
		{"", "", "10.244.0.9", "10.96.0.10:80", "pod 6 10.244.0.9 10.96.0.10:80"},
		{"node", "udp", "", "10.96.0.10:53", "node 17 192.0.2.1 10.96.0.10:53"},
		{"node", "", "", "[fd00::10]:80", "node 6 2001:db8::1 [fd00::10]:80"},
		{"node", "", "", "127.0.0.1:30080", "node 6 127.0.0.1 127.0.0.1:30080"},
		{"external", "sctp", "198.18.0.2", "192.0.2.1:30080", "external 132 198.18.0.2 192.0.2.1:30080"},
		{"pod", "", "", "10.96.0.10:80", "error"},
		{"pod", "", "fd00::1", "10.96.0.10:80", "error"},
		{"pod", "icmp", "10.244.0.9", "10.96.0.10:80", "error"},
		{"router", "", "10.244.0.9", "10.96.0.10:80", "error"},
		{"pod", "", "10.244.0.9", "10.96.0.10", "error"},
	} {
		q, err := ParseQuery(tc.from, tc.proto, tc.src, tc.dst, local)
		got := "error"
		if err == nil {
			got = strings.Join([]string{string(q.From), strconv.Itoa(int(q.Proto)), q.Src.String(), q.Dst.String()}, " ")
		}
		if got != tc.want {
			t.Errorf("ParseQuery(%q, %q, %q, %q) = %s (%v), want %s", tc.from, tc.proto, tc.src, tc.dst, got, err, tc.want)
		}
	}
}

// TestAffinityReadFromTheKernel: with the sets' members known (a table read
// from the kernel), a client with an entry takes only its endpoint, one
// without takes only the random choice.
func TestAffinityReadFromTheKernel(t *testing.T) {
	st := table(t)
	var set string
	for _, s := range st.Sets {
		set = s.Name
	}
	st.Members = map[string][]nftgen.SetMember{set: {{Addr: netip.MustParseAddr("10.244.0.9"), Expires: 42 * time.Second}}}
	e := explain(st, FromPod, "10.244.0.9", "10.96.0.14:80")
	if len(e.Paths) != 1 || e.Paths[0].Affinity != set || e.Paths[0].AffinityLeft != "42s" || e.Paths[0].Endpoint == "" {
		t.Errorf("pinned client: %s", text(e))
	}
	if !strings.Contains(text(e), "the client is in @"+set+" (42s left)") {
		t.Errorf("text does not say the client is pinned:\n%s", text(e))
	}
	e = explain(st, FromPod, "10.244.0.10", "10.96.0.14:80")
	if len(e.Paths) != 2 || e.Paths[0].Affinity != "" || e.Paths[1].Affinity != "" {
		t.Errorf("client without an entry: %s", text(e))
	}
}
