package model

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func ptr[T any](v T) *T { return &v }

func service(mutate func(*v1.Service)) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "svc1"},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1"},
			Ports: []v1.ServicePort{{Name: "p80", Port: 80, Protocol: v1.ProtocolTCP}},
		},
	}
	if mutate != nil {
		mutate(svc)
	}
	return svc
}

func TestServicePorts(t *testing.T) {
	tests := []struct {
		name         string
		svc          *v1.Service
		wantPorts    []string // ServicePortName strings with protocol
		wantProblems []string // substrings, one per problem
	}{
		{name: "plain", svc: service(nil), wantPorts: []string{"ns1/svc1:p80/TCP"}},
		{name: "headless is skipped", svc: service(func(s *v1.Service) { s.Spec.ClusterIP = "None"; s.Spec.ClusterIPs = []string{"None"} })},
		{name: "ExternalName is skipped", svc: service(func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeExternalName })},
		{name: "unnamed port", svc: service(func(s *v1.Service) { s.Spec.Ports[0].Name = "" }), wantPorts: []string{"ns1/svc1/TCP"}},
		{name: "default protocol is TCP", svc: service(func(s *v1.Service) { s.Spec.Ports[0].Protocol = "" }), wantPorts: []string{"ns1/svc1:p80/TCP"}},
		{
			name: "bad ports are skipped, good ones kept",
			svc: service(func(s *v1.Service) {
				s.Spec.Ports = append(s.Spec.Ports,
					v1.ServicePort{Name: "zero", Port: 0, Protocol: v1.ProtocolTCP},
					v1.ServicePort{Name: "big", Port: 65536, Protocol: v1.ProtocolTCP},
					v1.ServicePort{Name: "icmp", Port: 1, Protocol: "ICMP"},
					v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP})
			}),
			wantPorts:    []string{"ns1/svc1:p80/TCP", "ns1/svc1:dns/UDP"},
			wantProblems: []string{"spec.ports[1].port: port 0", "spec.ports[2].port: port 65536", `spec.ports[3].protocol: unsupported protocol "ICMP"`},
		},
		{
			name:         "malformed cluster IP",
			svc:          service(func(s *v1.Service) { s.Spec.ClusterIP = "10.96.0.300"; s.Spec.ClusterIPs = []string{"10.96.0.300"} }),
			wantProblems: []string{`spec.clusterIPs[0]: invalid IP address "10.96.0.300"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ports, problems := ServicePorts(tt.svc)
			var got []string
			for _, p := range ports {
				got = append(got, p.Name.String()+"/"+string(p.Name.Protocol))
			}
			if strings.Join(got, ",") != strings.Join(tt.wantPorts, ",") {
				t.Errorf("ports = %v, want %v", got, tt.wantPorts)
			}
			if len(problems) != len(tt.wantProblems) {
				t.Fatalf("problems = %v, want %d", problems, len(tt.wantProblems))
			}
			for i, p := range problems {
				if !strings.Contains(p.Error(), tt.wantProblems[i]) || !strings.HasPrefix(p.Error(), "Service ns1/svc1: ") {
					t.Errorf("problem %d = %q, want it to name the Service and contain %q", i, p.Error(), tt.wantProblems[i])
				}
			}
		})
	}
}

func TestServicePortsAffinityAndPolicies(t *testing.T) {
	ports, _ := ServicePorts(service(func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = 30080
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = 32000
	}))
	p := ports[0]
	if p.AffinityTimeoutSeconds != DefaultAffinityTimeoutSeconds || !p.ExternalPolicyLocal || p.HealthCheckNodePort != 32000 || p.NodePort != 30080 {
		t.Errorf("got %+v", p)
	}
	// A NodePort Service with Local policy gets no health check node port
	// (kube-proxy's NeedsHealthCheck is for load balancers only).
	ports, _ = ServicePorts(service(func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = 32000
	}))
	if !ports[0].ExternalPolicyLocal || ports[0].HealthCheckNodePort != 0 {
		t.Errorf("NodePort with Local policy: %+v", ports[0])
	}
	// eTP Local means nothing for a Service that is not externally accessible.
	ports, _ = ServicePorts(service(func(s *v1.Service) { s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal }))
	if ports[0].ExternalPolicyLocal {
		t.Errorf("ClusterIP Service got ExternalPolicyLocal")
	}
}

type epSpec struct {
	ip                          string
	ready, serving, terminating *bool
}

func slice(name string, portName string, port int32, eps ...epSpec) *discovery.EndpointSlice {
	sl := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns1", Name: name, Labels: map[string]string{discovery.LabelServiceName: "svc1"}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr(portName), Port: ptr(port), Protocol: ptr(v1.ProtocolTCP)}},
	}
	for _, e := range eps {
		sl.Endpoints = append(sl.Endpoints, discovery.Endpoint{Addresses: []string{e.ip},
			Conditions: discovery.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating}})
	}
	return sl
}

var svc1 = types.NamespacedName{Namespace: "ns1", Name: "svc1"}

func TestEndpoints(t *testing.T) {
	p80 := svcmodel.ServicePortName{NamespacedName: svc1, Port: "p80", Protocol: v1.ProtocolTCP}
	t.Run("conditions default as in kube-proxy", func(t *testing.T) {
		eps, _ := Endpoints(svc1, []*discovery.EndpointSlice{slice("a", "p80", 8080,
			epSpec{ip: "10.0.0.1"},
			epSpec{ip: "10.0.0.2", ready: ptr(false)},
			epSpec{ip: "10.0.0.3", ready: ptr(false), serving: ptr(true), terminating: ptr(true)},
			epSpec{ip: "10.0.0.4", ready: ptr(false), terminating: ptr(true)},
			epSpec{ip: "10.0.0.5", ready: ptr(false), serving: ptr(false)})})
		got := eps[p80]
		// Unset ready and serving mean true, unset terminating false.
		want := []svcmodel.Endpoint{
			{Addr: netip.MustParseAddr("10.0.0.1"), Port: 8080, Ready: true, Serving: true},
			{Addr: netip.MustParseAddr("10.0.0.2"), Port: 8080, Serving: true},
			{Addr: netip.MustParseAddr("10.0.0.3"), Port: 8080, Serving: true, Terminating: true},
			{Addr: netip.MustParseAddr("10.0.0.4"), Port: 8080, Serving: true, Terminating: true},
			{Addr: netip.MustParseAddr("10.0.0.5"), Port: 8080},
		}
		if len(got) != len(want) {
			t.Fatalf("got %+v", got)
		}
		for i := range want {
			if got[i].String() != want[i].String() || got[i].Ready != want[i].Ready || got[i].Serving != want[i].Serving || got[i].Terminating != want[i].Terminating {
				t.Errorf("endpoint %d = %+v, want %+v", i, got[i], want[i])
			}
		}
	})
	t.Run("named target port resolved per slice", func(t *testing.T) {
		eps, _ := Endpoints(svc1, []*discovery.EndpointSlice{
			slice("a", "p80", 8080, epSpec{ip: "10.0.0.1"}),
			slice("b", "p80", 9090, epSpec{ip: "10.0.0.2"}),
		})
		if got := endpointList(eps[p80]); got != "10.0.0.1:8080 10.0.0.2:9090" {
			t.Errorf("got %v", got)
		}
	})
	t.Run("duplicates across slices merged, ready copy wins", func(t *testing.T) {
		eps, _ := Endpoints(svc1, []*discovery.EndpointSlice{
			slice("a", "p80", 8080, epSpec{ip: "10.0.0.1", ready: ptr(false)}),
			slice("b", "p80", 8080, epSpec{ip: "10.0.0.1"}, epSpec{ip: "10.0.0.2"}),
			slice("c", "p80", 8080, epSpec{ip: "10.0.0.2", ready: ptr(false)}),
		})
		got := eps[p80]
		if len(got) != 2 || !got[0].Ready || !got[1].Ready {
			t.Errorf("got %+v, want 2 ready endpoints", got)
		}
	})
	t.Run("duplicates both ready: the first slice's copy wins", func(t *testing.T) {
		a := slice("a", "p80", 8080, epSpec{ip: "10.0.0.1"}, epSpec{ip: "10.0.0.3"})
		b := slice("b", "p80", 8080, epSpec{ip: "10.0.0.3"}, epSpec{ip: "10.0.0.1"})
		a.Endpoints[0].NodeName, a.Endpoints[1].NodeName = ptr("node-a"), ptr("node-a")
		b.Endpoints[0].NodeName, b.Endpoints[1].NodeName = ptr("node-b"), ptr("node-b")
		for _, order := range [][]*discovery.EndpointSlice{{a, b}, {b, a}} {
			eps, _ := Endpoints(svc1, order)
			got := eps[p80]
			if len(got) != 2 || got[0].NodeName != "node-a" || got[1].NodeName != "node-a" {
				t.Errorf("got %+v, want the copies of slice a", got)
			}
		}
	})
	t.Run("order is kube-proxy's string order", func(t *testing.T) {
		eps, _ := Endpoints(svc1, []*discovery.EndpointSlice{slice("a", "p80", 80,
			epSpec{ip: "10.0.0.2"}, epSpec{ip: "10.0.0.10"}, epSpec{ip: "10.0.0.1"})})
		if got := endpointList(eps[p80]); got != "10.0.0.10:80 10.0.0.1:80 10.0.0.2:80" {
			t.Errorf("got %v", got)
		}
	})
	t.Run("bad addresses reported, FQDN ignored", func(t *testing.T) {
		bad := slice("a", "p80", 80, epSpec{ip: "fd00::1"}, epSpec{ip: "not-an-ip"}, epSpec{ip: "10.0.0.1"})
		fqdn := slice("f", "p80", 80, epSpec{ip: "example.com"})
		fqdn.AddressType = discovery.AddressTypeFQDN
		eps, problems := Endpoints(svc1, []*discovery.EndpointSlice{bad, fqdn})
		if len(eps[p80]) != 1 {
			t.Errorf("got %+v, want only 10.0.0.1", eps[p80])
		}
		if len(problems) != 2 || !strings.Contains(problems[0].Error(), `EndpointSlice ns1/a: endpoints[0].addresses[0]: IPv6 address "fd00::1" in a slice of type IPv4`) ||
			!strings.Contains(problems[1].Error(), `endpoints[1].addresses[0]: invalid IP address "not-an-ip"`) {
			t.Errorf("problems = %v", problems)
		}
	})
	t.Run("IPv6 and IPv4-mapped addresses, hints", func(t *testing.T) {
		v6 := slice("a", "p80", 80, epSpec{ip: "fd00::2"}, epSpec{ip: "::ffff:10.0.0.1"})
		v6.AddressType = discovery.AddressTypeIPv6
		v6.Endpoints[0].Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "z1"}}}
		mapped := slice("b", "p80", 80, epSpec{ip: "::ffff:10.0.0.3"})
		eps, problems := Endpoints(svc1, []*discovery.EndpointSlice{v6, mapped})
		if got := endpointList(eps[p80]); got != "10.0.0.3:80 [fd00::2]:80" {
			t.Errorf("endpoints = %s", got)
		}
		for _, e := range eps[p80] {
			if hinted := e.Addr.Is6(); hinted != (len(e.ZoneHints) == 1) {
				t.Errorf("%s: zone hints %v", e, e.ZoneHints)
			}
		}
		if len(problems) != 1 || !strings.Contains(problems[0].Error(), `endpoints[1].addresses[0]: IPv4 address "::ffff:10.0.0.1" in a slice of type IPv6`) {
			t.Errorf("problems = %v", problems)
		}
	})
}

func TestUsableEndpoints(t *testing.T) {
	ready := svcmodel.Endpoint{Addr: netip.MustParseAddr("10.0.0.1"), Ready: true, Serving: true}
	term := svcmodel.Endpoint{Addr: netip.MustParseAddr("10.0.0.2"), Serving: true, Terminating: true}
	notServing := svcmodel.Endpoint{Addr: netip.MustParseAddr("10.0.0.3"), Terminating: true}
	if got := svcmodel.Categorize(&svcmodel.ServicePort{}, []svcmodel.Endpoint{ready, term, notServing}, svcmodel.Node{}).Cluster; len(got) != 1 || got[0].Addr != ready.Addr {
		t.Errorf("with a ready endpoint got %v", got)
	}
	if got := svcmodel.Categorize(&svcmodel.ServicePort{}, []svcmodel.Endpoint{term, notServing}, svcmodel.Node{}).Cluster; len(got) != 1 || got[0].Addr != term.Addr {
		t.Errorf("without ready endpoints got %v, want the serving terminating one", got)
	}
	if got := svcmodel.Categorize(&svcmodel.ServicePort{}, []svcmodel.Endpoint{notServing}, svcmodel.Node{}).Cluster; len(got) != 0 {
		t.Errorf("got %v, want none", got)
	}
}

func TestStoreTracksChangedServices(t *testing.T) {
	s := NewStore()
	s.SetService(service(nil))
	if _, p := s.SetEndpointSlice(slice("a", "p80", 8080, epSpec{ip: "10.0.0.1"})); p != nil {
		t.Fatal(p)
	}
	if svcs, eps := s.Pending(); svcs != 1 || eps != 1 {
		t.Errorf("pending = %d services, %d endpoints; want 1, 1", svcs, eps)
	}
	if got := s.TakeChanged(); len(got) != 1 || got[0] != svc1 {
		t.Fatalf("changed = %v", got)
	}
	if svcs, eps := s.Pending(); svcs != 0 || eps != 0 {
		t.Errorf("pending after take = %d, %d", svcs, eps)
	}
	s.SetEndpointSlice(slice("a", "p80", 8080, epSpec{ip: "10.0.0.2"}))
	if svcs, eps := s.Pending(); svcs != 0 || eps != 1 {
		t.Errorf("pending after an endpoint change = %d services, %d endpoints; want 0, 1", svcs, eps)
	}
	s.TakeChanged()
	s.SetEndpointSlice(slice("a", "p80", 8080, epSpec{ip: "10.0.0.1"}))
	s.TakeChanged()
	if got := s.TakeChanged(); len(got) != 0 {
		t.Fatalf("changed twice: %v", got)
	}
	states, _ := s.State(svc1)
	if len(states) != 1 || len(states[0].Endpoints) != 1 {
		t.Fatalf("state = %+v", states)
	}
	// A slice that moves to another Service changes both.
	moved := slice("a", "p80", 8080, epSpec{ip: "10.0.0.1"})
	moved.Labels[discovery.LabelServiceName] = "svc2"
	s.SetEndpointSlice(moved)
	if got := s.TakeChanged(); len(got) != 2 {
		t.Errorf("changed = %v, want svc1 and svc2", got)
	}
	states, _ = s.State(svc1)
	if len(states[0].Endpoints) != 0 {
		t.Errorf("svc1 kept the moved slice's endpoints")
	}
	unlabeled := slice("x", "p80", 80)
	delete(unlabeled.Labels, discovery.LabelServiceName)
	if _, p := s.SetEndpointSlice(unlabeled); p == nil || !strings.Contains(p.Error(), "metadata.labels") {
		t.Errorf("unlabeled slice: problem = %v", p)
	}
	s.DeleteService(svc1)
	if states, _ := s.State(svc1); states != nil {
		t.Errorf("deleted Service still has state")
	}
}

// endpointList is the endpoints as "IP:port" separated by spaces.
func endpointList(eps []svcmodel.Endpoint) string {
	var out []string
	for _, e := range eps {
		out = append(out, e.String())
	}
	return strings.Join(out, " ")
}

// TestLoadBalancerIPModeProxyIsLeftToTheLoadBalancer: kube-proxy programs
// only VIP-mode ingress IPs (ipMode unset or VIP).
func TestLoadBalancerIPModeProxyIsLeftToTheLoadBalancer(t *testing.T) {
	proxy, vip := v1.LoadBalancerIPModeProxy, v1.LoadBalancerIPModeVIP
	ports, _ := ServicePorts(service(func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{
			{IP: "203.0.113.1"}, {IP: "203.0.113.2", IPMode: &vip}, {IP: "203.0.113.3", IPMode: &proxy}}
	}))
	got := ports[0].LoadBalancerIPs
	want := []netip.Addr{netip.MustParseAddr("203.0.113.1"), netip.MustParseAddr("203.0.113.2")}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("LB IPs = %v, want %v", got, want)
	}
}
