package kernel

import (
	"net/netip"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"

	"github.com/nftproxy/nftproxy/nftgen"
)

// featureGenerator is the IPv4 generator nftgentest.FeaturePorts are made
// for: node "node-a" in zone "z1", localhost node ports on.
func featureGenerator(t testing.TB) *nftgen.Generator {
	return mustGenerator(t, nftgen.Config{
		Family:             nftgen.FamilyIPv4,
		ClusterCIDRs:       []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		Node:               svcmodel.Node{Name: "node-a", Labels: map[string]string{v1.LabelTopologyZone: "z1"}},
		NodeIP:             netip.MustParseAddr("192.0.2.1"),
		NodeIPs:            []netip.Addr{netip.MustParseAddr("192.0.2.1")},
		LocalhostNodePorts: true,
	})
}

// testGenerator6 is its IPv6 counterpart, for nftgentest.FeaturePortsOf(true).
func testGenerator6(t testing.TB) *nftgen.Generator {
	return mustGenerator(t, nftgen.Config{
		Family:       nftgen.FamilyIPv6,
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:10:244::/64")},
		Node:         svcmodel.Node{Name: "node-a"},
		NodeIP:       netip.MustParseAddr("2001:db8::1"),
		NodeIPs:      []netip.Addr{netip.MustParseAddr("2001:db8::1")},
	})
}

// testGenerator is a plain IPv4 generator with the given cluster CIDRs.
func testGenerator(cidrs ...string) *nftgen.Generator {
	cfg := nftgen.Config{Family: nftgen.FamilyIPv4}
	for _, c := range cidrs {
		cfg.ClusterCIDRs = append(cfg.ClusterCIDRs, netip.MustParsePrefix(c))
	}
	g, err := nftgen.NewGenerator(cfg)
	if err != nil {
		panic(err)
	}
	return g
}

func mustGenerator(t testing.TB, cfg nftgen.Config) *nftgen.Generator {
	t.Helper()
	g, err := nftgen.NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
