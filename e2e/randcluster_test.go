//go:build linux

package e2e

import (
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"math/rand/v2"
	"strings"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// randomCluster is one generated cluster state: objects the API server
// accepts (it allocates cluster IPs and node ports uniquely, so they are
// unique here too) and the proxier's flags.
type randomCluster struct {
	objects []any
	// families are the IP families compared with kube-proxy ("IPv4",
	// "IPv6").
	families []string
	// clusterCIDRs per family; empty for none.
	clusterCIDRs      map[string]string
	masqueradeAll     bool
	masqueradeBit     int
	nodePortAddresses string
	noLocalhost       bool
	bindAddress       string
	// nodeIPs are kube-proxy's node IPs per family, as it picks them from
	// the Node and --bind-address.
	nodeIPs map[string]string
	// services counts the Services, for the log.
	services int
}

// nftproxyFlags are the cluster's flags for nftproxy.
func (rc randomCluster) nftproxyFlags() []string {
	var out, cidrs []string
	for _, f := range []string{"IPv4", "IPv6"} {
		if c := rc.clusterCIDRs[f]; c != "" {
			cidrs = append(cidrs, c)
		}
	}
	if len(cidrs) > 0 {
		out = append(out, "--cluster-cidr", strings.Join(cidrs, ","))
	}
	return append(out, rc.commonFlags(nftproxyFlagNames)...)
}

// oracleFlags are the flags of kube-proxy's oracle for one family.
func (rc randomCluster) oracleFlags(family string) []string {
	out := []string{"-family", family, "-node-ip", rc.nodeIPs[family]}
	if c := rc.clusterCIDRs[family]; c != "" {
		out = append(out, "-cluster-cidr", c)
	}
	return append(out, rc.commonFlags(oracleFlagNames)...)
}

func (rc randomCluster) commonFlags(names scenarioFlagNames) []string {
	out := legacyScenario{masqueradeAll: rc.masqueradeAll, masqueradeBit: rc.masqueradeBit,
		nodePortAddresses: rc.nodePortAddresses, noLocalhost: rc.noLocalhost}.flags(names)
	if rc.bindAddress != "" && names == nftproxyFlagNames {
		// kube-proxy's oracle gets it as its node IP.
		out = append(out, "--bind-address", rc.bindAddress)
	}
	return out
}

// randomClusterState generates the cluster state of seed: one or both IP
// families, up to eight Services of every type and policy (single- and
// dual-stack) with up to three ports each, their EndpointSlices with every
// mix of endpoint conditions, nodes and zone hints, shared external and
// load-balancer IPs, Node address variants and random proxier flags.
//
// Left out, because nftproxy differs on purpose (see docs/faults-and-security.md's security
// choices): an external or load-balancer IP equal to another Service's
// cluster IP or to one of the node's own addresses.
func randomClusterState(seed uint64) randomCluster {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	g := &clusterGen{r: r, usedNodePorts: map[int32]bool{}}
	rc := randomCluster{clusterCIDRs: map[string]string{}, nodeIPs: map[string]string{}}
	switch r.IntN(5) {
	case 0:
		g.families = []string{"IPv6"}
	case 1:
		g.families = []string{"IPv4", "IPv6"}
	default:
		g.families = []string{"IPv4"}
	}
	rc.families = g.families
	node := testNode()
	switch r.IntN(4) {
	case 0: // an ExternalIP listed first: the InternalIP still wins
		node.Status.Addresses = append([]v1.NodeAddress{{Type: v1.NodeExternalIP, Address: "198.51.100.200"}}, node.Status.Addresses...)
	case 1: // a second InternalIP, not on any interface
		node.Status.Addresses = append(node.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: "192.0.2.50"})
	case 2: // IPv6 first
		node.Status.Addresses[0], node.Status.Addresses[1] = node.Status.Addresses[1], node.Status.Addresses[0]
	}
	rc.objects = []any{node}
	rc.nodeIPs["IPv4"], rc.nodeIPs["IPv6"] = "192.0.2.1", "2001:db8:9::1"
	if g.pick(8) {
		rc.bindAddress = []string{"192.0.2.50", "192.0.2.1", "2001:db8:9::1"}[r.IntN(3)]
		if strings.Contains(rc.bindAddress, ":") {
			rc.nodeIPs["IPv6"] = rc.bindAddress
		} else {
			rc.nodeIPs["IPv4"] = rc.bindAddress
		}
	}
	for _, f := range g.families {
		if r.IntN(3) > 0 {
			rc.clusterCIDRs[f] = map[string]string{"IPv4": "10.244.0.0/16", "IPv6": "fd00:10:244::/48"}[f]
		}
	}
	rc.masqueradeAll = r.IntN(6) == 0
	rc.masqueradeBit = []int{0, 0, 0, 1, 7, 31}[r.IntN(6)]
	rc.nodePortAddresses = []string{"", "", "", "192.0.2.0/24", "127.0.0.0/8,192.0.2.0/24", "primary", "primary,127.0.0.0/8", "2001:db8:9::/64", "192.0.2.0/24,::1/128"}[r.IntN(9)]
	rc.noLocalhost = r.IntN(5) == 0
	n := 1 + r.IntN(8)
	rc.services = n
	for i := range n {
		svc, slices := g.service(i)
		rc.objects = append(rc.objects, svc)
		for _, s := range slices {
			rc.objects = append(rc.objects, s)
		}
	}
	return rc
}

type clusterGen struct {
	r             *rand.Rand
	usedNodePorts map[int32]bool
	families      []string
}

// addr returns address host of block in family: cluster IPs (block
// "svc"), pods ("pod", per slice) and shared external addresses.
func addr(family, block string, a, b int) string {
	if family == "IPv6" {
		return map[string]string{"svc": "fd00:10:96::", "pod": "fd00:10:244:"}[block] + fmt.Sprintf("%x", a) + map[string]string{"svc": "", "pod": fmt.Sprintf("::%x", b)}[block]
	}
	return map[string]string{"svc": "10.96.0.", "pod": fmt.Sprintf("10.244.%d.", a)}[block] + map[string]string{"svc": fmt.Sprint(a), "pod": fmt.Sprint(b)}[block]
}

func (g *clusterGen) pick(n int) bool { return g.r.IntN(n) == 0 }

func (g *clusterGen) nodePort() int32 {
	for {
		p := int32(30000 + g.r.IntN(2768))
		if !g.usedNodePorts[p] {
			g.usedNodePorts[p] = true
			return p
		}
	}
}

// sharedIPs are external and load-balancer addresses that several
// Services may name, per family.
var sharedIPs = map[string][]string{
	"IPv4": {"203.0.113.1", "203.0.113.2", "198.51.100.10", "198.51.100.11"},
	"IPv6": {"2001:db8:ff::1", "2001:db8:ff::2", "2001:db8:fe::10"},
}

// sourceRanges are load balancer source ranges, per family, some with the
// spaces the API server accepts.
var sourceRanges = map[string][]string{
	"IPv4": {"192.0.2.0/24", " 198.51.100.0/24 ", "0.0.0.0/0", "10.0.0.0/8"},
	"IPv6": {"2001:db8:9::/64", "::/0", " 2001:db8:100::/48"},
}

// shared picks one of the shared addresses of the Service's families.
func (g *clusterGen) shared(fams []string) string {
	f := fams[g.r.IntN(len(fams))]
	return sharedIPs[f][g.r.IntN(len(sharedIPs[f]))]
}

func (g *clusterGen) service(i int) (*v1.Service, []*discovery.EndpointSlice) {
	r := g.r
	ns := []string{"default", "kube-system", "team-a"}[r.IntN(3)]
	name := fmt.Sprintf("svc-%d", i)
	fams := g.families
	if len(fams) == 2 && !g.pick(3) {
		fams = []string{fams[r.IntN(2)]}
	}
	var clusterIPs []string
	var ipFamilies []v1.IPFamily
	for _, f := range fams {
		clusterIPs = append(clusterIPs, addr(f, "svc", 10+i, 0))
		ipFamilies = append(ipFamilies, v1.IPFamily(f))
	}
	policy := v1.IPFamilyPolicySingleStack
	if len(fams) == 2 {
		policy = v1.IPFamilyPolicyRequireDualStack
	}
	svc := &v1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: clusterIPs[0], ClusterIPs: clusterIPs,
			IPFamilies: ipFamilies, IPFamilyPolicy: &policy},
	}
	switch r.IntN(10) {
	case 0, 1, 2:
		svc.Spec.Type = v1.ServiceTypeNodePort
	case 3, 4, 5:
		svc.Spec.Type = v1.ServiceTypeLoadBalancer
	case 6:
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = v1.ClusterIPNone, []string{v1.ClusterIPNone}
		svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = svc.Spec.IPFamilies[:1], nil
	}
	protocols := []v1.Protocol{v1.ProtocolTCP, v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}
	nports := 1 + r.IntN(3)
	type key struct {
		port  int32
		proto v1.Protocol
	}
	seen := map[key]bool{}
	for j := range nports {
		p := v1.ServicePort{Protocol: protocols[r.IntN(len(protocols))], Port: []int32{80, 443, 53, 8080, int32(1 + r.IntN(65535))}[r.IntN(5)]}
		if seen[key{p.Port, p.Protocol}] {
			continue
		}
		seen[key{p.Port, p.Protocol}] = true
		if nports > 1 {
			p.Name = fmt.Sprintf("p%d", j)
		}
		if r.IntN(2) == 0 {
			p.TargetPort = intstr.FromInt32(int32(1 + r.IntN(65535)))
		}
		if svc.Spec.Type != v1.ServiceTypeClusterIP && svc.Spec.ClusterIP != v1.ClusterIPNone {
			p.NodePort = g.nodePort()
		}
		svc.Spec.Ports = append(svc.Spec.Ports, p)
	}
	if svc.Spec.ClusterIP == v1.ClusterIPNone {
		// Headless: no node ports, nothing for a proxy to program.
		if svc.Spec.Type != v1.ServiceTypeClusterIP {
			svc.Spec.Type = v1.ServiceTypeClusterIP
			for j := range svc.Spec.Ports {
				svc.Spec.Ports[j].NodePort = 0
			}
		}
		return svc, g.slices(svc, ns, name, fams)
	}
	if g.pick(3) {
		for range 1 + r.IntN(2) {
			svc.Spec.ExternalIPs = append(svc.Spec.ExternalIPs, g.shared(fams))
		}
	}
	external := svc.Spec.Type != v1.ServiceTypeClusterIP || len(svc.Spec.ExternalIPs) > 0
	if svc.Spec.Type == v1.ServiceTypeLoadBalancer {
		for range r.IntN(3) {
			ing := v1.LoadBalancerIngress{IP: g.shared(fams)}
			if g.pick(6) {
				mode := v1.LoadBalancerIPModeProxy
				ing.IPMode = &mode
			}
			svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, ing)
		}
		if g.pick(2) {
			for range 1 + r.IntN(2) {
				f := fams[r.IntN(len(fams))]
				svc.Spec.LoadBalancerSourceRanges = append(svc.Spec.LoadBalancerSourceRanges, sourceRanges[f][r.IntN(len(sourceRanges[f]))])
			}
		}
		if g.pick(6) {
			f := false
			svc.Spec.AllocateLoadBalancerNodePorts = &f
			for j := range svc.Spec.Ports {
				delete(g.usedNodePorts, svc.Spec.Ports[j].NodePort)
				svc.Spec.Ports[j].NodePort = 0
			}
		}
	}
	if external && g.pick(2) {
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		if svc.Spec.Type == v1.ServiceTypeLoadBalancer {
			svc.Spec.HealthCheckNodePort = g.nodePort()
		}
	}
	if g.pick(4) {
		local := v1.ServiceInternalTrafficPolicyLocal
		svc.Spec.InternalTrafficPolicy = &local
	}
	if g.pick(4) {
		svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		if g.pick(2) {
			timeout := int32(1 + r.IntN(86400))
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &timeout}}
		}
	}
	if g.pick(6) {
		prefer := v1.ServiceTrafficDistributionPreferClose
		svc.Spec.TrafficDistribution = &prefer
	}
	return svc, g.slices(svc, ns, name, fams)
}

// slices returns zero to two EndpointSlices of svc, with endpoints in
// every condition, on this node, another one or none, with zone hints.
func (g *clusterGen) slices(svc *v1.Service, ns, name string, fams []string) []*discovery.EndpointSlice {
	r := g.r
	var out []*discovery.EndpointSlice
	host := 1
	for k := range r.IntN(3) * len(fams) {
		fam := fams[k%len(fams)]
		sl := &discovery.EndpointSlice{
			TypeMeta:    metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", name, k), Labels: map[string]string{discovery.LabelServiceName: name}},
			AddressType: discovery.AddressType(fam),
		}
		for _, p := range svc.Spec.Ports {
			if g.pick(8) {
				continue // a port with no endpoints in this slice
			}
			pname, proto, port := p.Name, p.Protocol, int32(1+r.IntN(65535))
			sl.Ports = append(sl.Ports, discovery.EndpointPort{Name: &pname, Protocol: &proto, Port: &port})
		}
		hints := g.pick(4)
		for range r.IntN(5) {
			e := discovery.Endpoint{Addresses: []string{addr(fam, "pod", 10+len(out), host)}}
			host++
			e.Conditions = discovery.EndpointConditions{Ready: g.condition(), Serving: g.condition(), Terminating: g.condition()}
			switch r.IntN(3) {
			case 0:
				n := harness.LocalNode
				e.NodeName = &n
			case 1:
				n := harness.RemoteNode
				e.NodeName = &n
			}
			if hints {
				zone := []string{harness.LocalZone, "zone-b"}[r.IntN(2)]
				e.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: zone}}}
				if g.pick(3) {
					e.Hints.ForNodes = []discovery.ForNode{{Name: []string{harness.LocalNode, harness.RemoteNode}[r.IntN(2)]}}
				}
			}
			sl.Endpoints = append(sl.Endpoints, e)
		}
		out = append(out, sl)
	}
	return out
}

// condition is nil, true or false.
func (g *clusterGen) condition() *bool {
	switch g.r.IntN(4) {
	case 0:
		return nil
	case 1:
		f := false
		return &f
	}
	t := true
	return &t
}
