package pipeline

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
)

// TestClusterIPNeverLosesToAnotherServicesExternalIP: a Service in a
// namespace that sorts first names kube-dns's cluster IP as its external
// IP. kube-dns keeps its cluster IP whichever Service arrives first, and
// the other Service keeps everything but the stolen destination.
func TestClusterIPNeverLosesToAnotherServicesExternalIP(t *testing.T) {
	thief := func() *v1.Service {
		s := svc("aaa", "10.96.0.50")
		s.Namespace = "aaa"
		s.Spec.ExternalIPs = []string{"10.96.0.10"}
		return s
	}
	dns := func() *v1.Service {
		s := svc("kube-dns", "10.96.0.10")
		s.Namespace = "kube-system"
		return s
	}
	dnsSlice := slice("kube-dns", "10.0.0.53")
	dnsSlice.Namespace = "kube-system"
	// With endpoints, the thief competes for the DNAT of the destination.
	thiefSlice := slice("aaa", "10.0.0.99")
	thiefSlice.Namespace = "aaa"
	check := func(t *testing.T, f *fixture) {
		t.Helper()
		dump := f.fake.Dump(nftgen.FamilyIPv4)
		if !strings.Contains(dump, `10.96.0.10 . tcp . 80 comment "kube-system/kube-dns:http cluster IP" : goto KUBE-SVC-`) {
			t.Errorf("kube-dns lost its cluster IP:\n%s", dump)
		}
		for _, line := range strings.Split(dump, "\n") {
			if strings.Contains(line, "10.96.0.10 ") && strings.Contains(line, "aaa/aaa") {
				t.Errorf("the external IP took over kube-dns's cluster IP: %s", line)
			}
		}
		if !strings.Contains(dump, "10.96.0.50 . tcp . 80") {
			t.Errorf("aaa/aaa lost its own cluster IP too:\n%s", dump)
		}
		if !f.reported(types.NamespacedName{Namespace: "aaa", Name: "aaa"}, "cluster IP always wins") {
			t.Errorf("the conflict was not reported on aaa/aaa: %v", f.problems)
		}
	}
	t.Run("thief first, one full sync", func(t *testing.T) {
		f := newFixture(t)
		f.store.SetService(thief())
		f.store.SetEndpointSlice(thiefSlice)
		f.store.SetService(dns())
		f.store.SetEndpointSlice(dnsSlice)
		f.sync(t)
		check(t, f)
	})
	t.Run("thief added later", func(t *testing.T) {
		f := newFixture(t)
		f.store.SetService(dns())
		f.store.SetEndpointSlice(dnsSlice)
		f.sync(t)
		f.store.SetService(thief())
		f.store.SetEndpointSlice(thiefSlice)
		f.sync(t)
		check(t, f)
	})
	t.Run("kube-dns added later", func(t *testing.T) {
		f := newFixture(t)
		f.store.SetService(thief())
		f.store.SetEndpointSlice(thiefSlice)
		f.sync(t)
		f.store.SetService(dns())
		f.store.SetEndpointSlice(dnsSlice)
		if res := f.sync(t); res.Full {
			t.Fatal("expected an incremental sync")
		}
		check(t, f)
		if got, want := f.fake.Dump(nftgen.FamilyIPv4), f.fresh(t); got != want {
			t.Errorf("incremental result differs from a full sync:\n%s\nfull:\n%s", got, want)
		}
	})
}

// TestSharedLoadBalancerIPKeepsTheRestOfTheService: two Services on the same
// load balancer IP and port. The one that loses the LB destination keeps
// its cluster IP and node port.
func TestSharedLoadBalancerIPKeepsTheRestOfTheService(t *testing.T) {
	f := newFixture(t)
	for i, name := range []string{"a", "b"} {
		s := svc(name, []string{"10.96.0.1", "10.96.0.2"}[i])
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = []int32{30001, 30002}[i]
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "203.0.113.7"}}
		f.store.SetService(s)
		f.store.SetEndpointSlice(slice(name, []string{"10.0.0.1", "10.0.0.2"}[i]))
	}
	f.sync(t)
	dump := f.fake.Dump(nftgen.FamilyIPv4)
	for _, want := range []string{`"ns/b:http cluster IP"`, `10.96.0.2 . tcp . 80`, `tcp . 30002`, `"ns/a:http loadbalancer IP"`} {
		if !strings.Contains(dump, want) {
			t.Errorf("missing %s:\n%s", want, dump)
		}
	}
	if strings.Contains(dump, `"ns/b:http loadbalancer IP"`) {
		t.Errorf("both Services hold the LB destination:\n%s", dump)
	}
}

// TestHealthCheckNodePortSharedByPortsOfOneService: a LoadBalancer with
// several ports and externalTrafficPolicy Local has one health check node
// port for all of them; every port is programmed and nothing is reported.
func TestHealthCheckNodePortSharedByPortsOfOneService(t *testing.T) {
	f := newFixture(t)
	s := svc("web", "10.96.0.1")
	s.Spec.Type = v1.ServiceTypeLoadBalancer
	s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	s.Spec.HealthCheckNodePort = 32000
	s.Spec.Ports = []v1.ServicePort{
		{Name: "http", Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP},
		{Name: "https", Port: 443, NodePort: 30443, Protocol: v1.ProtocolTCP},
	}
	s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "203.0.113.9"}}
	f.store.SetService(s)
	f.sync(t)
	if len(f.problems) != 0 {
		t.Errorf("problems: %v", f.problems)
	}
	dump := f.fake.Dump(nftgen.FamilyIPv4)
	for _, want := range []string{`10.96.0.1 . tcp . 80`, `10.96.0.1 . tcp . 443`, `tcp . 30080`, `tcp . 30443`, `tcp . 32000`} {
		if !strings.Contains(dump, want) {
			t.Errorf("missing %s:\n%s", want, dump)
		}
	}
}

// TestRejectOfSharedDestinationDoesNotStopAnotherServicesDNAT: a Service
// without endpoints names another Service's load balancer IP and port as
// its external IP. kube-proxy writes the DNAT of the one (nat table) and
// the reject of the other (filter, after DNAT); so does nftproxy, in two
// maps, and the one with endpoints keeps its DNAT.
func TestRejectOfSharedDestinationDoesNotStopAnotherServicesDNAT(t *testing.T) {
	f := newFixture(t)
	web := svc("web", "10.96.0.20")
	web.Spec.Type = v1.ServiceTypeLoadBalancer
	web.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "203.0.113.7"}}
	f.store.SetService(web)
	f.store.SetEndpointSlice(slice("web", "10.0.0.20"))
	empty := svc("aaa-empty", "10.96.0.21")
	empty.Spec.ExternalIPs = []string{"203.0.113.7"}
	f.store.SetService(empty)
	f.sync(t)
	dump := f.fake.Dump(nftgen.FamilyIPv4)
	if !strings.Contains(dump, `203.0.113.7 . tcp . 80 comment "ns/web:http loadbalancer IP" : goto KUBE-EXT-`) {
		t.Errorf("web lost the DNAT of its load balancer IP:\n%s", dump)
	}
	if !strings.Contains(dump, `203.0.113.7 . tcp . 80 comment "ns/aaa-empty:http has no endpoints"`) {
		t.Errorf("the reject kube-proxy writes for aaa-empty's external IP is missing:\n%s", dump)
	}
	if len(f.problems) != 0 {
		t.Errorf("no conflict expected: %v", f.problems)
	}
}

// TestLoadBalancerIPNeverLosesToAnotherServicesExternalIP: a user who may
// create Services names another Service's load balancer IP and port in
// spec.externalIPs, in a namespace that sorts first. The load balancer
// Service keeps the destination (and with it its source ranges): its IP
// was assigned by the load balancer controller, the external IP by anyone.
func TestLoadBalancerIPNeverLosesToAnotherServicesExternalIP(t *testing.T) {
	f := newFixture(t)
	thief := svc("aaa", "10.96.0.50")
	thief.Namespace = "aaa"
	thief.Spec.ExternalIPs = []string{"203.0.113.10"}
	thiefSlice := slice("aaa", "10.0.0.99")
	thiefSlice.Namespace = "aaa"
	lb := svc("web", "10.96.0.60")
	lb.Namespace = "zzz"
	lb.Spec.Type = v1.ServiceTypeLoadBalancer
	lb.Spec.Ports[0].NodePort = 30060
	lb.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24"}
	lb.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "203.0.113.10"}}
	lbSlice := slice("web", "10.0.0.60")
	lbSlice.Namespace = "zzz"
	f.store.SetService(thief)
	f.store.SetEndpointSlice(thiefSlice)
	f.store.SetService(lb)
	f.store.SetEndpointSlice(lbSlice)
	f.sync(t)
	dump := f.fake.Dump(nftgen.FamilyIPv4)
	for _, line := range strings.Split(dump, "\n") {
		if strings.Contains(line, "203.0.113.10 . tcp . 80") && strings.Contains(line, "aaa/aaa") {
			t.Errorf("the external IP took over the load balancer IP: %s", line)
		}
	}
	if !strings.Contains(dump, `203.0.113.10 . tcp . 80 comment "zzz/web:http loadbalancer IP"`) {
		t.Errorf("the load balancer Service lost its address:\n%s", dump)
	}
	if !f.reported(types.NamespacedName{Namespace: "aaa", Name: "aaa"}, "load balancer IP wins") {
		t.Errorf("the conflict was not reported on aaa/aaa: %v", f.problems)
	}
}

// reported tells whether a problem on obj whose reason contains what was
// reported.
func (f *fixture) reported(obj types.NamespacedName, what string) bool {
	for _, p := range f.problems {
		if p.Object == obj && strings.Contains(p.Reason, what) {
			return true
		}
	}
	return false
}
