package model

import (
	"reflect"
	"testing"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
)

// TestTrimmedObjectsModelTheSame: what the informers cache after trimming
// gives the model exactly what the full objects give, without the fields
// nftproxy never reads, and with conditions and node names shared.
func TestTrimmedObjectsModelTheSame(t *testing.T) {
	yes, no := true, false
	node, zone := "node-a", "zone-a"
	node2 := "node-a"
	managed := []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate}}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", Labels: map[string]string{"app": "web"},
			Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
			ManagedFields: managed},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports:                    []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, NodePort: 30080, TargetPort: intstr.FromInt32(8080)}},
			ExternalTrafficPolicy:    v1.ServiceExternalTrafficPolicyLocal,
			HealthCheckNodePort:      30999,
			LoadBalancerSourceRanges: []string{"192.0.2.0/24"}},
		Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "198.51.100.1"}}},
			Conditions: []metav1.Condition{{Type: "x"}}},
	}
	sl := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns", Labels: map[string]string{discovery.LabelServiceName: "web"},
			Annotations:   map[string]string{TriggerTimeAnnotation: "2026-12-01T10:00:00Z", "other": "x"},
			ManagedFields: managed, OwnerReferences: []metav1.OwnerReference{{Name: "web"}}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr("http"), Protocol: ptr(v1.ProtocolTCP), Port: ptr(int32(8080))}},
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.244.0.2", "10.244.0.9"}, Conditions: discovery.EndpointConditions{Ready: &yes, Serving: &yes, Terminating: &no},
				NodeName: &node, Zone: &zone, Hostname: ptr("pod-a"), TargetRef: &v1.ObjectReference{Kind: "Pod", Name: "pod-a"},
				Hints: &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-a"}}}},
			{Addresses: []string{"10.244.0.3"}, Conditions: discovery.EndpointConditions{Ready: &no, Terminating: &yes},
				NodeName: &node2, DeprecatedTopology: map[string]string{"a": "b"}},
		},
	}
	tr := NewTrimmer()
	tsvc := tr.Service(svc)
	parsedSvc := mustTransform[*Service](t, tr, svc)
	tsl := tr.EndpointSlice(sl)
	rec := mustTransform[*Slice](t, tr, sl)

	wantPorts, wantProblems := ServicePorts(svc)
	gotPorts, gotProblems := ServicePorts(tsvc)
	if !reflect.DeepEqual(gotPorts, wantPorts) || !reflect.DeepEqual(gotProblems, wantProblems) {
		t.Errorf("service ports differ after trimming:\n%+v\nwant\n%+v", gotPorts, wantPorts)
	}
	nn := types.NamespacedName{Namespace: "ns", Name: "web"}
	wantEps, _ := Endpoints(nn, []*discovery.EndpointSlice{sl})
	gotEps, _ := Endpoints(nn, []*discovery.EndpointSlice{tsl})
	if !reflect.DeepEqual(gotEps, wantEps) || len(gotEps) == 0 {
		t.Errorf("endpoints differ after trimming:\n%+v\nwant\n%+v", gotEps, wantEps)
	}
	// The informers cache the Slice that Transform returns: the store
	// reads the same endpoints from it, and client-go keys it as the
	// EndpointSlice.
	store := NewStore()
	store.SetParsedService(parsedSvc)
	if !reflect.DeepEqual(parsedSvc.ports, wantPorts) || !reflect.DeepEqual(parsedSvc.problems, wantProblems) {
		t.Errorf("the informers' Service has other ports:\n%+v\nwant\n%+v", parsedSvc.ports, wantPorts)
	}
	if key, err := cache.MetaNamespaceKeyFunc(parsedSvc); err != nil || key != "ns/web" {
		t.Errorf("cache key of the Service = %q, %v", key, err)
	}
	if changed, p := store.SetSlice(rec); !changed || p != nil {
		t.Fatalf("SetSlice: changed %v, problem %v", changed, p)
	}
	states, _ := store.State(nn)
	if len(states) != 1 || !reflect.DeepEqual(states[0].Endpoints, wantEps[states[0].Name]) {
		t.Errorf("the store's endpoints from the Slice: %+v\nwant %+v", states, wantEps)
	}
	if key, err := cache.MetaNamespaceKeyFunc(rec); err != nil || key != "ns/web-1" {
		t.Errorf("cache key of the Slice = %q, %v", key, err)
	}
	if ns, err := cache.MetaNamespaceIndexFunc(rec); err != nil || len(ns) != 1 || ns[0] != "ns" {
		t.Errorf("namespace index of the Slice = %v, %v", ns, err)
	}
	if rec2 := tr.Slice(sl); unsafe.StringData(rec2.parsed.nameOf(rec2.parsed.endpoints[0].node)) != unsafe.StringData(rec.parsed.nameOf(rec.parsed.endpoints[1].node)) {
		t.Error("the Trimmer's Slices do not share node names")
	}
	if tsvc.ManagedFields != nil || tsvc.Annotations != nil || tsvc.Status.Conditions != nil || tsvc.UID != "u1" || tsvc.Labels["app"] != "web" {
		t.Errorf("trimmed Service: %+v", tsvc.ObjectMeta)
	}
	if tsl.ManagedFields != nil || tsl.OwnerReferences != nil || len(tsl.Annotations) != 1 || tsl.Annotations[TriggerTimeAnnotation] == "" {
		t.Errorf("trimmed EndpointSlice: %+v", tsl.ObjectMeta)
	}
	e0, e1 := tsl.Endpoints[0], tsl.Endpoints[1]
	if e0.TargetRef != nil || e0.Hostname != nil || e1.DeprecatedTopology != nil || len(e0.Addresses) != 1 {
		t.Errorf("trimmed endpoints keep unused fields: %+v %+v", e0, e1)
	}
	if e0.NodeName != e1.NodeName || e0.Conditions.Ready != e1.Conditions.Terminating || e1.Conditions.Serving != nil {
		t.Error("node names and conditions are not shared, or an unset condition got a value")
	}
	if sl.Endpoints[0].TargetRef == nil || svc.ManagedFields == nil {
		t.Error("trimming changed the objects it was given")
	}
}

func mustTransform[T any](t *testing.T, tr *Trimmer, obj any) T {
	t.Helper()
	out, err := tr.Transform(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out.(T)
}
