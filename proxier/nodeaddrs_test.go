package proxier

import (
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/metrics"
	"github.com/nftproxy/nftproxy/proxier/model"
	"github.com/nftproxy/nftproxy/proxier/runner"
)

// TestNoServiceCapturesAnAddressOfTheNode: the node has no Node object
// (so no node IPs), and an address on an interface (a second NIC, a VIP).
// A Service whose external IP or cluster IP is that address does not get
// it, with an Event and a metric; the address is looked up before every
// sync, so one that appears later is refused at the next sync, and one
// that goes away is programmed again. A load balancer IP on an interface
// is kept (the load balancer controller put it there).
func TestNoServiceCapturesAnAddressOfTheNode(t *testing.T) {
	var mu sync.Mutex
	local := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.0.2.50")}
	var problems []model.Problem
	f := newEngineFixture(t, func(c *EngineConfig) {
		c.LocalAddresses = func() ([]netip.Addr, error) { mu.Lock(); defer mu.Unlock(); return local, nil }
		c.OnProblem = func(p model.Problem) { problems = append(problems, p) }
	})
	ext := svc("ext", "10.96.0.5")
	ext.Spec.ExternalIPs = []string{"192.0.2.50", "192.0.2.60"}
	f.e.SetService(ext)
	f.e.SetEndpointSlice(slice("ext", "10.0.0.5"))
	cip := svc("cip", "192.0.2.50")
	f.e.SetService(cip)
	f.e.SetEndpointSlice(slice("cip", "10.0.0.6"))
	lb := svc("lb", "10.96.0.7")
	lb.Spec.Type = v1.ServiceTypeLoadBalancer
	lb.Spec.Ports[0].NodePort = 30007
	lb.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.50"}}
	f.e.SetService(lb)
	f.e.SetEndpointSlice(slice("lb", "10.0.0.7"))
	f.sync(t, runner.Requested)

	dump := f.fake.Dump(nftgen.FamilyIPv4)
	for _, bad := range []string{`192.0.2.50 . tcp . 80 comment "ns/ext`, `192.0.2.50 . tcp . 80 comment "ns/cip`} {
		if strings.Contains(dump, bad) {
			t.Errorf("a Service captured the node's address (%s):\n%s", bad, dump)
		}
	}
	for _, want := range []string{`192.0.2.60 . tcp . 80 comment "ns/ext:http external IP"`, `192.0.2.50 . tcp . 80 comment "ns/lb:http loadbalancer IP"`} {
		if !strings.Contains(dump, want) {
			t.Errorf("missing %s:\n%s", want, dump)
		}
	}
	if n := testutil.ToFloat64(f.m.RefusedDestinations.WithLabelValues(metrics.RefusedNodeAddress)); n != 2 {
		t.Errorf("refused node addresses = %v, want 2 (ext's external IP, cip's cluster IP)", n)
	}
	reported := func(name, field string) bool {
		for _, p := range problems {
			if p.Object.Name == name && p.Field == field && strings.Contains(p.Reason, "node's own address") {
				return true
			}
		}
		return false
	}
	if !reported("ext", "spec.externalIPs[0]") || !reported("cip", "spec.clusterIPs") {
		t.Errorf("refusals not reported: %v", problems)
	}

	// The VIP moves away: cip gets its cluster IP at the next sync, without
	// a full one (and wins it over the other two: a cluster IP always
	// wins).
	mu.Lock()
	local = local[:1]
	mu.Unlock()
	f.sync(t, runner.Periodic)
	dump = f.fake.Dump(nftgen.FamilyIPv4)
	if want := `192.0.2.50 . tcp . 80 comment "ns/cip:http cluster IP"`; !strings.Contains(dump, want) {
		t.Errorf("after the address left the node, missing %s:\n%s", want, dump)
	}
	if n := testutil.ToFloat64(f.m.RefusedDestinations.WithLabelValues(metrics.RefusedNodeAddress)); n != 0 {
		t.Errorf("refused node addresses = %v, want 0", n)
	}
	if n := testutil.ToFloat64(f.m.RefusedDestinations.WithLabelValues(metrics.RefusedConflict)); n != 2 {
		t.Errorf("destinations lost in a conflict = %v, want 2 (ext's and lb's, to cip's cluster IP)", n)
	}
	// An address arrives on an interface: ext's other external IP is
	// refused at the next sync.
	mu.Lock()
	local = append(local, netip.MustParseAddr("192.0.2.60"))
	mu.Unlock()
	f.sync(t, runner.Periodic)
	if strings.Contains(f.fake.Dump(nftgen.FamilyIPv4), "192.0.2.60 . tcp . 80") {
		t.Errorf("an address that came to the node is still captured:\n%s", f.fake.Dump(nftgen.FamilyIPv4))
	}
	f.expectSyncs(t, "after the address changes", 1, 2)
}
