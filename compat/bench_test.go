package compat

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	"github.com/nftproxy/nftproxy/nftgen"
)

// BenchmarkRender renders the iptables-save view of 1,000 Services × 10
// endpoints from a table state, as `nftproxy save` does after reading the
// kernel.
func BenchmarkRender(b *testing.B) {
	g, err := nftgen.NewGenerator(nftgen.Config{Family: nftgen.FamilyIPv4,
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, Node: svcmodel.Node{Name: "node-a"}})
	if err != nil {
		b.Fatal(err)
	}
	ports := make([]svcmodel.ServicePortState, 1000)
	for i := range ports {
		eps := make([]string, 10)
		for e := range eps {
			eps[e] = fmt.Sprintf("10.244.%d.%d", (i*10+e)>>8, (i*10+e)&0xff)
		}
		ports[i] = port(fmt.Sprintf("svc-%d", i), fmt.Sprintf("10.96.%d.%d", i>>8, i&0xff), eps...)
	}
	st := g.Ruleset(ports).State()
	b.ReportAllocs()
	for b.Loop() {
		Render(Build(st), Options{})
	}
}
