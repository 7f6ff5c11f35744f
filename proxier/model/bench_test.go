package model

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// benchStore returns a Store of n Services with 10 endpoints each, their
// names and their slices.
func benchStore(n int) (*Store, []types.NamespacedName, []*discovery.EndpointSlice) {
	store := NewStore()
	var names []types.NamespacedName
	var slices []*discovery.EndpointSlice
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("svc-%d", i)
		store.SetService(service(func(s *v1.Service) {
			s.Name = name
			s.Spec.ClusterIP = fmt.Sprintf("10.%d.%d.%d", 96+i>>16, (i>>8)&0xff, i&0xff)
			s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
		}))
		eps := make([]epSpec, 10)
		for e := range eps {
			k := i*10 + e
			eps[e] = epSpec{ip: fmt.Sprintf("10.%d.%d.%d", 128+k>>16, (k>>8)&0xff, k&0xff)}
		}
		sl := slice(name+"-1", "p80", 8080, eps...)
		sl.Labels[discovery.LabelServiceName] = name
		store.SetEndpointSlice(sl)
		names = append(names, types.NamespacedName{Namespace: "ns1", Name: name})
		slices = append(slices, sl)
	}
	return store, names, slices
}

// BenchmarkStoreState builds the service port states of 1,000 Services ×
// 10 endpoints from their objects, as a full sync does.
func BenchmarkStoreState(b *testing.B) {
	store, names, _ := benchStore(1000)
	b.ReportAllocs()
	for b.Loop() {
		for _, nn := range names {
			if ports, _ := store.State(nn); len(ports) != 1 || len(ports[0].Endpoints) != 10 {
				b.Fatalf("%s: %d ports", nn, len(ports))
			}
		}
	}
}

// BenchmarkStoreSetEndpointSlice replaces one EndpointSlice in a Store of
// 30,000 Services, as an informer update does; its cost must not depend on
// the number of Services.
func BenchmarkStoreSetEndpointSlice(b *testing.B) {
	store, _, slices := benchStore(30000)
	sl := slices[len(slices)/2]
	b.ReportAllocs()
	for b.Loop() {
		if _, p := store.SetEndpointSlice(sl); p != nil {
			b.Fatal(p)
		}
	}
}
