package model

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkStoreState builds the service port states of 1,000 Services ×
// 10 endpoints from their objects, as a full sync does.
func BenchmarkStoreState(b *testing.B) {
	store := NewStore()
	var names []types.NamespacedName
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("svc-%d", i)
		store.SetService(service(func(s *v1.Service) {
			s.Name = name
			s.Spec.ClusterIP = fmt.Sprintf("10.96.%d.%d", i>>8, i&0xff)
			s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
		}))
		eps := make([]epSpec, 10)
		for e := range eps {
			eps[e] = epSpec{ip: fmt.Sprintf("10.244.%d.%d", (i*10+e)>>8, (i*10+e)&0xff)}
		}
		sl := slice(name+"-1", "p80", 8080, eps...)
		sl.Labels[discovery.LabelServiceName] = name
		store.SetEndpointSlice(sl)
		names = append(names, types.NamespacedName{Namespace: "ns1", Name: name})
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, nn := range names {
			if ports, _ := store.State(nn); len(ports) != 1 || len(ports[0].Endpoints) != 10 {
				b.Fatalf("%s: %d ports", nn, len(ports))
			}
		}
	}
}
