package proxier

import (
	"net/netip"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestResolveNodePortAddresses(t *testing.T) {
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	local := addrs("127.0.0.1", "192.0.2.1", "10.244.0.1", "::1", "fd00::1")
	primary := addrs("192.0.2.1", "fd00::1")
	tests := []struct {
		spec []string
		is4  bool
		want NodePortAddresses
	}{
		{nil, true, NodePortAddresses{All: true}},
		{[]string{"192.0.2.0/24"}, true, NodePortAddresses{Addrs: addrs("192.0.2.1")}},
		{[]string{"192.0.2.0/24", "127.0.0.0/8"}, true, NodePortAddresses{Addrs: addrs("127.0.0.1", "192.0.2.1")}},
		{[]string{"primary"}, true, NodePortAddresses{Addrs: addrs("192.0.2.1")}},
		{[]string{"primary"}, false, NodePortAddresses{Addrs: addrs("fd00::1")}},
		{[]string{"192.0.2.0/24"}, false, NodePortAddresses{All: true}}, // no IPv6 entry
		{[]string{"0.0.0.0/0"}, true, NodePortAddresses{All: true}},
		{[]string{"203.0.113.0/24"}, true, NodePortAddresses{}}, // nothing matches: no node ports
		{[]string{"all"}, true, NodePortAddresses{All: true}},
		{[]string{"primary", "localhost"}, true, NodePortAddresses{Addrs: addrs("127.0.0.1", "192.0.2.1")}},
	}
	// "primary" pins node ports to the node IP where it is local, and
	// means every address in a family without a node IP, as kube-proxy's.
	if got, _ := ResolveNodePortAddresses([]string{"primary"}, local, addrs("192.0.2.99"), true); len(got.Addrs) != 0 || got.All {
		t.Errorf("primary that is no local address = %+v, want no node ports", got)
	}
	if got, _ := ResolveNodePortAddresses([]string{"primary"}, local, addrs("192.0.2.1"), false); !got.All {
		t.Errorf("primary in a family without a node IP = %+v, want all", got)
	}
	for _, tt := range tests {
		got, err := ResolveNodePortAddresses(tt.spec, local, primary, tt.is4)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%v (v4 %v) = %+v, want %+v", tt.spec, tt.is4, got, tt.want)
		}
	}
	if _, err := ResolveNodePortAddresses([]string{"bogus"}, local, primary, true); err == nil {
		t.Error("bogus entry accepted")
	}
}

// TestPrimaryNodeIPsAreKubeProxys: the first address of the Node
// (InternalIP before ExternalIP), one of the other family, and
// --bind-address replacing the one of its family.
func TestPrimaryNodeIPsAreKubeProxys(t *testing.T) {
	node := &v1.Node{Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeExternalIP, Address: "198.51.100.9"},
		{Type: v1.NodeInternalIP, Address: "192.0.2.5"},
		{Type: v1.NodeInternalIP, Address: "192.0.2.6"},
		{Type: v1.NodeInternalIP, Address: "2001:db8::5"},
	}}}
	tests := []struct {
		bind string
		want []string
	}{
		{"0.0.0.0", []string{"192.0.2.5", "2001:db8::5"}},
		{"192.0.2.6", []string{"2001:db8::5", "192.0.2.6"}},
		{"2001:db8::7", []string{"192.0.2.5", "2001:db8::7"}},
	}
	for _, tt := range tests {
		var got []string
		for _, a := range PrimaryNodeIPs(node, netip.MustParseAddr(tt.bind)) {
			got = append(got, a.String())
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("bind %s: %v, want %v", tt.bind, got, tt.want)
		}
	}
	if got := PrimaryNodeIPs(nil, netip.Addr{}); len(got) != 0 {
		t.Errorf("no Node, no bind address: %v, want none", got)
	}
}
