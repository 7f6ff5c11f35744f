//go:build linux

package e2e

import (
	"fmt"
	"math/rand/v2"

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
	flags   legacyScenario
	// services counts the Services, for the log.
	services int
}

// randomClusterState generates the cluster state of seed: up to eight
// Services of every type and policy with up to three ports each, their
// EndpointSlices with every mix of endpoint conditions, nodes and zone
// hints, shared external and load-balancer IPs, and random proxier flags.
//
// Left out, because nftproxy differs on purpose (see the README's security
// choices): an external or load-balancer IP equal to another Service's
// cluster IP or to the node's own address.
func randomClusterState(seed uint64) randomCluster {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	g := &clusterGen{r: r, usedNodePorts: map[int32]bool{}}
	rc := randomCluster{objects: []any{testNode()}}
	if r.IntN(3) > 0 {
		rc.flags.clusterCIDR = "10.244.0.0/16"
	}
	rc.flags.masqueradeAll = r.IntN(6) == 0
	switch r.IntN(6) {
	case 0:
		rc.flags.nodePortAddresses = "192.0.2.0/24"
	case 1:
		rc.flags.nodePortAddresses = "127.0.0.0/8,192.0.2.0/24"
	}
	rc.flags.noLocalhost = r.IntN(5) == 0
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
// Services may name.
var sharedIPs = []string{"203.0.113.1", "203.0.113.2", "198.51.100.10", "198.51.100.11"}

func (g *clusterGen) service(i int) (*v1.Service, []*discovery.EndpointSlice) {
	r := g.r
	ns := []string{"default", "kube-system", "team-a"}[r.IntN(3)]
	name := fmt.Sprintf("svc-%d", i)
	clusterIP := fmt.Sprintf("10.96.0.%d", 10+i)
	svc := &v1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP}},
	}
	switch r.IntN(10) {
	case 0, 1, 2:
		svc.Spec.Type = v1.ServiceTypeNodePort
	case 3, 4, 5:
		svc.Spec.Type = v1.ServiceTypeLoadBalancer
	case 6:
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = v1.ClusterIPNone, []string{v1.ClusterIPNone}
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
		return svc, g.slices(svc, ns, name)
	}
	if g.pick(3) {
		for range 1 + r.IntN(2) {
			svc.Spec.ExternalIPs = append(svc.Spec.ExternalIPs, sharedIPs[r.IntN(len(sharedIPs))])
		}
	}
	external := svc.Spec.Type != v1.ServiceTypeClusterIP || len(svc.Spec.ExternalIPs) > 0
	if svc.Spec.Type == v1.ServiceTypeLoadBalancer {
		for range r.IntN(3) {
			ing := v1.LoadBalancerIngress{IP: sharedIPs[r.IntN(len(sharedIPs))]}
			if g.pick(6) {
				mode := v1.LoadBalancerIPModeProxy
				ing.IPMode = &mode
			}
			svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, ing)
		}
		if g.pick(2) {
			ranges := []string{"192.0.2.0/24", " 198.51.100.0/24 ", "0.0.0.0/0", "10.0.0.0/8"}
			for range 1 + r.IntN(2) {
				svc.Spec.LoadBalancerSourceRanges = append(svc.Spec.LoadBalancerSourceRanges, ranges[r.IntN(len(ranges))])
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
	return svc, g.slices(svc, ns, name)
}

// slices returns zero to two EndpointSlices of svc, with endpoints in
// every condition, on this node, another one or none, with zone hints.
func (g *clusterGen) slices(svc *v1.Service, ns, name string) []*discovery.EndpointSlice {
	r := g.r
	var out []*discovery.EndpointSlice
	host := 1
	for k := range r.IntN(3) {
		sl := &discovery.EndpointSlice{
			TypeMeta:    metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", name, k), Labels: map[string]string{discovery.LabelServiceName: name}},
			AddressType: discovery.AddressTypeIPv4,
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
			e := discovery.Endpoint{Addresses: []string{fmt.Sprintf("10.244.%d.%d", 10+len(out), host)}}
			host++
			e.Conditions = discovery.EndpointConditions{Ready: g.condition(), Serving: g.condition(), Terminating: g.condition()}
			switch r.IntN(3) {
			case 0:
				n := LocalNode
				e.NodeName = &n
			case 1:
				n := RemoteNode
				e.NodeName = &n
			}
			if hints {
				zone := []string{LocalZone, "zone-b"}[r.IntN(2)]
				e.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: zone}}}
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
