//go:build linux

package proxier

import (
	"net"
	"net/netip"
	"slices"
	"testing"
)

// TestLocalAddressesAreTheInterfaces: the one-dump listing holds what the
// standard library lists interface by interface.
func TestLocalAddressesAreTheInterfaces(t *testing.T) {
	got, err := LocalAddresses()
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var want []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			want = append(want, p.Addr().Unmap())
		}
	}
	slices.SortFunc(got, netip.Addr.Compare)
	slices.SortFunc(want, netip.Addr.Compare)
	if !slices.Equal(got, want) || len(got) == 0 {
		t.Errorf("LocalAddresses() = %v, want %v", got, want)
	}
}
