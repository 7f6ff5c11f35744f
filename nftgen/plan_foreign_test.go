package nftgen

import (
	"context"
	"testing"
)

// TestFullSyncReplacesAForeignTableAtomically: a table of nftproxy's name
// that is kube-proxy's nftables mode's (its own chain names) is deleted in
// the transaction that creates nftproxy's, so that one of the two rulesets
// acts at any time; nftproxy's own table is never deleted.
func TestFullSyncReplacesAForeignTableAtomically(t *testing.T) {
	ctx := context.Background()
	g, err := NewGenerator(Config{Family: FamilyIPv4})
	if err != nil {
		t.Fatal(err)
	}
	desired := g.Ruleset(nil)
	fake := NewFake()
	foreign := &Transaction{Family: FamilyIPv4, Ops: []Op{{Kind: OpAddTable},
		{Kind: OpAddChain, Name: "filter-input", Base: &BaseChain{Type: FilterType, Hook: "input", Priority: -110}},
		{Kind: OpAddChain, Name: "services"}, {Kind: OpAddChain, Name: "mark-for-masquerade"}}}
	if err := fake.Apply(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	inv, err := fake.Inventory(ctx, FamilyIPv4, nil)
	if err != nil || inv == nil || !inv.Foreign() {
		t.Fatalf("kube-proxy's table not seen as foreign: %+v %v", inv, err)
	}
	tx := PlanFull(desired, inv)
	if tx.Ops[0].Kind != OpDeleteTable || tx.Ops[1].Kind != OpAddTable {
		t.Fatalf("the full sync does not start by replacing the table: %s, %s", tx.Ops[0].Kind, tx.Ops[1].Kind)
	}
	if err := fake.Apply(ctx, tx); err != nil {
		t.Fatal(err)
	}
	inv, err = fake.Inventory(ctx, FamilyIPv4, nil)
	if err != nil || inv.Foreign() {
		t.Fatalf("after the sync the table is still foreign: %+v %v", inv, err)
	}
	for _, c := range inv.Chains {
		if c == "services" || c == "mark-for-masquerade" {
			t.Errorf("kube-proxy's chain %s left in nftproxy's table", c)
		}
	}
	if again := PlanFull(desired, inv); again.Ops[0].Kind == OpDeleteTable {
		t.Error("nftproxy's own table is deleted by the next full sync")
	}
}
