//go:build linux

package proxier

import (
	"fmt"
	"net/netip"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// LocalAddresses returns the addresses configured on the interfaces of the
// current network namespace, but those of kube-proxy's IPVS mode's dummy
// interface (kube-ipvs0 holds every cluster IP until that mode's rules are
// cleaned up; they are not the node's). The engine asks before every
// sync, so it is one netlink dump of the addresses, whatever the number of
// interfaces (a node's pods' veths).
func LocalAddresses() ([]netip.Addr, error) {
	skip := ipvsIndex()
	rib, err := syscall.NetlinkRIB(syscall.RTM_GETADDR, syscall.AF_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("list interface addresses: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return nil, fmt.Errorf("parse interface addresses: %w", err)
	}
	var out []netip.Addr
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWADDR || len(m.Data) < syscall.SizeofIfAddrmsg {
			continue
		}
		ifa := (*syscall.IfAddrmsg)(unsafe.Pointer(&m.Data[0]))
		if skip != 0 && int(ifa.Index) == skip {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			continue
		}
		// IFA_LOCAL is the address of a point-to-point link's own end
		// (IFA_ADDRESS its peer's); elsewhere only IFA_ADDRESS is set.
		var addr []byte
		for _, a := range attrs {
			switch a.Attr.Type {
			case syscall.IFA_LOCAL:
				addr = a.Value
			case syscall.IFA_ADDRESS:
				if addr == nil {
					addr = a.Value
				}
			}
		}
		if a, ok := netip.AddrFromSlice(addr); ok {
			out = append(out, a.Unmap())
		}
	}
	return out, nil
}

// ipvsIndex returns the interface index of kube-ipvs0, or 0: one ioctl,
// where a lookup by name through the standard library lists every link.
func ipvsIndex() int {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(ipvsInterface)
	if err != nil || unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr) != nil {
		return 0
	}
	return int(ifr.Uint32())
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
