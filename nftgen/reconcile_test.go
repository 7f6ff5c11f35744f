package nftgen

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// reconcileOnto plans the reconcile of fake's table towards rs and applies
// it; it returns the transaction.
func reconcileOnto(t *testing.T, fake *Fake, rs *Ruleset) *Transaction {
	t.Helper()
	ctx := context.Background()
	live, _ := fake.Read(ctx, rs.Family)
	tx := PlanReconcile(rs, live)
	if tx == nil {
		t.Fatal("PlanReconcile gave up on a table it should patch")
	}
	if byDigest := reconcileByDigests(t, fake, rs); byDigest == nil || byDigest.String() != tx.String() {
		t.Errorf("the reconcile by digests differs from the one by rules:\n%s\nby rules:\n%s", byDigest, tx)
	}
	if err := fake.Apply(ctx, tx); err != nil {
		t.Fatalf("reconcile: %v\n%s", err, tx)
	}
	return tx
}

// reconcileByDigests plans the reconcile of fake's table towards rs as a
// full sync of a live table does: the table read with only digests of its
// chains outside the top level, each Service's fragment compared with its
// summary.
func reconcileByDigests(t *testing.T, fake *Fake, rs *Ruleset) *Transaction {
	t.Helper()
	applied := NewApplied(rs.Family, rs.Maps, rs.Top)
	digests := applied.LiveDigests((&Ruleset{Top: rs.Top}).ChainNames())
	live, err := fake.ReadCompact(context.Background(), rs.Family, digests.Finish)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range live.Chains {
		if !slices.ContainsFunc(rs.Top.Chains, func(top *Chain) bool { return top.Name == c.Name }) {
			t.Errorf("chain %s was listed; the read keeps it as a digest only", c.Name)
		}
	}
	r := NewReconciler(live, digests, rs.Top, rs.Maps)
	for _, k := range rs.serviceKeys() {
		f := rs.Services[k]
		r.Add(f, applied.Summarize(f))
	}
	return r.Transaction()
}

// TestReconcileUntouchedTableIsEmpty: a table that holds the desired
// rules needs no commit.
func TestReconcileUntouchedTableIsEmpty(t *testing.T) {
	rs := featureGenerator(t).Ruleset(nftgentest.FeaturePorts())
	fake := applyFull(t, rs)
	if tx := reconcileOnto(t, fake, rs); !tx.Empty() {
		t.Errorf("reconcile of an untouched table sends %d operations:\n%s", len(tx.Ops), tx)
	}
}

// TestReconcileRepairsTamperingAndFollowsChanges tampers with a live table
// and changes the desired rules: the reconcile must leave exactly what a
// full sync onto an empty table leaves, and touch only what differs.
func TestReconcileRepairsTamperingAndFollowsChanges(t *testing.T) {
	g := testGenerator("10.244.0.0/16")
	ports := nftgentest.ManyPorts(50)
	old := g.Ruleset(ports)
	fake := applyFull(t, old)
	ctx := context.Background()

	// Tampering: a service chain flushed, a dispatch element deleted, a
	// stray chain and a stray element added.
	svcChain := old.Services[ServiceKey(ports[3].Name)].Chains[0].Name
	el := old.Elements(MapServiceIPs)[7]
	stray := MapElement{Key: MapKey{Addr: netip.MustParseAddr("10.99.9.9"), Proto: 6, Port: 80}, Verdict: Verdict{Kind: VerdictGoto, Chain: "stray"}}
	for _, op := range []Op{
		{Kind: OpFlushChain, Name: svcChain},
		{Kind: OpDeleteElement, Name: MapServiceIPs, Element: &el},
		{Kind: OpAddChain, Name: "stray"},
		{Kind: OpAddElement, Name: MapServiceIPs, Element: &stray},
	} {
		if err := fake.Apply(ctx, &Transaction{Family: FamilyIPv4, Ops: []Op{op}}); err != nil {
			t.Fatalf("tamper %s: %v", op.Text(FamilyIPv4), err)
		}
	}
	// Desired: one Service gone, one added, one with fewer endpoints.
	next := append(ports[1:], nftgentest.Port("ns", "new", 80, "10.100.0.1", "10.244.200.1:80", "10.244.200.2:80"))
	next[10].Endpoints = next[10].Endpoints[:1]
	rs := g.Ruleset(next)

	tx := reconcileOnto(t, fake, rs)
	if got, want := fake.Dump(FamilyIPv4), applyFull(t, rs).Dump(FamilyIPv4); got != want {
		t.Errorf("after the reconcile the table differs from a fresh full sync:\n%s\nwant:\n%s", got, want)
	}
	// Untouched Services are not rewritten: far fewer operations than
	// the full sync's.
	if full := len(PlanFull(rs, nil).Ops); len(tx.Ops)*4 > full {
		t.Errorf("reconcile sent %d operations, a full sync %d; want only the differences", len(tx.Ops), full)
	}
	if again := reconcileOnto(t, fake, rs); !again.Empty() {
		t.Errorf("a second reconcile sends %d operations:\n%s", len(again.Ops), again)
	}
}

// TestReconcileRefillsChainsTheReadDidNotReach: in a table too large to
// list, the chains of a Service chain another program flushed are not
// reached by the read; the reconcile must empty them before refilling
// them, not add their rules a second time.
func TestReconcileRefillsChainsTheReadDidNotReach(t *testing.T) {
	g := testGenerator("10.244.0.0/16")
	ports := nftgentest.ManyPorts(5)
	rs := g.Ruleset(ports)
	fake := applyFull(t, rs)
	ctx := context.Background()
	frag := rs.Services[ServiceKey(ports[2].Name)]
	svcChain := frag.Chains[0].Name
	if err := fake.Apply(ctx, &Transaction{Family: FamilyIPv4, Ops: []Op{{Kind: OpFlushChain, Name: svcChain}}}); err != nil {
		t.Fatal(err)
	}
	live, _ := fake.Read(ctx, FamilyIPv4)
	unreached := map[string]bool{}
	for _, c := range frag.Chains[1:] {
		unreached[c.Name] = true
	}
	live.Chains = slices.DeleteFunc(live.Chains, func(c *Chain) bool { return unreached[c.Name] })
	live.Unreached = len(unreached)
	tx := PlanReconcile(rs, live)
	if tx == nil {
		t.Fatal("PlanReconcile gave up")
	}
	if err := fake.Apply(ctx, tx); err != nil {
		t.Fatalf("reconcile: %v\n%s", err, tx)
	}
	if got, want := fake.Dump(FamilyIPv4), applyFull(t, rs).Dump(FamilyIPv4); got != want {
		t.Errorf("after the reconcile the table differs from a fresh full sync:\n%s\nwant:\n%s", got, want)
	}
	if again := reconcileOnto(t, fake, rs); !again.Empty() {
		t.Errorf("a second reconcile sends %d operations:\n%s", len(again.Ops), again)
	}
}

// TestReconcileGivesUpOnWhatItCannotPatch: objects nftproxy cannot decode
// and base chains declared differently need a rewrite.
func TestReconcileGivesUpOnWhatItCannotPatch(t *testing.T) {
	rs := featureGenerator(t).Ruleset(nftgentest.FeaturePorts())
	fake := applyFull(t, rs)
	ctx := context.Background()

	live, _ := fake.Read(ctx, FamilyIPv4)
	live.Unknown = []string{"rule in chain x: unknown expression"}
	if tx := PlanReconcile(rs, live); tx != nil {
		t.Errorf("reconcile over undecodable objects = %d operations, want nil (rewrite)", len(tx.Ops))
	}

	if tx := PlanReconcile(rs, nil); tx != nil {
		t.Error("reconcile without a live table must give up")
	}
}

// TestReconcileRewritesEndpointMapChains: a chain that picks from a numgen
// map is kept while its rule and endpoint map are unchanged (the Fake holds
// endpoint maps as the kernel does), an endpoint map no chain reads is
// deleted, and a chain whose live rule reads a map of another name (one an
// older nftproxy named) is rewritten and that map deleted before the new
// rule creates its own.
func TestReconcileRewritesEndpointMapChains(t *testing.T) {
	g := testGenerator("10.244.0.0/16")
	var eps []string
	for i := range CascadeMaxEndpoints + 1 {
		eps = append(eps, fmt.Sprintf("10.244.%d.%d:80", i/200, i%200+1))
	}
	rs := g.Ruleset([]svcmodel.ServicePortState{nftgentest.Port("ns", "big", 80, "10.96.0.1", eps...)})
	fake := applyFull(t, rs)
	ctx := context.Background()
	count := func(tx *Transaction, stray string) (flushed, deleted int) {
		for _, op := range tx.Ops {
			switch {
			case op.Kind == OpFlushChain:
				flushed++
			case op.Kind == OpDeleteSet && op.Name == stray:
				deleted++
			}
		}
		return flushed, deleted
	}
	live, _ := fake.Read(ctx, FamilyIPv4)
	if tx := PlanReconcile(rs, live); tx == nil || !tx.Empty() {
		t.Fatalf("reconcile of the untouched table: %v", tx)
	}
	live.SetNames = append(live.SetNames, EndpointMapPrefix+"0123")
	tx := PlanReconcile(rs, live)
	if tx == nil {
		t.Fatal("reconcile gave up")
	}
	if flushed, deleted := count(tx, EndpointMapPrefix+"0123"); flushed != 0 || deleted != 1 {
		t.Errorf("stray endpoint map: flushed %d chains and deleted it %d times; want 0 and 1:\n%s", flushed, deleted, tx)
	}
	// The service chain's rule reads the stray map instead.
	for _, c := range live.Chains {
		c.Rules = slices.Clone(c.Rules) // the Fake shares them with rs
		for i := range c.Rules {
			c.Rules[i].Stmts = slices.Clone(c.Rules[i].Stmts)
			for j, st := range c.Rules[i].Stmts {
				if v, ok := st.(NumgenVmap); ok {
					v.Map = EndpointMapPrefix + "0123"
					c.Rules[i].Stmts[j] = v
				}
			}
		}
	}
	if tx = PlanReconcile(rs, live); tx == nil {
		t.Fatal("reconcile gave up")
	}
	if flushed, deleted := count(tx, EndpointMapPrefix+"0123"); flushed != 1 || deleted != 1 {
		t.Errorf("renamed endpoint map: flushed %d chains and deleted it %d times; want 1 and 1:\n%s", flushed, deleted, tx)
	}
}

// TestReconcileRepairsTheTableAndBaseChains: what another process can
// change about the table itself is patched too: a dormant table is made
// active (the table operation alone), a base chain's drop policy is set
// back to accept in place, and a base chain at another priority is made
// anew in the same transaction.
func TestReconcileRepairsTheTableAndBaseChains(t *testing.T) {
	rs := featureGenerator(t).Ruleset(nftgentest.FeaturePorts())
	fake := applyFull(t, rs)
	ctx := context.Background()
	base := func(live *TableState) *Chain {
		for _, c := range live.Chains {
			if c.Base != nil {
				return c
			}
		}
		t.Fatal("no base chain")
		return nil
	}

	live, _ := fake.Read(ctx, FamilyIPv4)
	if tx := PlanReconcile(rs, live); !tx.Empty() {
		t.Fatalf("reconcile of the applied table = %d operations", len(tx.Ops))
	}
	live.Dormant = true
	if tx := PlanReconcile(rs, live); tx == nil || len(tx.Ops) != 1 || tx.Ops[0].Kind != OpAddTable {
		t.Errorf("reconcile of a dormant table = %v, want the table operation alone", tx)
	}

	live, _ = fake.Read(ctx, FamilyIPv4)
	c := base(live)
	b := *c.Base
	b.Drop = true
	c.Base = &b
	if tx := PlanReconcile(rs, live); tx == nil || len(tx.Ops) != 2 || tx.Ops[1].Kind != OpAddChain || tx.Ops[1].Name != c.Name {
		t.Errorf("reconcile of a base chain with a drop policy = %v, want the chain added again", tx)
	}

	live, _ = fake.Read(ctx, FamilyIPv4)
	c = base(live)
	b = *c.Base
	b.Priority += 5
	c.Base = &b
	tx := PlanReconcile(rs, live)
	if tx == nil || tx.Count(OpDeleteChain) != 1 || tx.Count(OpFlushChain) != 1 || tx.Count(OpAddChain) != 1 || tx.Count(OpAddRule) != len(c.Rules) {
		t.Errorf("reconcile of a base chain at another priority = %v, want it flushed, deleted, added and refilled", tx)
	}
}
