package e2e

import (
	"fmt"

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
