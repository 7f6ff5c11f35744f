package proxier

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// NodePortAddresses is a resolved --nodeport-addresses for one family.
type NodePortAddresses struct {
	// All is true when node ports are served on every local address.
	All bool
	// Addrs are the local addresses to serve node ports on, when not All.
	Addrs []netip.Addr
}

// ResolveNodePortAddresses resolves --nodeport-addresses (CIDRs and the
// keywords "primary", "localhost" and "all") against the node's local addresses and primary IPs, for
// the family of is4. An empty spec, or a spec with no entry of this family,
// means every local address, as in kube-proxy's iptables mode.
func ResolveNodePortAddresses(spec []string, local, primary []netip.Addr, is4 bool) (NodePortAddresses, error) {
	cidrs, all, err := nodePortCIDRs(spec, primary, is4)
	if err != nil || all {
		return NodePortAddresses{All: all}, err
	}
	var out NodePortAddresses
	seen := map[netip.Addr]bool{}
	for _, a := range local {
		for _, c := range cidrs {
			if c.Contains(a) && a.Is4() == is4 && !seen[a] {
				seen[a] = true
				out.Addrs = append(out.Addrs, a)
			}
		}
	}
	return out, nil
}

// nodePortCIDRs returns the CIDRs of the family that spec names (primary
// and localhost expanded), or all when it names every address: "all", a
// /0, or nothing of the family.
func nodePortCIDRs(spec []string, primary []netip.Addr, is4 bool) (cidrs []netip.Prefix, all bool, err error) {
	any := false
	for _, s := range spec {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		switch s {
		case "primary":
			// The node IP of the family, as a /32 or /128, like any other
			// CIDR (kube-proxy expands it so); none when the family has no
			// node IP.
			for _, a := range primary {
				if a.Is4() == is4 {
					cidrs = append(cidrs, netip.PrefixFrom(a, a.BitLen()))
					any = true
				}
			}
			continue
		case "all":
			return nil, true, nil
		case "localhost":
			s = "127.0.0.0/8"
			if !is4 {
				s = "::1/128"
			}
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, false, fmt.Errorf("--nodeport-addresses: %q is neither a CIDR nor one of primary, localhost, all", s)
		}
		if p.Addr().Is4() != is4 {
			continue
		}
		any = true
		if p.Bits() == 0 {
			return nil, true, nil
		}
		cidrs = append(cidrs, p.Masked())
	}
	return cidrs, !any, nil
}

// NodeIPs returns the addresses a Node object reports (InternalIP first,
// then ExternalIP), which kube-proxy treats as the node's primary IPs.
func NodeIPs(node *v1.Node) []netip.Addr {
	var out []netip.Addr
	for _, t := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
		for _, a := range node.Status.Addresses {
			if a.Type != t {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}

// PrimaryNodeIPs returns kube-proxy's node IPs: the first address the Node
// reports (InternalIP before ExternalIP) and the first of the other family,
// with bind (--bind-address, when set) replacing the one of its family. A
// family without one is left out. node may be nil.
func PrimaryNodeIPs(node *v1.Node, bind netip.Addr) []netip.Addr {
	var out []netip.Addr
	if node != nil {
		all := NodeIPs(node)
		if len(all) > 0 {
			out = append(out, all[0])
			for _, a := range all[1:] {
				if a.Is4() != all[0].Is4() {
					out = append(out, a)
					break
				}
			}
		}
	}
	if bind.IsValid() && !bind.IsUnspecified() {
		bind = bind.Unmap()
		out = slices.DeleteFunc(out, func(a netip.Addr) bool { return a.Is4() == bind.Is4() })
		out = append(out, bind)
	}
	return out
}
