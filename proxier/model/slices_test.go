package model

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestStoredSliceKeepsEachEndpointsPlace: node and zone names are kept once
// per slice and looked up by index, past the count where the search turns
// into a map, and addresses are packed by the slice's family.
func TestStoredSliceKeepsEachEndpointsPlace(t *testing.T) {
	for _, tc := range []struct {
		addrType discovery.AddressType
		addr     func(i int) string
	}{
		{discovery.AddressTypeIPv4, func(i int) string { return fmt.Sprintf("10.1.%d.%d", i/250, i%250+1) }},
		{discovery.AddressTypeIPv6, func(i int) string { return fmt.Sprintf("fd00::%x", i+1) }},
	} {
		sl := &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "s"}, AddressType: tc.addrType,
			Ports: []discovery.EndpointPort{{Name: ptr(""), Port: ptr(int32(80))}}}
		const n = 100
		for i := range n {
			ep := discovery.Endpoint{Addresses: []string{tc.addr(i)}, NodeName: ptr(fmt.Sprintf("node-%d", i%40)), Zone: ptr(fmt.Sprintf("zone-%d", i%3))}
			if i%10 == 0 {
				ep.NodeName, ep.Zone = nil, nil
			}
			sl.Endpoints = append(sl.Endpoints, ep)
		}
		byPort, problems := Endpoints(types.NamespacedName{Namespace: "ns1", Name: "svc1"}, []*discovery.EndpointSlice{sl})
		if len(problems) != 0 || len(byPort) != 1 {
			t.Fatalf("%s: %d ports, problems %v", tc.addrType, len(byPort), problems)
		}
		for _, eps := range byPort {
			if len(eps) != n {
				t.Fatalf("%s: %d endpoints, want %d", tc.addrType, len(eps), n)
			}
			seen := map[netip.Addr]bool{}
			for _, e := range eps {
				seen[e.Addr] = true
			}
			for i := range n {
				a := netip.MustParseAddr(tc.addr(i))
				if !seen[a] {
					t.Errorf("%s: endpoint %s missing", tc.addrType, a)
				}
			}
			for _, e := range eps {
				i := indexOf(t, tc.addr, e.Addr, n)
				wantNode, wantZone := fmt.Sprintf("node-%d", i%40), fmt.Sprintf("zone-%d", i%3)
				if i%10 == 0 {
					wantNode, wantZone = "", ""
				}
				if e.NodeName != wantNode || e.Zone != wantZone || e.Port != 80 {
					t.Errorf("%s: endpoint %d is %+v, want node %q zone %q port 80", tc.addrType, i, e, wantNode, wantZone)
				}
			}
		}
	}
}

func indexOf(t *testing.T, addr func(int) string, a netip.Addr, n int) int {
	t.Helper()
	for i := range n {
		if netip.MustParseAddr(addr(i)) == a {
			return i
		}
	}
	t.Fatalf("no endpoint %s", a)
	return -1
}

// TestSlicePortsAsKubeProxyReadsThem: a port without a number is skipped,
// one out of range or without a name is reported, and an unset protocol
// is TCP.
func TestSlicePortsAsKubeProxyReadsThem(t *testing.T) {
	sl := &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "s"}, AddressType: discovery.AddressTypeIPv4,
		Ports: []discovery.EndpointPort{
			{Name: ptr("none")},
			{Name: ptr("big"), Port: ptr(int32(70000))},
			{Port: ptr(int32(81))},
			{Name: ptr("web"), Port: ptr(int32(80))},
			{Name: ptr("dns"), Port: ptr(int32(53)), Protocol: ptr(v1.ProtocolUDP)},
		},
		Endpoints: []discovery.Endpoint{{Addresses: []string{"10.0.0.1"}}}}
	nn := types.NamespacedName{Namespace: "ns1", Name: "svc1"}
	byPort, problems := Endpoints(nn, []*discovery.EndpointSlice{sl})
	var got []string
	for _, p := range problems {
		got = append(got, p.Field+": "+p.Reason)
	}
	want := []string{"ports[1].port: port 70000 is outside 1..65535", `ports[2].name: missing (an unnamed port has name "")`}
	if !slices.Equal(got, want) {
		t.Errorf("problems %q, want %q", got, want)
	}
	web := svcmodel.ServicePortName{NamespacedName: nn, Port: "web", Protocol: v1.ProtocolTCP}
	dns := svcmodel.ServicePortName{NamespacedName: nn, Port: "dns", Protocol: v1.ProtocolUDP}
	if len(byPort) != 2 || len(byPort[web]) != 1 || byPort[web][0].Port != 80 || len(byPort[dns]) != 1 || byPort[dns][0].Port != 53 {
		t.Errorf("ports %+v, want web TCP 80 and dns UDP 53", byPort)
	}
}
