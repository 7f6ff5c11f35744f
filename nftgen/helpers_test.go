package nftgen

import (
	"net/netip"
)

func testGenerator(cidrs ...string) *Generator {
	cfg := Config{Family: FamilyIPv4}
	for _, c := range cidrs {
		cfg.ClusterCIDRs = append(cfg.ClusterCIDRs, netip.MustParsePrefix(c))
	}
	g, err := NewGenerator(cfg)
	if err != nil {
		panic(err)
	}
	return g
}
