package nftgen

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nftproxy/nftproxy/proxier/model"
)

// featureGenerator is an IPv4 generator for node "node-a" in zone "z1",
// with localhost node ports on.
func featureGenerator(t testing.TB) *Generator {
	g, err := NewGenerator(Config{
		Family:             FamilyIPv4,
		ClusterCIDRs:       []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		Node:               model.Node{Name: "node-a", Labels: map[string]string{v1.LabelTopologyZone: "z1"}},
		NodeIP:             netip.MustParseAddr("192.0.2.1"),
		NodeIPs:            []netip.Addr{netip.MustParseAddr("192.0.2.1")},
		LocalhostNodePorts: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func ep(addr string, node string, ready bool) model.Endpoint {
	ap := netip.MustParseAddrPort(addr)
	return model.Endpoint{Addr: ap.Addr(), Port: ap.Port(), Ready: ready, Serving: ready, NodeName: node}
}

// featurePorts is one service port per feature of iptables mode.
func featurePorts() []model.ServicePortState {
	mk := func(name string, port uint16, vip string, mutate func(*model.ServicePortState)) model.ServicePortState {
		sp := testPort("ns", name, port, vip)
		if mutate != nil {
			mutate(&sp)
		}
		return sp
	}
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	return []model.ServicePortState{
		mk("nodeport", 80, "10.96.1.1", func(sp *model.ServicePortState) {
			sp.NodePort = 30080
			sp.Endpoints = []model.Endpoint{ep("10.244.1.2:8080", "node-b", true), ep("10.244.0.2:8080", "node-a", true)}
		}),
		mk("lb", 443, "10.96.1.2", func(sp *model.ServicePortState) {
			sp.NodePort = 30443
			sp.LoadBalancerIPs = addrs("203.0.113.10")
			sp.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("192.0.2.0/24")}
			sp.Endpoints = []model.Endpoint{ep("10.244.0.3:8443", "node-a", true)}
		}),
		mk("extip", 8080, "10.96.1.3", func(sp *model.ServicePortState) {
			sp.ExternalIPs = addrs("198.51.100.7")
			sp.Endpoints = []model.Endpoint{ep("10.244.1.3:80", "node-b", true)}
		}),
		mk("local", 80, "10.96.1.4", func(sp *model.ServicePortState) {
			sp.NodePort = 30081
			sp.ExternalPolicyLocal = true
			sp.HealthCheckNodePort = 32001
			sp.Endpoints = []model.Endpoint{ep("10.244.0.4:80", "node-a", true), ep("10.244.1.4:80", "node-b", true)}
		}),
		mk("local-elsewhere", 80, "10.96.1.5", func(sp *model.ServicePortState) {
			sp.NodePort = 30082
			sp.ExternalPolicyLocal = true
			sp.HealthCheckNodePort = 32002
			sp.Endpoints = []model.Endpoint{ep("10.244.1.5:80", "node-b", true)}
		}),
		mk("internal-local", 80, "10.96.1.6", func(sp *model.ServicePortState) {
			sp.InternalPolicyLocal = true
			sp.Endpoints = []model.Endpoint{ep("10.244.1.6:80", "node-b", true)}
		}),
		mk("affinity", 80, "10.96.1.7", func(sp *model.ServicePortState) {
			sp.AffinityTimeoutSeconds = 60
			sp.Endpoints = []model.Endpoint{ep("10.244.0.7:80", "node-a", true), ep("10.244.1.7:80", "node-b", true)}
		}),
		mk("terminating", 80, "10.96.1.8", func(sp *model.ServicePortState) {
			old := ep("10.244.0.8:80", "node-a", false)
			old.Serving, old.Terminating = true, true
			sp.Endpoints = []model.Endpoint{old, ep("10.244.1.8:80", "node-b", false)}
		}),
		mk("sctp", 9000, "10.96.1.9", func(sp *model.ServicePortState) {
			sp.Name.Protocol = v1.ProtocolSCTP
			sp.Endpoints = []model.Endpoint{ep("10.244.0.9:9000", "node-a", true)}
		}),
		mk("udp-empty", 53, "10.96.1.10", func(sp *model.ServicePortState) {
			sp.Name.Protocol = v1.ProtocolUDP
			sp.NodePort = 30053
			sp.ExternalIPs = addrs("198.51.100.8")
		}),
		mk("zones", 80, "10.96.1.11", func(sp *model.ServicePortState) {
			a, b := ep("10.244.0.11:80", "node-a", true), ep("10.244.1.11:80", "node-b", true)
			a.ZoneHints, b.ZoneHints = []string{"z1"}, []string{"z2"}
			sp.Endpoints = []model.Endpoint{a, b}
		}),
	}
}

func TestGenerateAllFeatures(t *testing.T) {
	golden(t, "features.nft", featureGenerator(t).Ruleset(featurePorts()).Text())
}

func testGenerator6(t testing.TB) *Generator {
	g, err := NewGenerator(Config{
		Family:       FamilyIPv6,
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:10:244::/64")},
		Node:         model.Node{Name: "node-a"},
		NodeIP:       netip.MustParseAddr("2001:db8::1"),
		NodeIPs:      []netip.Addr{netip.MustParseAddr("2001:db8::1")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// featurePorts6 returns featurePorts with IPv6 addresses for family ip6.
func featurePorts6(f Family) []model.ServicePortState {
	ports := featurePorts()
	if f == FamilyIPv4 {
		return ports
	}
	to6 := func(a netip.Addr) netip.Addr {
		b := a.As4()
		return netip.AddrFrom16([16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b[0], b[1], b[2], b[3]})
	}
	for i := range ports {
		p := &ports[i]
		for j := range p.ClusterIPs {
			p.ClusterIPs[j] = to6(p.ClusterIPs[j])
		}
		for j := range p.ExternalIPs {
			p.ExternalIPs[j] = to6(p.ExternalIPs[j])
		}
		for j := range p.LoadBalancerIPs {
			p.LoadBalancerIPs[j] = to6(p.LoadBalancerIPs[j])
		}
		for j, r := range p.LoadBalancerSourceRanges {
			p.LoadBalancerSourceRanges[j] = netip.PrefixFrom(to6(r.Addr()), r.Bits()+96)
		}
		for j := range p.Endpoints {
			p.Endpoints[j].Addr = to6(p.Endpoints[j].Addr)
		}
	}
	return ports
}
