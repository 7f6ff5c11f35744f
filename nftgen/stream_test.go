package nftgen

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// scaleRuleset is n Services with eps endpoints each, plus the features.
func scaleRuleset(t testing.TB, n, eps int) *Ruleset {
	states := nftgentest.FeaturePorts()
	for i := range n {
		var addrs []string
		for j := range eps {
			addrs = append(addrs, fmt.Sprintf("10.244.%d.%d:8080", j, 1+i%250))
		}
		states = append(states, nftgentest.Port("scale", fmt.Sprintf("s%d", i), 80, fmt.Sprintf("10.97.%d.%d", i/250, 1+i%250), addrs...))
	}
	return featureGenerator(t).Ruleset(states)
}

// TestPlanColdBuildsTheSameTableUnhookedUntilTheEnd: the chunks of a
// streamed cold sync build exactly what one full transaction builds; no
// chunk but the last adds a base chain, and the last adds all of them and
// nothing else; chunks stay near their size.
func TestPlanColdBuildsTheSameTableUnhookedUntilTheEnd(t *testing.T) {
	rs := scaleRuleset(t, 300, 10)
	full := NewFake()
	if err := full.Apply(context.Background(), PlanFull(rs, nil)); err != nil {
		t.Fatal(err)
	}
	const maxOps = 1000
	txs := slices.Collect(coldChunks(rs, maxOps))
	if len(txs) < 5 {
		t.Fatalf("%d transactions, want several", len(txs))
	}
	streamed := NewFake()
	for i, tx := range txs {
		last := i == len(txs)-1
		for _, op := range tx.Ops {
			if op.Kind == OpAddChain && (op.Base != nil) != last {
				t.Fatalf("transaction %d of %d: %s; base chains belong in the last transaction, and only they", i+1, len(txs), op.Text(tx.Family))
			}
		}
		if len(tx.Ops) > 2*maxOps {
			t.Errorf("transaction %d has %d operations, want about %d", i+1, len(tx.Ops), maxOps)
		}
		inv, _ := streamed.Inventory(context.Background(), FamilyIPv4, nil)
		if inv.Hooked(rs) {
			t.Fatalf("the table is hooked before transaction %d of %d", i+1, len(txs))
		}
		if err := streamed.Apply(context.Background(), tx); err != nil {
			t.Fatalf("transaction %d: %v", i+1, err)
		}
	}
	inv, _ := streamed.Inventory(context.Background(), FamilyIPv4, nil)
	if !inv.Hooked(rs) {
		t.Error("the table is not hooked after the last transaction")
	}
	if got, want := streamed.Dump(FamilyIPv4), full.Dump(FamilyIPv4); got != want {
		t.Errorf("streamed table differs from the one-transaction table")
	}
}

// coldChunks are the transactions of a streamed cold sync of desired, in
// chunks of about maxOps operations, as ColdBuilder cuts them.
func coldChunks(desired *Ruleset, maxOps int) iter.Seq[*Transaction] {
	return func(yield func(*Transaction) bool) {
		b := NewColdBuilder(desired.Family, desired.Maps, desired.Top, maxOps)
		for _, k := range desired.serviceKeys() {
			if tx := b.Add(desired.Services[k]); tx != nil && !yield(tx) {
				return
			}
		}
		for _, tx := range b.Finish() {
			if !yield(tx) {
				return
			}
		}
	}
}
