package proxier

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/model"
)

// nodeAddr is the node's own address in the ownership tests.
const nodeAddr = "192.0.2.1"

// newOwnersFixture is a fixture whose node has the address nodeAddr, with
// a proxier that records its conntrack cleanups and health check ports.
func newOwnersFixture(t *testing.T) (*fixture, *Proxier, *failingCleaner, *portsHealth) {
	g, err := nftgen.NewGenerator(nftgen.Config{Family: nftgen.FamilyIPv4, NodeIPs: []netip.Addr{netip.MustParseAddr(nodeAddr)}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: model.NewStore(), fake: nftgen.NewFake()}
	f.syncer = newSyncer(f.store, f.fake, g)
	f.syncer.OnProblem = func(p model.Problem) { f.problems = append(f.problems, p) }
	p := newProxier(f.store, f.syncer, svcmodel.Node{Name: "n"})
	cleaner, health := &failingCleaner{}, &portsHealth{}
	p.Conntrack, p.Health = cleaner, health
	return f, p, cleaner, health
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

// udpService is a UDP Service ns/name on port 53 with external IP ext,
// created at created, with one endpoint.
func udpService(f *fixture, ns, name, clusterIP, ext string, created time.Time, endpoint string) {
	s := svc(name, clusterIP)
	s.Namespace = ns
	s.CreationTimestamp = metav1.NewTime(created)
	s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 53, Protocol: v1.ProtocolUDP}}
	s.Spec.ExternalIPs = []string{ext}
	f.store.SetService(s)
	sl := slice(name, endpoint)
	sl.Namespace = ns
	udp := v1.ProtocolUDP
	sl.Ports[0].Protocol = &udp
	f.store.SetEndpointSlice(sl)
}

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
	f, p, cleaner, _ := newOwnersFixture(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	udpService(f, "zzz", "holder", "10.96.0.1", "198.51.100.7", base, "10.0.0.1")
	udpService(f, "aaa", "late", "10.96.0.2", "198.51.100.7", base.Add(time.Hour), "10.0.0.2")
	udpService(f, "aaa", "node", "10.96.0.3", nodeAddr, base, "10.0.0.3")
	for i := range 3 {
		if i > 0 { // the losers change their endpoints
			for _, nn := range []string{"late", "node"} {
				sl := slice(nn, "10.0.1."+string(rune('0'+i)))
				sl.Namespace = "aaa"
				udp := v1.ProtocolUDP
				sl.Ports[0].Protocol = &udp
				f.store.SetEndpointSlice(sl)
			}
		}
		res, err := p.Sync(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && !res.Full || i > 0 && res.Full {
			t.Fatalf("sync %d full=%v", i, res.Full)
		}
	}
	got := cleaned(cleaner)
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
	f, p, _, health := newOwnersFixture(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, name := range []string{"b-first", "a-late"} {
		lb := svc(name, []string{"10.96.0.20", "10.96.0.21"}[i])
		lb.CreationTimestamp = metav1.NewTime(base.Add(time.Duration(i) * time.Hour))
		lb.Spec.Type = v1.ServiceTypeLoadBalancer
		lb.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		lb.Spec.HealthCheckNodePort = 32000
		lb.Spec.Ports[0].NodePort = []int32{30020, 30021}[i]
		f.store.SetService(lb)
	}
	if _, err := p.Sync(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	want := map[types.NamespacedName]uint16{{Namespace: "ns", Name: "b-first"}: 32000}
	if len(health.ports) != 1 || health.ports[types.NamespacedName{Namespace: "ns", Name: "b-first"}] != 32000 {
		t.Errorf("health check ports %v, want %v", health.ports, want)
	}
}

// TestHandoverServesOnlyOwnedDestinations: the handover table a stopping
// nftproxy leaves serves each destination as its rules did: not the
// external IP a later Service lost, and not the node's own address.
func TestHandoverServesOnlyOwnedDestinations(t *testing.T) {
	for _, failed := range []bool{false, true} {
		f, p, _, _ := newOwnersFixture(t)
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		udpService(f, "zzz", "holder", "10.96.0.1", "198.51.100.7", base, "10.0.0.1")
		udpService(f, "aaa", "late", "10.96.0.2", "198.51.100.7", base.Add(time.Hour), "10.0.0.2")
		udpService(f, "aaa", "node", "10.96.0.3", nodeAddr, base, "10.0.0.3")
		if _, err := p.Sync(context.Background(), ""); err != nil {
			t.Fatal(err)
		}
		if failed { // the owners are decided anew
			f.syncer.families[nftgen.FamilyIPv4].owners = nil
		}
		spec := f.syncer.handoverSpecs(time.Minute)[nftgen.FamilyIPv4]
		ext := spec.ServiceIPs[nftgen.MapKey{Addr: netip.MustParseAddr("198.51.100.7"), Proto: 17, Port: 53}]
		if len(ext) != 1 || ext[0].Addr().String() != "10.0.0.1" {
			t.Errorf("failed=%v: the shared external IP is served by %v, want its holder's 10.0.0.1", failed, ext)
		}
		if eps, ok := spec.ServiceIPs[nftgen.MapKey{Addr: netip.MustParseAddr(nodeAddr), Proto: 17, Port: 53}]; ok {
			t.Errorf("failed=%v: the node's own address is served by %v", failed, eps)
		}
	}
}
