package harness

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PortSpec is one port of a test Service: the service port and the port
// the endpoints listen on.
type PortSpec struct {
	Name     string
	Protocol v1.Protocol
	Port     int32
	Target   int32
}

// ClusterIPService returns a ClusterIP Service.
func ClusterIPService(ns, name, clusterIP string, ports ...PortSpec) *v1.Service {
	svc := &v1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP}},
	}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port})
	}
	return svc
}

// Slice returns an EndpointSlice of Service ns/svc with ready endpoints at
// ips, serving every port of ports on its target port.
func Slice(ns, svc, name string, ports []PortSpec, ips ...string) *discovery.EndpointSlice {
	sl := &discovery.EndpointSlice{
		TypeMeta:    metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: discovery.AddressTypeIPv4,
	}
	for _, p := range ports {
		p := p
		sl.Ports = append(sl.Ports, discovery.EndpointPort{Name: &p.Name, Protocol: &p.Protocol, Port: &p.Target})
	}
	ready := true
	for _, ip := range ips {
		sl.Endpoints = append(sl.Endpoints, discovery.Endpoint{Addresses: []string{ip}, Conditions: discovery.EndpointConditions{Ready: &ready}})
	}
	return sl
}

// PodIP returns the address of test pod n (1-based): 10.244.0.(n+1).
func PodIP(n int) string { return fmt.Sprintf("10.244.0.%d", n+1) }

// Local and remote node names of the e2e node. Every pod is wired to the
// one node namespace; an endpoint with NodeName RemoteNode stands for a pod
// on another node (the node still routes to it).
const (
	LocalNode  = "node-a"
	RemoteNode = "node-b"
	LocalZone  = "zone-a"
)

// With applies mutations to a Service and returns it.
func With(svc *v1.Service, mutations ...func(*v1.Service)) *v1.Service {
	for _, m := range mutations {
		m(svc)
	}
	return svc
}

// NodePorts makes svc a NodePort Service with these node ports, in port
// order.
func NodePorts(ports ...int32) func(*v1.Service) {
	return func(svc *v1.Service) {
		if svc.Spec.Type == v1.ServiceTypeClusterIP {
			svc.Spec.Type = v1.ServiceTypeNodePort
		}
		for i := range ports {
			svc.Spec.Ports[i].NodePort = ports[i]
		}
	}
}

// ExternalIPs sets spec.externalIPs.
func ExternalIPs(ips ...string) func(*v1.Service) {
	return func(svc *v1.Service) { svc.Spec.ExternalIPs = ips }
}

// LoadBalancer makes svc a LoadBalancer with ingress IP ip (none when
// empty) and the given source ranges.
func LoadBalancer(ip string, ranges ...string) func(*v1.Service) {
	return func(svc *v1.Service) {
		svc.Spec.Type = v1.ServiceTypeLoadBalancer
		svc.Spec.LoadBalancerSourceRanges = ranges
		if ip != "" {
			svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip}}
		}
	}
}

// ExternalLocal sets externalTrafficPolicy Local with a health check node
// port.
func ExternalLocal(healthCheckNodePort int32) func(*v1.Service) {
	return func(svc *v1.Service) {
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		svc.Spec.HealthCheckNodePort = healthCheckNodePort
	}
}

// InternalLocal sets internalTrafficPolicy Local.
func InternalLocal(svc *v1.Service) {
	p := v1.ServiceInternalTrafficPolicyLocal
	svc.Spec.InternalTrafficPolicy = &p
}

// Affinity sets sessionAffinity ClientIP with a timeout.
func Affinity(seconds int32) func(*v1.Service) {
	return func(svc *v1.Service) {
		svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &seconds}}
	}
}

// DualStack adds an IPv6 cluster IP.
func DualStack(ip6 string) func(*v1.Service) {
	return func(svc *v1.Service) { svc.Spec.ClusterIPs = append(svc.Spec.ClusterIPs, ip6) }
}

// EP is an endpoint of a test EndpointSlice.
type EP struct {
	IP   string
	Node string
	// NotReady marks a not-ready endpoint; Terminating one that is
	// terminating (and still serving).
	NotReady, Terminating bool
	// Zone is the endpoint's zone hint, if any.
	Zone string
}

// SliceOf returns an EndpointSlice of Service ns/svc with endpoints eps.
// Its address type follows the first endpoint.
func SliceOf(ns, svc, name string, ports []PortSpec, eps ...EP) *discovery.EndpointSlice {
	sl := Slice(ns, svc, name, ports)
	if len(eps) > 0 && strings.Contains(eps[0].IP, ":") {
		sl.AddressType = discovery.AddressTypeIPv6
	}
	for _, e := range eps {
		ready, serving, term := !e.NotReady, !e.NotReady || e.Terminating, e.Terminating
		node := e.Node
		if node == "" {
			node = LocalNode
		}
		d := discovery.Endpoint{Addresses: []string{e.IP}, NodeName: &node,
			Conditions: discovery.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &term}}
		if e.Zone != "" {
			d.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: e.Zone}}}
		}
		sl.Endpoints = append(sl.Endpoints, d)
	}
	return sl
}
