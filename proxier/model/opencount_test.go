package model

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestServiceCountOpenCountsWhatAClusterIPDoesNotPlace: a Service counts,
// per family, when it has a node port, or an external or load balancer IP
// of that family; one with only cluster IPs does not.
func TestServiceCountOpenCountsWhatAClusterIPDoesNotPlace(t *testing.T) {
	s := NewStore()
	add := func(name string, mutate func(*v1.Service)) {
		s.SetService(service(func(svc *v1.Service) {
			svc.Name = name
			svc.Spec.ClusterIPs = []string{"10.96.0.1", "fd00::1"}
			if mutate != nil {
				mutate(svc)
			}
		}))
	}
	add("cluster-ip", nil)
	add("node-port", func(svc *v1.Service) {
		svc.Spec.Type = v1.ServiceTypeNodePort
		svc.Spec.Ports[0].NodePort = 30080
	})
	add("external-v4", func(svc *v1.Service) { svc.Spec.ExternalIPs = []string{"198.51.100.1"} })
	add("lb-v6", func(svc *v1.Service) {
		svc.Spec.Type = v1.ServiceTypeLoadBalancer
		svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "2001:db8::5"}}
	})
	services, open := s.ServiceCount(false)
	if services != 4 {
		t.Fatalf("IPv4 Services: %d, want 4", services)
	}
	if open != 2 {
		t.Errorf("open IPv4 Services: %d, want 2 (node-port, external-v4)", open)
	}
	if _, open := s.ServiceCount(true); open != 2 {
		t.Errorf("open IPv6 Services: %d, want 2 (node-port, lb-v6)", open)
	}
}
