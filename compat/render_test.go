package compat

import (
	"flag"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestProbabilitiesAsIptablesSavePrintsThem(t *testing.T) {
	for n, want := range map[int]string{2: "0.50000000000", 3: "0.33333333349", 4: "0.25000000000", 5: "0.20000000019", 10: "0.10000000009"} {
		if got := probability(n); got != want {
			t.Errorf("probability(%d) = %s, want %s", n, got, want)
		}
	}
}

func port(name string, vip string, eps ...string) svcmodel.ServicePortState {
	sp := svcmodel.ServicePortState{ServicePort: svcmodel.ServicePort{
		Name:       svcmodel.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}, Port: "http", Protocol: v1.ProtocolTCP},
		ClusterIPs: []netip.Addr{netip.MustParseAddr(vip)}, Port: 80,
	}}
	for _, e := range eps {
		sp.Endpoints = append(sp.Endpoints, svcmodel.Endpoint{Addr: netip.MustParseAddr(e), Port: 8080, Ready: true, Serving: true, NodeName: "node-a"})
	}
	return sp
}

// TestRenderGolden renders a small ruleset and compares with a golden file
// whose lines were checked against kube-proxy's iptables-legacy-save output
// for the same objects (the e2e oracle test does that comparison live).
func TestRenderGolden(t *testing.T) {
	g, err := nftgen.NewGenerator(nftgen.Config{Family: nftgen.FamilyIPv4, LocalhostNodePorts: true,
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, Node: svcmodel.Node{Name: "node-a"}})
	if err != nil {
		t.Fatal(err)
	}
	web := port("web", "10.96.0.10", "10.244.0.2", "10.244.0.3", "10.244.0.4")
	web.NodePort = 30080
	web.AffinityTimeoutSeconds = 10800
	rs := g.Ruleset([]svcmodel.ServicePortState{web, port("empty", "10.96.0.11")})
	got := Render(Build(rs.State()), Options{})
	path := "testdata/basic.save"
	if *update {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(path, []byte(got), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("render differs from %s:\n%s", path, got)
	}
	if !strings.Contains(got, "-A KUBE-SVC-HMALVVKA6APKJPPY -m comment --comment \"ns/web:http -> 10.244.0.2:8080\" -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-UVNDJGSWOZQNOYMF") {
		t.Errorf("statistic rule not as kube-proxy writes it")
	}
}

// TestCountFragmentsMatchesRender checks the structural count against the
// -A lines of the rendered view, for a ruleset with every feature.
func TestCountFragmentsMatchesRender(t *testing.T) {
	g, err := nftgen.NewGenerator(nftgen.Config{Family: nftgen.FamilyIPv4, LocalhostNodePorts: true,
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, Node: svcmodel.Node{Name: "node-a"}})
	if err != nil {
		t.Fatal(err)
	}
	web := port("web", "10.96.0.10", "10.244.0.2", "10.244.0.3", "10.244.0.4")
	web.NodePort, web.AffinityTimeoutSeconds = 30080, 60
	lb := port("lb", "10.96.0.12", "10.244.0.5")
	lb.NodePort, lb.ExternalPolicyLocal, lb.HealthCheckNodePort = 30081, true, 32000
	lb.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("203.0.113.1")}
	lb.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	// kube-proxy writes the health check rule once per port of the
	// Service: the one element stands for three.
	other := lb.Name
	other.Port = "metrics"
	lb.HealthCheckPorts = []svcmodel.ServicePortName{lb.Name, other, {NamespacedName: lb.Name.NamespacedName, Port: "admin"}}
	rs := g.Ruleset([]svcmodel.ServicePortState{web, lb, port("empty", "10.96.0.11")})
	want := nftgen.RuleCounts{}
	for _, tb := range Build(rs.State()) {
		if tb.Name != "mangle" {
			want[tb.Name] = tb.RuleCount()
		}
	}
	counter := nftgen.NewRuleCounter(rs.Top)
	got := counter.Fragment(rs.Top)
	for _, f := range rs.Services {
		got.Add(counter.Fragment(f))
	}
	if got["nat"] != want["nat"] || got["filter"] != want["filter"] {
		t.Errorf("counted %v, rendered %v", got, want)
	}
}

func TestQuoteEscapesLikeIptablesSave(t *testing.T) {
	if got, want := quote(`ns/a"b\c:p`), `"ns/a\"b\\c:p"`; got != want {
		t.Errorf("quote = %s, want %s", got, want)
	}
}
