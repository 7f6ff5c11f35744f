package cleanup

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// IPVSResult counts what CleanupIPVS removed.
type IPVSResult struct {
	// Services is the number of kube-proxy's IPVS virtual servers deleted.
	Services int
	// Link is set when kube-proxy's dummy interface was deleted.
	Link bool
	// Sets is the number of kube-proxy's ipsets destroyed.
	Sets int
}

// The IPVS proxier's dummy interface, which holds every Service address,
// and its ipsets (IPv4 names; IPv6 ones start with KUBE-6-).
const ipvsDummyLink = "kube-ipvs0"

var ipvsSets = []string{
	"KUBE-LOOP-BACK", "KUBE-CLUSTER-IP", "KUBE-EXTERNAL-IP", "KUBE-EXTERNAL-IP-LOCAL",
	"KUBE-LOAD-BALANCER", "KUBE-LOAD-BALANCER-LOCAL", "KUBE-LOAD-BALANCER-FW",
	"KUBE-LOAD-BALANCER-SOURCE-IP", "KUBE-LOAD-BALANCER-SOURCE-CIDR",
	"KUBE-NODE-PORT-TCP", "KUBE-NODE-PORT-LOCAL-TCP", "KUBE-NODE-PORT-UDP", "KUBE-NODE-PORT-LOCAL-UDP",
	"KUBE-NODE-PORT-SCTP-HASH", "KUBE-NODE-PORT-LOCAL-SCTP-HASH", "KUBE-HEALTH-CHECK-NODE-PORT", "KUBE-IPVS-IPS",
}

// ipsetNames returns kube-proxy's ipset names of both families: the IPv6
// ones are the IPv4 ones with KUBE- made KUBE-6-, cut to ipset's 31
// characters.
func ipsetNames() []string {
	out := append([]string(nil), ipvsSets...)
	for _, n := range ipvsSets {
		v6 := "KUBE-6-" + n[len("KUBE-"):]
		out = append(out, v6[:min(len(v6), 31)])
	}
	return out
}

// CleanupIPVS removes what kube-proxy's IPVS mode leaves besides its
// iptables chains (which CleanupLegacy and CleanupNFT remove, and which must
// go first: an ipset that a rule uses cannot be destroyed): the IPVS virtual
// servers on the addresses of its kube-ipvs0 interface (no other: those
// are keepalived's, kube-vip's or an administrator's; none at all when
// there is no kube-ipvs0, or no IPVS in the kernel), the interface itself
// and kube-proxy's ipsets. It runs in the caller's network namespace and
// returns every error it met.
func CleanupIPVS() (IPVSResult, error) {
	var res IPVSResult
	var errs []error
	if dummy, ok, err := linkAddrs(ipvsDummyLink); err != nil {
		errs = append(errs, err)
	} else if ok {
		n, err := deleteIPVSServices(dummy)
		res.Services = n
		errs = append(errs, err)
	}
	deleted, err := deleteLink(ipvsDummyLink)
	res.Link = deleted
	errs = append(errs, err)
	n, err := destroyIPSets(ipsetNames())
	res.Sets = n
	errs = append(errs, err)
	return res, errors.Join(errs...)
}

// linkAddrs returns the addresses of the interface named name; ok is false
// when there is no such interface.
func linkAddrs(name string) (addrs []netip.Addr, ok bool, err error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		if strings.Contains(err.Error(), "no such network interface") {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("look up %s: %w", name, err)
	}
	list, err := ifc.Addrs()
	if err != nil {
		return nil, false, fmt.Errorf("addresses of %s: %w", name, err)
	}
	for _, a := range list {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			addrs = append(addrs, p.Addr())
		}
	}
	return addrs, true, nil
}

// deleteIPVSServices deletes the IPVS virtual servers kube-proxy made on
// the addresses of its dummy interface and returns how many; a kernel
// without IPVS has none.
func deleteIPVSServices(dummy []netip.Addr) (int, error) {
	c, err := netlink.Dial(unix.NETLINK_GENERIC, nil)
	if err != nil {
		return 0, fmt.Errorf("generic netlink socket: %w", err)
	}
	defer c.Close()
	family, ok, err := genlFamily(c, "IPVS")
	if err != nil || !ok {
		return 0, err
	}
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(family), Flags: netlink.Request | netlink.Dump},
		Data:   []byte{ipvsCmdGetService, ipvsGenlVersion, 0, 0},
	})
	if err != nil {
		return 0, fmt.Errorf("list IPVS services: %w", err)
	}
	all, err := decodeIPVSServices(msgs)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, s := range kubeProxyServices(all, dummy) {
		data, err := encodeIPVSService(s)
		if err == nil {
			_, err = c.Execute(netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(family), Flags: netlink.Request | netlink.Acknowledge}, Data: data})
		}
		if err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("delete IPVS service %s: %w", s, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// genlFamily resolves a generic netlink family's ID by name.
func genlFamily(c *netlink.Conn, name string) (uint16, bool, error) {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.CTRL_ATTR_FAMILY_NAME, name)
	attrs, err := ae.Encode()
	if err != nil {
		return 0, false, err
	}
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.GENL_ID_CTRL, Flags: netlink.Request},
		Data:   append([]byte{unix.CTRL_CMD_GETFAMILY, 1, 0, 0}, attrs...),
	})
	if errors.Is(err, unix.ENOENT) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("look up generic netlink family %s: %w", name, err)
	}
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return 0, false, err
		}
		for ad.Next() {
			if ad.Type() == unix.CTRL_ATTR_FAMILY_ID {
				return ad.Uint16(), true, nil
			}
		}
	}
	return 0, false, nil
}

// deleteLink deletes the interface named name, found by the kernel from
// its name; it reports false without error when there is none.
func deleteLink(name string) (bool, error) {
	c, err := netlink.Dial(unix.NETLINK_ROUTE, nil)
	if err != nil {
		return false, err
	}
	defer c.Close()
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.IFLA_IFNAME, name)
	attrs, err := ae.Encode()
	if err != nil {
		return false, err
	}
	ifinfo := make([]byte, unix.SizeofIfInfomsg) // AF_UNSPEC, index 0: by name
	_, err = c.Execute(netlink.Message{Header: netlink.Header{Type: unix.RTM_DELLINK, Flags: netlink.Request | netlink.Acknowledge}, Data: append(ifinfo, attrs...)})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ENODEV):
		return false, nil
	}
	return false, fmt.Errorf("delete %s: %w", name, err)
}

// ipset's netlink protocol (linux/netfilter/ipset/ip_set.h).
const (
	ipsetProtocol     = 7
	ipsetCmdDestroy   = 3
	ipsetAttrProtocol = 1
	ipsetAttrSetname  = 2
)

// destroyIPSets destroys the named ipsets that exist and returns how many
// it destroyed. A set that does not exist is no error.
func destroyIPSets(names []string) (int, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return 0, fmt.Errorf("netfilter socket: %w", err)
	}
	defer c.Close()
	n := 0
	var errs []error
	for _, name := range names {
		ae := netlink.NewAttributeEncoder()
		ae.Uint8(ipsetAttrProtocol, ipsetProtocol)
		ae.String(ipsetAttrSetname, name)
		attrs, err := ae.Encode()
		if err != nil {
			return n, err
		}
		_, err = c.Execute(netlink.Message{
			// Without NLM_F_EXCL the kernel takes a missing set as
			// destroyed (ipset's -exist); with it, it says ENOENT.
			Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_IPSET<<8 | ipsetCmdDestroy), Flags: netlink.Request | netlink.Acknowledge | netlink.Excl},
			Data:   append([]byte{unix.AF_INET, unix.NFNETLINK_V0, 0, 0}, attrs...),
		})
		switch {
		case err == nil:
			n++
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EPROTONOSUPPORT):
			// No such set, or a kernel without ipset.
		default:
			errs = append(errs, fmt.Errorf("destroy ipset %s: %w", name, err))
		}
	}
	return n, errors.Join(errs...)
}
