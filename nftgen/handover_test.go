package nftgen

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// TestHandoverServesWhatTheRulesDNATTo: the handover of a Service records
// its cluster IP and node port with the endpoints its chains DNAT to; a
// load balancer IP behind source ranges is not served (the handover
// cannot check sources), and the buckets share the endpoints in turn.
func TestHandoverServesWhatTheRulesDNATTo(t *testing.T) {
	g := featureGenerator(t)
	sp := nftgentest.Port("ns", "web", 80, "10.96.0.7", "10.244.0.3:8080", "10.244.1.4:8080", "10.244.2.5:8080")
	sp.NodePort = 30080
	fenced := nftgentest.Port("ns", "lb", 443, "10.96.1.2", "10.244.0.9:8443")
	fenced.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("203.0.113.10")}
	fenced.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	h := NewHandoverSpec(g, time.Minute)
	h.Add(g.Service(&sp))
	h.Add(g.Service(&fenced))
	h.Add(nil)
	want := []netip.AddrPort{netip.MustParseAddrPort("10.244.0.3:8080"), netip.MustParseAddrPort("10.244.1.4:8080"), netip.MustParseAddrPort("10.244.2.5:8080")}
	if got := h.ServiceIPs[MapKey{Addr: netip.MustParseAddr("10.96.0.7"), Proto: ProtoTCP, Port: 80}]; !slices.Equal(got, want) {
		t.Errorf("cluster IP serves %v, want %v", got, want)
	}
	if got := h.NodePorts[MapKey{Proto: ProtoTCP, Port: 30080}]; !slices.Equal(got, want) {
		t.Errorf("node port serves %v, want %v", got, want)
	}
	if got := h.ServiceIPs[MapKey{Addr: netip.MustParseAddr("10.96.1.2"), Proto: ProtoTCP, Port: 443}]; len(got) != 1 {
		t.Errorf("the fenced Service's cluster IP serves %v, want its one endpoint", got)
	}
	if got, ok := h.ServiceIPs[MapKey{Addr: netip.MustParseAddr("203.0.113.10"), Proto: ProtoTCP, Port: 443}]; ok {
		t.Errorf("a load balancer IP behind source ranges is served (%v): the handover would open it to every source", got)
	}
	if h.MasqueradeBit != 1<<DefaultMasqueradeBit || h.TTL != time.Minute || h.Destinations() != 3 {
		t.Errorf("spec: bit %#x ttl %v destinations %d", h.MasqueradeBit, h.TTL, h.Destinations())
	}
	counts := map[netip.AddrPort]int{}
	for _, ep := range Buckets(want) {
		counts[ep]++
	}
	if counts[want[0]] != 6 || counts[want[1]] != 5 || counts[want[2]] != 5 {
		t.Errorf("16 buckets over 3 endpoints: %v", counts)
	}
}
