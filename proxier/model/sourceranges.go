package model

import (
	"fmt"
	"net/netip"
	"strings"
)

// parseSourceRanges parses spec.loadBalancerSourceRanges as kube-proxy does:
// each entry trimmed of surrounding white space (API validation accepts
// it), IPv4 octets with leading zeros read as decimal (the API server's
// sloppy parsing), empty entries ignored. It reports every entry that still
// does not parse and returns invalid = true for it, so that the firewall
// fails closed rather than open.
func parseSourceRanges(in []string, report func(field, format string, args ...any)) (ranges []netip.Prefix, invalid bool) {
	for i, raw := range in {
		s := strings.TrimSpace(raw)
		if s == "" {
			continue
		}
		p, err := parsePrefixSloppy(s)
		if err != nil {
			report(fmt.Sprintf("spec.loadBalancerSourceRanges[%d]", i),
				"invalid CIDR %q; the load balancer IPs of this family accept no source until it is fixed, unless another range allows them (kube-proxy would ignore the entry and, with no range left, accept every source)", raw)
			invalid = true
			continue
		}
		ranges = append(ranges, p.Masked())
	}
	return ranges, invalid
}

// parsePrefixSloppy parses a CIDR, accepting IPv4 octets with leading zeros
// ("010.000.0.0/8") as decimal, as Kubernetes' ParseCIDRSloppy does.
func parsePrefixSloppy(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err == nil || strings.Contains(s, ":") {
		return p, err
	}
	addr, bits, ok := strings.Cut(s, "/")
	if !ok {
		return p, err
	}
	octets := strings.Split(addr, ".")
	for i, o := range octets {
		if t := strings.TrimLeft(o, "0"); t != o {
			if t == "" {
				t = "0"
			}
			octets[i] = t
		}
	}
	if q, err2 := netip.ParsePrefix(strings.Join(octets, ".") + "/" + bits); err2 == nil {
		return q, nil
	}
	return p, err
}
