package proxier

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/internal/testobj"
	"github.com/nftproxy/nftproxy/proxier/pipeline"
	"github.com/nftproxy/nftproxy/proxier/runner"
)

// nodeAddr is the node's own address in the ownership tests.
const nodeAddr = "192.0.2.1"

// ownersFixture is an engine whose node has the address nodeAddr, and
// that records its conntrack cleanups and health check ports.
type ownersFixture struct {
	e       *Engine
	cleaner *failingCleaner
	health  *portsHealth
}

func newOwnersFixture(t *testing.T) *ownersFixture {
	f := &ownersFixture{cleaner: &failingCleaner{}, health: &portsHealth{}}
	f.e, _ = newEngineOn(t, Config{Families: []nftgen.Config{{Family: nftgen.FamilyIPv4, NodeIPs: []netip.Addr{netip.MustParseAddr(nodeAddr)}}},
		Conntrack: f.cleaner, Health: f.health})
	return f
}

// udpService adds the UDP Service of testobj.UDPService.
func (f *ownersFixture) udpService(ns, name, clusterIP, ext string, created time.Time, endpoint string) {
	svc, sl := testobj.UDPService(ns, name, clusterIP, ext, created, endpoint)
	f.e.SetService(svc)
	f.e.SetEndpointSlice(sl)
}

// sync runs one sync and returns its result.
func (f *ownersFixture) sync(t *testing.T) pipeline.Result {
	t.Helper()
	res, err := f.e.Sync(context.Background(), runner.Requested)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// portsHealth is a HealthServer that keeps the ports it was last given.
type portsHealth struct {
	ports map[types.NamespacedName]uint16
}

func (h *portsHealth) Sync(ports map[types.NamespacedName]uint16, _ map[types.NamespacedName]int) error {
	h.ports = ports
	return nil
}

func (h *portsHealth) SetAddresses([]netip.Addr) {}

// cleaned returns every destination the cleaner was asked to clean.
func cleaned(c *failingCleaner) []string {
	var out []string
	for _, call := range c.calls {
		for _, u := range call {
			for _, d := range u.Destinations {
				out = append(out, d.String())
			}
		}
	}
	return out
}

// TestConntrackCleanupOnlyOfOwnedDestinations: a Service that lost an
// external IP to another one, or named the node's own address, changes its
// endpoints; its UDP cleanup never names that destination (it would delete
// the live flows of the Service that kept it, or of the node's own
// program), in full and in incremental syncs.
func TestConntrackCleanupOnlyOfOwnedDestinations(t *testing.T) {
	f := newOwnersFixture(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.udpService("zzz", "holder", "10.96.0.1", "198.51.100.7", base, "10.0.0.1")
	f.udpService("aaa", "late", "10.96.0.2", "198.51.100.7", base.Add(time.Hour), "10.0.0.2")
	f.udpService("aaa", "node", "10.96.0.3", nodeAddr, base, "10.0.0.3")
	for i := range 3 {
		if i > 0 { // the losers change their endpoints
			for _, nn := range []string{"late", "node"} {
				sl := slice(nn, "10.0.1."+string(rune('0'+i)))
				sl.Namespace = "aaa"
				udp := v1.ProtocolUDP
				sl.Ports[0].Protocol = &udp
				f.e.SetEndpointSlice(sl)
			}
		}
		res := f.sync(t)
		if i == 0 && !res.Full || i > 0 && res.Full {
			t.Fatalf("sync %d full=%v", i, res.Full)
		}
	}
	got := cleaned(f.cleaner)
	if n := count(got, "198.51.100.7:53"); n != 1 {
		t.Errorf("the shared external IP was cleaned %d times, want once (for its holder, at the first sync): %v", n, got)
	}
	if slices.Contains(got, nodeAddr+":53") {
		t.Errorf("the node's own address was cleaned: %v", got)
	}
	if !slices.Contains(got, "10.96.0.2:53") || !slices.Contains(got, "10.96.0.3:53") {
		t.Errorf("the losers' own cluster IPs were not cleaned: %v", got)
	}
}

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// TestHealthCheckPortOnlyForItsOwner: two Services of an objects file name
// one health check node port; only the one that owns it in the rules gets
// it served.
func TestHealthCheckPortOnlyForItsOwner(t *testing.T) {
	f := newOwnersFixture(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, name := range []string{"b-first", "a-late"} {
		lb := svc(name, []string{"10.96.0.20", "10.96.0.21"}[i])
		lb.CreationTimestamp = metav1.NewTime(base.Add(time.Duration(i) * time.Hour))
		lb.Spec.Type = v1.ServiceTypeLoadBalancer
		lb.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		lb.Spec.HealthCheckNodePort = 32000
		lb.Spec.Ports[0].NodePort = []int32{30020, 30021}[i]
		f.e.SetService(lb)
	}
	f.sync(t)
	want := map[types.NamespacedName]uint16{{Namespace: "ns", Name: "b-first"}: 32000}
	if len(f.health.ports) != 1 || f.health.ports[types.NamespacedName{Namespace: "ns", Name: "b-first"}] != 32000 {
		t.Errorf("health check ports %v, want %v", f.health.ports, want)
	}
}
