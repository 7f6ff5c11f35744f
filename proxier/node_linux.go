//go:build linux

package proxier

import (
	"fmt"
	"net"
	"net/netip"
	"os"
)

// LocalAddresses returns the addresses configured on the interfaces of the
// current network namespace, but those of kube-proxy's IPVS mode's dummy
// interface (kube-ipvs0 holds every cluster IP until that mode's rules are
// cleaned up; they are not the node's).
func LocalAddresses() ([]netip.Addr, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var out []netip.Addr
	for _, ifc := range ifaces {
		if ifc.Name == ipvsInterface {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, fmt.Errorf("list the addresses of %s: %w", ifc.Name, err)
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				out = append(out, p.Addr().Unmap())
			}
		}
	}
	return out, nil
}

// ipvsInterface is the dummy interface of kube-proxy's IPVS mode.
const ipvsInterface = "kube-ipvs0"

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
