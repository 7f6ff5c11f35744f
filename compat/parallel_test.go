package compat

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/svcmodel"
)

// largeState is the table of n Services of four endpoints, every third
// with affinity and every fifth with a node port, with chains that are not
// nftproxy's among them (each a note, whose order the text keeps).
func largeState(t *testing.T, n int) *nftgen.TableState {
	t.Helper()
	g, ports := largePorts(t, n)
	st := g.Ruleset(ports).State()
	var chains []*nftgen.Chain
	for i, c := range st.Chains {
		chains = append(chains, c)
		if i%1000 == 0 {
			chains = append(chains, &nftgen.Chain{Name: fmt.Sprintf("stray-%d", i)})
		}
	}
	st.Chains = chains
	return st
}

// largePorts are the n Service ports of largeState and their generator.
func largePorts(t *testing.T, n int) (*nftgen.Generator, []svcmodel.ServicePortState) {
	t.Helper()
	g, err := nftgen.NewGenerator(nftgen.Config{Family: nftgen.FamilyIPv4, LocalhostNodePorts: true,
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, Node: svcmodel.Node{Name: "node-a"}})
	if err != nil {
		t.Fatal(err)
	}
	ports := make([]svcmodel.ServicePortState, n)
	for i := range ports {
		eps := make([]string, 4)
		for e := range eps {
			eps[e] = fmt.Sprintf("10.244.%d.%d", (i*4+e)>>8, (i*4+e)&0xff)
		}
		ports[i] = port(fmt.Sprintf("svc-%d", i), fmt.Sprintf("10.96.%d.%d", i>>8, i&0xff), eps...)
		if i%3 == 0 {
			ports[i].AffinityTimeoutSeconds = 600 + int32(i)
		}
		if i%5 == 0 {
			ports[i].NodePort = uint16(30000 + i%2000)
		}
	}
	return g, ports
}

// TestParallelBuildMatchesOneBuilder: a table large enough to be rendered
// on several goroutines gives the text, notes and origins one builder
// gives. It fails when the runs are joined out of order.
func TestParallelBuildMatchesOneBuilder(t *testing.T) {
	st := largeState(t, 3000)
	if len(st.Chains) < 2*parallelChains {
		t.Fatalf("only %d chains: the parallel path is not taken", len(st.Chains))
	}
	build := func(workers int) ([]*Table, map[Origin][]Line) {
		b := newBuilder(st, len(st.Chains))
		b.workers = workers
		b.build()
		o := newBuilder(st, len(st.Chains))
		o.workers = workers
		o.origins = map[Origin][]Line{}
		o.build()
		return b.finish(), o.origins
	}
	oneText, oneOrigins := build(1)
	for _, workers := range []int{2, 3, 7} {
		text, origins := build(workers)
		if got, want := Render(text, Options{}), Render(oneText, Options{}); got != want {
			t.Fatalf("%d workers: the text differs from one builder's (%d vs %d bytes)", workers, len(got), len(want))
		}
		if !reflect.DeepEqual(origins, oneOrigins) {
			t.Fatalf("%d workers: the origins differ from one builder's", workers)
		}
	}
	notes := oneText[0].Notes
	if len(notes) < 4 || notes[0] != "chain stray-0 is not nftproxy's" || notes[1] != "chain stray-1000 is not nftproxy's" {
		t.Errorf("notes %q, want one per stray chain in table order", notes)
	}
}
