package nftgen

import (
	"net/netip"
	"slices"
	"strings"
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

// TestHandoverTableServesWhatTheConfigSays: the handover table marks with
// the configured masquerade bit, serves node ports on the restricted node
// port addresses of its own family only (or on any local address), and
// holds in every filter hook.
func TestHandoverTableServesWhatTheConfigSays(t *testing.T) {
	bit := 10
	g, err := NewGenerator(Config{Family: FamilyIPv4, MasqueradeBit: &bit, RestrictNodePorts: true,
		NodePortAddresses: []netip.Addr{netip.MustParseAddr("192.0.2.1")}})
	if err != nil {
		t.Fatal(err)
	}
	spec := NewHandoverSpec(g, time.Minute)
	spec.NodePortAddresses = append(spec.NodePortAddresses, netip.MustParseAddr("2001:db8::1"))
	table := spec.Table(FamilyIPv4)
	text := table.Text()
	for _, want := range []string{
		"meta mark set meta mark | 0x00000400 dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 16 map @dnat-ips",
		"ip daddr @nodeport-addresses meta mark set meta mark | 0x00000400 dnat ip to meta l4proto",
		"elements = { 192.0.2.1 }",
		"type nat hook postrouting priority 101;",
		"type filter hook forward priority 10;",
		"timeout 1m",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the handover lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "2001:db8::1") {
		t.Errorf("an IPv6 node port address in the IPv4 handover:\n%s", text)
	}
	open, err := NewGenerator(Config{Family: FamilyIPv6})
	if err != nil {
		t.Fatal(err)
	}
	text = NewHandoverSpec(open, time.Minute).Table(FamilyIPv6).Text()
	if !strings.Contains(text, "fib daddr type local meta mark set meta mark | 0x00004000 dnat ip6 to meta l4proto") || strings.Contains(text, "nodeport-addresses") {
		t.Errorf("unrestricted node ports are not served on every local address:\n%s", text)
	}
}
