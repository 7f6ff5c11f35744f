package proxier

import (
	"net/netip"
	"reflect"
	"testing"
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
		{[]string{"primary", "localhost"}, true, NodePortAddresses{Addrs: addrs("192.0.2.1", "127.0.0.1")}},
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
