package nftgen

import (
	"net/netip"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"

	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// featureGenerator is an IPv4 generator for node "node-a" in zone "z1",
// with localhost node ports on.
func featureGenerator(t testing.TB) *Generator {
	g, err := NewGenerator(Config{
		Family:             FamilyIPv4,
		ClusterCIDRs:       []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		Node:               svcmodel.Node{Name: "node-a", Labels: map[string]string{v1.LabelTopologyZone: "z1"}},
		NodeIP:             netip.MustParseAddr("192.0.2.1"),
		NodeIPs:            []netip.Addr{netip.MustParseAddr("192.0.2.1")},
		LocalhostNodePorts: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGenerateAllFeatures(t *testing.T) {
	golden(t, "features.nft", featureGenerator(t).Ruleset(nftgentest.FeaturePorts()).Text())
}
