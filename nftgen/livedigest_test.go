package nftgen

import (
	"context"
	"slices"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// compactRead reads fake's tables as a full sync of live tables does:
// the top levels' chains whole, the others omitted and kept as digests.
func compactRead(t *testing.T, fake *Fake, applied *Applied) (*TableState, *LiveDigests) {
	t.Helper()
	digests := applied.LiveDigests(append((&Ruleset{Top: applied.Top}).ChainNames(), ShardTopChainNames()...))
	live, err := fake.ReadCompact(context.Background(), applied.Family, digests.Finish)
	if err != nil {
		t.Fatal(err)
	}
	return live, digests
}

// TestCompactReadListsTopLevelsOnly: a compact read of a sharded layout
// lists only the top levels' chains in each table's state, and the
// inventory made with its digests names every chain each table holds,
// a chain that is not nftproxy's (its name does not pack) included.
func TestCompactReadListsTopLevelsOnly(t *testing.T) {
	g := featureGenerator(t)
	rs := g.Ruleset(nftgentest.FeaturePorts())
	l := TableLayout{Shards: 4, Named: 2}
	fake, applied := shardedOnto(t, g, rs, l)
	if err := fake.Apply(context.Background(), &Transaction{Family: FamilyIPv4, Ops: []Op{{Kind: OpAddChain, Name: "not-nftproxys", Table: ShardTable(3)}}}); err != nil {
		t.Fatal(err)
	}
	live, digests := compactRead(t, fake, applied)
	top := append((&Ruleset{Top: applied.Top}).ChainNames(), ShardTopChainNames()...)
	for _, st := range append([]*TableState{live}, live.Shards...) {
		for _, c := range st.Chains {
			if !slices.Contains(top, c.Name) {
				t.Errorf("table %s lists chain %s; a compact read keeps it as a digest only", st.TableName(), c.Name)
			}
		}
	}
	got := digests.Inventory(live)
	want, err := fake.Inventory(context.Background(), FamilyIPv4, nil)
	if err != nil {
		t.Fatal(err)
	}
	same := func(table string, a, b *Inventory) {
		if a == nil || b == nil {
			t.Fatalf("table %s: inventory %v, want %v", table, a, b)
		}
		x, y := slices.Sorted(slices.Values(a.Chains)), slices.Sorted(slices.Values(b.Chains))
		if !slices.Equal(x, y) {
			t.Errorf("table %s: the inventory names chains\n%v\nthe table holds\n%v", table, x, y)
		}
	}
	same(TableName, got, want)
	if len(got.Shards) != len(want.Shards) {
		t.Fatalf("inventory of %d shards, want %d", len(got.Shards), len(want.Shards))
	}
	for name, sh := range want.Shards {
		same(name, got.Shards[name], sh)
	}
	if !slices.Contains(got.Shards[ShardTable(3)].Chains, "not-nftproxys") {
		t.Errorf("the inventory of %s lacks the chain whose name does not pack", ShardTable(3))
	}
}

// TestDigestsAreKeptPerTable: a Service's chain copied into another shard
// (another program's doing) is another table's chain: the reconcile
// deletes the copy and keeps the Service's own, and the tables end as a
// fresh full sync leaves them.
func TestDigestsAreKeptPerTable(t *testing.T) {
	g := featureGenerator(t)
	rs := g.Ruleset(nftgentest.FeaturePorts())
	l := TableLayout{Shards: 4, Named: 2}
	fake, applied := shardedOnto(t, g, rs, l)
	var key string
	for _, k := range rs.serviceKeys() {
		if len(rs.Services[k].Chains) > 0 {
			key = k
			break
		}
	}
	f := rs.Services[key]
	own := l.ShardOf(f.Place)
	other := own%l.Shards + 1
	copied := f.Chains[0].Name
	if err := fake.Apply(context.Background(), &Transaction{Family: FamilyIPv4, Ops: []Op{{Kind: OpAddChain, Name: copied, Table: ShardTable(other)}}}); err != nil {
		t.Fatal(err)
	}
	live, digests := compactRead(t, fake, applied)
	r := NewLayoutReconciler(live, digests, applied.Top, applied.Maps, g.ShardTops(l), g.ShardMaps(), l)
	for _, k := range rs.serviceKeys() {
		r.AddService(k, rs.Services[k], applied.Services[k])
	}
	tx := r.Transaction()
	if tx == nil {
		t.Fatal("the reconcile gave up")
	}
	var deleted []string
	for _, op := range tx.Ops {
		if op.Kind == OpDeleteChain {
			deleted = append(deleted, op.Table+" "+op.Name)
		}
		if op.Kind != OpAddTable && op.Table != ShardTable(other) {
			t.Errorf("the reconcile touches table %q (%s); only the copy in %s differs", op.Table, op.Text(FamilyIPv4), ShardTable(other))
		}
	}
	if want := []string{ShardTable(other) + " " + copied}; !slices.Equal(deleted, want) {
		t.Errorf("the reconcile deletes chains %q, want %q:\n%s", deleted, want, tx)
	}
	if err := fake.Apply(context.Background(), tx); err != nil {
		t.Fatalf("reconcile: %v\n%s", err, tx)
	}
	if fresh, _ := shardedOnto(t, g, rs, l); fake.Dump(FamilyIPv4) != fresh.Dump(FamilyIPv4) {
		t.Errorf("after the reconcile the tables differ from a fresh full sync's:\n%s\nwant:\n%s", fake.Dump(FamilyIPv4), fresh.Dump(FamilyIPv4))
	}
}

// TestDigestsOfAChainReadTwiceAreTheLast: a read that finds a table
// incomplete lists it whole and reads its chains a second time; what the
// reconcile sees of a chain is then its second reading, once: it is not
// also a stray, and the endpoint maps its first reading read are gone.
func TestDigestsOfAChainReadTwiceAreTheLast(t *testing.T) {
	a := NewApplied(FamilyIPv4, nil, &Fragment{})
	d := a.LiveDigests(nil)
	name := "KUBE-SVC-ABCDEFGHIJKLMNOP"
	first := []Rule{NewRule("", NumgenVmap{Map: EndpointMapName(name), Targets: []string{"KUBE-SEP-ABCDEFGHIJKLMNOP", "KUBE-SEP-BBCDEFGHIJKLMNOP"}})}
	second := []Rule{NewRule("", Verdict{Kind: VerdictGoto, Chain: "KUBE-SEP-ABCDEFGHIJKLMNOP"})}
	d.Finish(TableName, "KUBE-SEP-ABCDEFGHIJKLMNOP", nil)
	d.Finish(TableName, name, first)
	d.Finish(TableName, "KUBE-SEP-BBCDEFGHIJKLMNOP", nil)
	d.Finish(TableName, name, second)
	tab := d.table(TableName)
	if got := tab.chains(false); !slices.Equal(got, []string{"KUBE-SEP-ABCDEFGHIJKLMNOP", "KUBE-SEP-BBCDEFGHIJKLMNOP", name}) {
		t.Errorf("chains recorded: %q, want each once", got)
	}
	if digest, ok := tab.want(name); !ok || digest != a.digest(&Chain{Name: name, Rules: second}) {
		t.Errorf("digest of the chain read twice: %x (found %v), want the second reading's", digest, ok)
	}
	if slices.Contains(tab.chains(true), name) {
		t.Errorf("the chain read twice is unwanted after it was wanted: %q", tab.chains(true))
	}
	if maps := tab.maps[name]; maps != nil {
		t.Errorf("endpoint maps of the chain's second reading: %q, want none", maps)
	}
}
