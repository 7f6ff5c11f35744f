package nftgen

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// shardedOnto writes rs into a Fake in layout l, as a full sync does, and
// returns the Fake with what a syncer would have recorded of it.
func shardedOnto(t *testing.T, g *Generator, rs *Ruleset, l TableLayout) (*Fake, *Applied) {
	t.Helper()
	fake := NewFake()
	parts := SplitRuleset(rs, l, g.ShardTops(l), g.ShardMaps())
	if err := fake.Apply(context.Background(), PlanFullSharded(parts, nil, nil)); err != nil {
		t.Fatalf("full sync: %v", err)
	}
	applied := AppliedFrom(rs)
	applied.Layout = l
	return fake, applied
}

// checkTables runs CheckTable on every table of the layout and returns
// what each says.
func checkTables(t *testing.T, g *Generator, fake *Fake, applied *Applied) []string {
	t.Helper()
	keep := append((&Ruleset{Top: applied.Top}).ChainNames(), ShardTopChainNames()...)
	tables := 1
	if applied.Layout.Sharded() {
		tables += applied.Layout.Shards
	}
	out := make([]string, tables)
	for i := range tables {
		digests := applied.LiveDigests(keep)
		live, err := fake.ReadTable(context.Background(), applied.Family, i, digests.Finish)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = applied.CheckTable(i, live, digests, g.ShardTop(applied.Layout, i), g.ShardMaps())
	}
	return out
}

// TestCheckTableFindsTamperingInItsTableOnly: every table of an untouched
// layout (single and sharded, with every feature) checks clean; each kind
// of tampering is found by the check of the table it is in, and by no
// other.
func TestCheckTableFindsTamperingInItsTableOnly(t *testing.T) {
	g := featureGenerator(t)
	ports := nftgentest.FeaturePorts()
	rs := g.Ruleset(ports)
	for _, l := range []TableLayout{{}, {Shards: 4, Named: 2}} {
		fake, applied := shardedOnto(t, g, rs, l)
		for i, got := range checkTables(t, g, fake, applied) {
			if got != "" {
				t.Errorf("%d shards, untouched table %d: %s", l.Shards, i, got)
			}
		}
	}

	l := TableLayout{Shards: 4, Named: 2}
	key := ServiceKey(ports[0].Name)
	frag := rs.Services[key]
	shard := l.ShardOf(frag.Place)
	stray := MapElement{Key: MapKey{Addr: netip.MustParseAddr("10.99.9.9"), Proto: 6, Port: 80}, Verdict: Verdict{Kind: VerdictDrop}}
	var dispatch MapElement
	for _, e := range frag.Elements[MapServiceIPs] {
		dispatch = e
	}
	// An element of a map whose elements stay in the main table (the
	// filter side's).
	var mainMap string
	var mainElement MapElement
	for _, m := range rs.Maps {
		if els := rs.Elements(m.Name); !IsShardMap(m.Name) && len(els) > 0 && mainMap == "" {
			mainMap, mainElement = m.Name, els[0]
		}
	}
	if mainMap == "" {
		t.Fatal("no map of the main table has elements")
	}
	for _, tc := range []struct {
		name  string
		table int
		ops   []Op
	}{
		{"a Service chain flushed", shard, []Op{{Kind: OpFlushChain, Name: frag.Chains[0].Name}}},
		{"a dispatch element deleted", shard, []Op{{Kind: OpDeleteElement, Name: MapServiceIPs, Element: &dispatch}}},
		{"a stray chain added", shard, []Op{{Kind: OpAddChain, Name: "stray"}}},
		{"an element added to the main table's empty dispatch map", 0, []Op{{Kind: OpAddElement, Name: MapServiceIPs, Element: &stray}}},
		{"an element of the main table's deleted", 0, []Op{{Kind: OpDeleteElement, Name: mainMap, Element: &mainElement}}},
		{"a top-level chain flushed", 0, []Op{{Kind: OpFlushChain, Name: ChainServices}}},
		{"a shard's top-level chain flushed", shard, []Op{{Kind: OpFlushChain, Name: ChainServices}}},
		{"a shard table deleted", shard, []Op{{Kind: OpDeleteTable}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, applied := shardedOnto(t, g, rs, l)
			for _, op := range tc.ops {
				op.Table = opTable(tc.table)
				if err := fake.Apply(context.Background(), &Transaction{Family: FamilyIPv4, Ops: []Op{op}}); err != nil {
					t.Fatalf("tamper %s: %v", op.Text(FamilyIPv4), err)
				}
			}
			for i, got := range checkTables(t, g, fake, applied) {
				switch {
				case i == tc.table && got == "":
					t.Errorf("the check of table %d did not find it", i)
				case i == tc.table && !strings.Contains(got, ShardTable(i)):
					t.Errorf("the check of table %d says %q, without the table's name", i, got)
				case i != tc.table && got != "":
					t.Errorf("the check of table %d, not tampered with, says %s", i, got)
				}
			}
		})
	}
}
