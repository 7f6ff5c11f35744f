package model

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// FuzzModel feeds arbitrary Services and EndpointSlices (as JSON) through
// the model: it must never panic, whatever the input, and a store that
// keeps compact copies of the slices must say exactly what one that keeps
// the objects says.
func FuzzModel(f *testing.F) {
	f.Add([]byte(`{"metadata":{"namespace":"ns","name":"a"},"spec":{"clusterIP":"10.96.0.1","ports":[{"port":80}]}}`),
		[]byte(`{"metadata":{"namespace":"ns","name":"a-1","labels":{"kubernetes.io/service-name":"a"}},"addressType":"svcmodel.IPv4","ports":[{"name":"","port":8080}],"endpoints":[{"addresses":["10.0.0.1"]}]}`))
	f.Add([]byte(`{"metadata":{"namespace":"ns","name":"b"},"spec":{"type":"LoadBalancer","clusterIPs":["fd00::1","10.0.0.1","x"],"externalIPs":["1.2.3.4"],"sessionAffinity":"ClientIP","externalTrafficPolicy":"Local","healthCheckNodePort":99999,"ports":[{"port":0},{"port":65536,"protocol":"ICMP"},{"name":"n","port":53,"protocol":"UDP","nodePort":-1}]},"status":{"loadBalancer":{"ingress":[{"ip":"::ffff:1.2.3.4"}]}}}`),
		[]byte(`{"metadata":{"namespace":"ns","name":"b-1","labels":{"kubernetes.io/service-name":"b"}},"addressType":"svcmodel.IPv6","ports":[{"name":"n","port":70000,"protocol":"UDP"}],"endpoints":[{"addresses":["10.0.0.1"],"conditions":{"ready":false,"terminating":true}},{"addresses":[]}]}`))
	f.Fuzz(func(t *testing.T, svcJSON, sliceJSON []byte) {
		var svc v1.Service
		if json.Unmarshal(svcJSON, &svc) != nil {
			return
		}
		var sl discovery.EndpointSlice
		if json.Unmarshal(sliceJSON, &sl) != nil {
			return
		}
		s := NewStore()
		s.SetService(&svc)
		s.SetEndpointSlice(&sl)
		nn := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		states, problems := s.State(nn)
		shared := NewStore()
		shared.SetService(&svc)
		shared.SetSlice(NewTrimmer().Slice(&sl))
		if sharedStates, sharedProblems := shared.State(nn); !reflect.DeepEqual(states, sharedStates) || !reflect.DeepEqual(problems, sharedProblems) {
			t.Fatalf("store: %+v %v\nfrom the informers' Slice: %+v %v", states, problems, sharedStates, sharedProblems)
		}
		for i := range states {
			st := &states[i]
			for _, fam := range []svcmodel.IPFamily{svcmodel.IPv4, svcmodel.IPv6} {
				svcmodel.Categorize(&st.ServicePort, st.Endpoints, svcmodel.Node{Name: "n", Labels: map[string]string{v1.LabelTopologyZone: "z"}})
				_, _ = st.ClusterIP(fam)
			}
		}
	})
}
