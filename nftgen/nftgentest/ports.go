package nftgentest

import (
	"fmt"
	"net/netip"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Port returns a ready-to-generate TCP service port ns/name:p<port> with
// the given cluster IP and ready endpoints "IP:port".
func Port(ns, name string, port uint16, vip string, eps ...string) svcmodel.ServicePortState {
	sp := svcmodel.ServicePortState{ServicePort: svcmodel.ServicePort{
		Name:       svcmodel.ServicePortName{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}, Port: fmt.Sprintf("p%d", port), Protocol: v1.ProtocolTCP},
		ClusterIPs: []netip.Addr{netip.MustParseAddr(vip)},
		Port:       port,
	}}
	for _, e := range eps {
		ap := netip.MustParseAddrPort(e)
		sp.Endpoints = append(sp.Endpoints, svcmodel.Endpoint{Addr: ap.Addr(), Port: ap.Port(), Ready: true, Serving: true})
	}
	return sp
}

// Endpoint returns the endpoint "IP:port" addr on node, ready and serving
// or neither.
func Endpoint(addr string, node string, ready bool) svcmodel.Endpoint {
	ap := netip.MustParseAddrPort(addr)
	return svcmodel.Endpoint{Addr: ap.Addr(), Port: ap.Port(), Ready: ready, Serving: ready, NodeName: node}
}

// FeaturePorts is one service port per feature of iptables mode, for a
// generator of node "node-a" in zone "z1".
func FeaturePorts() []svcmodel.ServicePortState {
	mk := func(name string, port uint16, vip string, mutate func(*svcmodel.ServicePortState)) svcmodel.ServicePortState {
		sp := Port("ns", name, port, vip)
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
	return []svcmodel.ServicePortState{
		mk("nodeport", 80, "10.96.1.1", func(sp *svcmodel.ServicePortState) {
			sp.NodePort = 30080
			sp.Endpoints = []svcmodel.Endpoint{Endpoint("10.244.1.2:8080", "node-b", true), Endpoint("10.244.0.2:8080", "node-a", true)}
		}),
		mk("lb", 443, "10.96.1.2", func(sp *svcmodel.ServicePortState) {
			sp.NodePort = 30443
			sp.LoadBalancerIPs = addrs("203.0.113.10")
			sp.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("192.0.2.0/24")}
			sp.Endpoints = []svcmodel.Endpoint{Endpoint("10.244.0.3:8443", "node-a", true)}
		}),
		mk("extip", 8080, "10.96.1.3", func(sp *svcmodel.ServicePortState) {
			sp.ExternalIPs = addrs("198.51.100.7")
			sp.Endpoints = []svcmodel.Endpoint{Endpoint("10.244.1.3:80", "node-b", true)}
		}),
		mk("local", 80, "10.96.1.4", func(sp *svcmodel.ServicePortState) {
			sp.NodePort = 30081
			sp.ExternalPolicyLocal = true
			sp.HealthCheckNodePort = 32001
			sp.Endpoints = []svcmodel.Endpoint{Endpoint("10.244.0.4:80", "node-a", true), Endpoint("10.244.1.4:80", "node-b", true)}
		}),
		mk("local-elsewhere", 80, "10.96.1.5", func(sp *svcmodel.ServicePortState) {
			sp.NodePort = 30082
			sp.ExternalPolicyLocal = true
			sp.HealthCheckNodePort = 32002
			sp.Endpoints = []svcmodel.Endpoint{Endpoint("10.244.1.5:80", "node-b", true)}
		}),
		mk("internal-local", 80, "10.96.1.6", func(sp *svcmodel.ServicePortState) {
			sp.InternalPolicyLocal = true
			sp.Endpoints = []svcmodel.Endpoint{Endpoint("10.244.1.6:80", "node-b", true)}
		}),
		mk("affinity", 80, "10.96.1.7", func(sp *svcmodel.ServicePortState) {
			sp.AffinityTimeoutSeconds = 60
			sp.Endpoints = []svcmodel.Endpoint{Endpoint("10.244.0.7:80", "node-a", true), Endpoint("10.244.1.7:80", "node-b", true)}
		}),
		mk("terminating", 80, "10.96.1.8", func(sp *svcmodel.ServicePortState) {
			old := Endpoint("10.244.0.8:80", "node-a", false)
			old.Serving, old.Terminating = true, true
			sp.Endpoints = []svcmodel.Endpoint{old, Endpoint("10.244.1.8:80", "node-b", false)}
		}),
		mk("sctp", 9000, "10.96.1.9", func(sp *svcmodel.ServicePortState) {
			sp.Name.Protocol = v1.ProtocolSCTP
			sp.Endpoints = []svcmodel.Endpoint{Endpoint("10.244.0.9:9000", "node-a", true)}
		}),
		mk("udp-empty", 53, "10.96.1.10", func(sp *svcmodel.ServicePortState) {
			sp.Name.Protocol = v1.ProtocolUDP
			sp.NodePort = 30053
			sp.ExternalIPs = addrs("198.51.100.8")
		}),
		mk("zones", 80, "10.96.1.11", func(sp *svcmodel.ServicePortState) {
			a, b := Endpoint("10.244.0.11:80", "node-a", true), Endpoint("10.244.1.11:80", "node-b", true)
			a.ZoneHints, b.ZoneHints = []string{"z1"}, []string{"z2"}
			sp.Endpoints = []svcmodel.Endpoint{a, b}
		}),
	}
}

// FeaturePortsOf returns FeaturePorts, with IPv6 addresses (fd00::/96
// around each IPv4 one) when ipv6 is set.
func FeaturePortsOf(ipv6 bool) []svcmodel.ServicePortState {
	ports := FeaturePorts()
	if !ipv6 {
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

// ManyPorts returns n service ports ns/svc<i>:p80, each with three
// endpoints.
func ManyPorts(n int) []svcmodel.ServicePortState {
	out := make([]svcmodel.ServicePortState, n)
	for i := range out {
		vip := fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)
		out[i] = Port("ns", fmt.Sprintf("svc%d", i), 80, vip,
			fmt.Sprintf("10.244.%d.%d:8080", i/250, i%250+1),
			fmt.Sprintf("10.245.%d.%d:8080", i/250, i%250+1),
			fmt.Sprintf("10.246.%d.%d:8080", i/250, i%250+1))
	}
	return out
}
