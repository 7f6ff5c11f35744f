package conntrack

import (
	"net/netip"
	"testing"
)

func TestStale(t *testing.T) {
	ap := netip.MustParseAddrPort
	services := []UDPService{{
		Destinations: []netip.AddrPort{ap("10.96.0.10:53"), ap("198.51.100.1:53")},
		NodePort:     30053,
		Endpoints:    []netip.AddrPort{ap("10.244.0.2:5353")},
	}}
	flows := []Flow{
		{Proto: 17, OrigDst: ap("10.96.0.10:53"), ReplySrc: ap("10.244.0.2:5353")},   // current endpoint: keep
		{Proto: 17, OrigDst: ap("10.96.0.10:53"), ReplySrc: ap("10.244.0.9:5353")},   // deleted endpoint: stale
		{Proto: 17, OrigDst: ap("10.96.0.10:53"), ReplySrc: ap("10.96.0.10:53")},     // before endpoints: stale
		{Proto: 17, OrigDst: ap("198.51.100.1:53"), ReplySrc: ap("10.244.0.9:5353")}, // external IP: stale
		{Proto: 17, OrigDst: ap("192.0.2.1:30053"), ReplySrc: ap("10.244.0.9:5353")}, // node port: stale
		{Proto: 6, OrigDst: ap("10.96.0.10:53"), ReplySrc: ap("10.244.0.9:5353")},    // TCP: never
		{Proto: 17, OrigDst: ap("10.96.0.11:53"), ReplySrc: ap("10.244.0.9:5353")},   // other service: keep
		{Proto: 17, OrigDst: ap("10.96.0.10:53"), ReplySrc: ap("10.244.0.9:5353")},   // a second client of the deleted endpoint: stale too
		{Proto: 17, OrigDst: ap("10.96.0.10:53"), ReplySrc: ap("10.244.0.9:5353")},   // and a third
	}
	got := Stale(flows, services)
	want := []int{1, 2, 3, 4, 7, 8}
	if len(got) != len(want) {
		t.Fatalf("stale = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("stale[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}

// TestStaleNodePortOnlyWithEndpoints: as kube-proxy, flows to a node port
// number are cleaned only when the Service has endpoints; its own
// addresses' flows are cleaned either way.
func TestStaleNodePortOnlyWithEndpoints(t *testing.T) {
	ap := netip.MustParseAddrPort
	services := []UDPService{{Destinations: []netip.AddrPort{ap("10.96.0.10:53")}, NodePort: 30053}}
	flows := []Flow{
		{Proto: 17, OrigDst: ap("192.0.2.1:30053"), ReplySrc: ap("192.0.2.9:30053")}, // node port, no endpoints: kept
		{Proto: 17, OrigDst: ap("10.96.0.10:53"), ReplySrc: ap("10.96.0.10:53")},     // the cluster IP before endpoints: stale
	}
	if got := Stale(flows, services); len(got) != 1 || got[0] != 1 {
		t.Errorf("stale = %v, want only the cluster IP's flow", got)
	}
}
