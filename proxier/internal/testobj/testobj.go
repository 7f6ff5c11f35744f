package testobj

import (
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Service returns the ClusterIP Service ns/name at ip with one TCP port,
// "http" 80.
func Service(name, ip string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: v1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
	}
}

// Slice returns the EndpointSlice ns/<svcName>-1 of Service svcName with
// one ready IPv4 endpoint per address of ips on TCP port "http" 8080.
func Slice(svcName string, ips ...string) *discovery.EndpointSlice {
	name, port, proto := "http", int32(8080), v1.ProtocolTCP
	sl := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: svcName + "-1", Labels: map[string]string{discovery.LabelServiceName: svcName}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}
	for _, ip := range ips {
		sl.Endpoints = append(sl.Endpoints, discovery.Endpoint{Addresses: []string{ip}})
	}
	return sl
}

// UDPService returns the UDP Service ns/name on port 53 at clusterIP with
// external IP ext, created at created, and its EndpointSlice of one
// endpoint.
func UDPService(ns, name, clusterIP, ext string, created time.Time, endpoint string) (*v1.Service, *discovery.EndpointSlice) {
	s := Service(name, clusterIP)
	s.Namespace = ns
	s.CreationTimestamp = metav1.NewTime(created)
	s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 53, Protocol: v1.ProtocolUDP}}
	s.Spec.ExternalIPs = []string{ext}
	sl := Slice(name, endpoint)
	sl.Namespace = ns
	udp := v1.ProtocolUDP
	sl.Ports[0].Protocol = &udp
	return s, sl
}
