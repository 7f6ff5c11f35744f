package nftgen

import (
	"net/netip"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// TestFirewallFailsClosedAndZeroRangeIsOpen: a load balancer whose only
// source range did not parse gets a firewall that admits nobody (kube-proxy
// would build none and admit everybody); a range of length 0, as in
// kube-proxy, means no firewall at all.
func TestFirewallFailsClosedAndZeroRangeIsOpen(t *testing.T) {
	lb := func(ranges []string, invalid bool) *Fragment {
		sp := nftgentest.Port("ns", "lb", 443, "10.96.1.2")
		sp.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("203.0.113.10")}
		for _, r := range ranges {
			sp.LoadBalancerSourceRanges = append(sp.LoadBalancerSourceRanges, netip.MustParsePrefix(r))
		}
		sp.SourceRangesInvalid = invalid
		sp.Endpoints = []svcmodel.Endpoint{nftgentest.Endpoint("10.244.0.3:8443", "node-a", true)}
		return featureGenerator(t).Service(&sp)
	}
	fw := FirewallChainName(nftgentest.Port("ns", "lb", 443, "10.96.1.2").Name)
	hasFW := func(f *Fragment) (chain *Chain, dropElement bool) {
		for _, c := range f.Chains {
			if c.Name == fw {
				chain = c
			}
		}
		return chain, len(f.Elements[MapFirewallIPs]) > 0
	}
	if c, drop := hasFW(lb(nil, true)); c == nil || !drop || len(c.Rules) != 1 {
		t.Errorf("unparsable only range: firewall chain %v, drop element %v; want a chain that admits nobody", c, drop)
	}
	if c, drop := hasFW(lb([]string{"198.51.100.0/24"}, true)); c == nil || !drop || len(c.Rules) != 2 {
		t.Errorf("one valid, one unparsable range: chain %v, drop %v; want the valid range only", c, drop)
	}
	if c, drop := hasFW(lb([]string{"0.0.0.0/0"}, false)); c != nil || drop {
		t.Errorf("0.0.0.0/0: firewall chain %v, drop element %v; kube-proxy writes none", c, drop)
	}
	if c, drop := hasFW(lb([]string{"2001:db8::/32"}, false)); c != nil || drop {
		t.Errorf("only an IPv6 range: the IPv4 firewall is %v, %v; kube-proxy writes none", c, drop)
	}
}
