//go:build linux

package proxier

import (
	"fmt"
	"net"
	"net/netip"
	"os"
)

// LocalAddresses returns the addresses configured on the interfaces of the
// current network namespace.
func LocalAddresses() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list interface addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out, nil
}

// EnableRouteLocalnet sets net.ipv4.conf.all.route_localnet=1 in the
// current network namespace, which localhost NodePorts need (as in
// kube-proxy's iptables mode); the KUBE-FIREWALL rule guards it.
func EnableRouteLocalnet() error {
	const path = "/proc/sys/net/ipv4/conf/all/route_localnet"
	if b, err := os.ReadFile(path); err == nil && len(b) > 0 && b[0] == '1' {
		return nil
	}
	if err := os.WriteFile(path, []byte("1"), 0o644); err != nil {
		return fmt.Errorf("set route_localnet: %w", err)
	}
	return nil
}
