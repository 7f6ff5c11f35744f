package nftgen

import (
	"fmt"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// benchPorts returns n ClusterIP service ports with 10 endpoints each.
func benchPorts(n int) []svcmodel.ServicePortState {
	ports := make([]svcmodel.ServicePortState, n)
	for i := range ports {
		eps := make([]string, 10)
		for e := range eps {
			k := i*10 + e
			eps[e] = fmt.Sprintf("10.%d.%d.%d:8080", 128+k>>16, (k>>8)&0xff, k&0xff)
		}
		ports[i] = nftgentest.Port("bench", fmt.Sprintf("svc-%d", i), 80, fmt.Sprintf("10.%d.%d.%d", 96+i>>16, (i>>8)&0xff, i&0xff), eps...)
	}
	return ports
}

// BenchmarkRuleset generates the whole ruleset for 1,000 Services × 10
// endpoints, as a full sync does.
func BenchmarkRuleset(b *testing.B) {
	ports, g := benchPorts(1000), testGenerator("10.244.0.0/16")
	b.ReportAllocs()
	for b.Loop() {
		g.Ruleset(ports)
	}
}

// BenchmarkPlanFull plans the full transaction for 1,000 Services.
func BenchmarkPlanFull(b *testing.B) {
	rs := testGenerator("10.244.0.0/16").Ruleset(benchPorts(1000))
	b.ReportAllocs()
	for b.Loop() {
		PlanFull(rs, nil)
	}
}

// BenchmarkPlanUpdateOneService plans a one-Service change among 1,000.
func BenchmarkPlanUpdateOneService(b *testing.B) {
	ports, g := benchPorts(1001), testGenerator("10.244.0.0/16")
	rs := AppliedFrom(g.Ruleset(ports[:1000]))
	changed := ports[1000]
	b.ReportAllocs()
	for b.Loop() {
		PlanUpdate(rs, map[string]*Fragment{ServiceKey(changed.Name): g.Service(&changed)})
	}
}
