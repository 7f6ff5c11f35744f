package nftgen

import "fmt"

// This file compares one table of a layout, as the kernel holds it, with
// what an Applied says was written there: the rolling check, which takes
// the place of an hourly full read of every table (see proxier's policy),
// reads and compares one table at a time, so that no check holds up a
// change for longer than one table's read.

// CheckTable compares table t of a's layout (0 the main table, i the shard
// ShardTable(i)) as read from the kernel (live, whose chains outside the
// top levels are digested by digests, made by a.LiveDigests) with what a
// says it holds; shardTop is that shard's top level (Generator.ShardTop),
// unused for the main table. It is the comparison a full sync of a live
// table makes (Reconciler), against the summaries instead of fragments
// generated anew. It returns "" when the table holds exactly that, or else says what
// differs: what the first repairing operation would be.
//
// Chains that nothing reaches in a table too large to list
// (TableState.Unreached) are not seen here, as a full sync does not see
// them either.
func (a *Applied) CheckTable(t int, live *TableState, digests *LiveDigests, shardTop *Fragment, shardMaps []MapSpec) string {
	if live == nil {
		return fmt.Sprintf("table %s is missing", ShardTable(t))
	}
	top, maps := a.Top, a.Maps
	if t > 0 {
		top, maps = shardTop, shardMaps
	}
	r := NewReconciler(live, digests, top, maps)
	// Only what the table holds is made of each summary: at 100,000
	// Services the whole of every one was most of a step's time.
	for _, sum := range a.Services {
		switch {
		case !a.Layout.Sharded():
			r.Add(sum.fragment(), sum)
		case t == 0:
			if main := sum.mainElements(); main != nil {
				r.Add(main, nil)
			}
		case a.Layout.ShardOf(sum.Place) == t:
			_, shard := splitFragment(sum.fragment())
			r.Add(shard, sum)
		}
	}
	tx := r.Transaction()
	if tx == nil {
		return fmt.Sprintf("table %s holds objects nftproxy cannot patch in place", ShardTable(t))
	}
	for _, op := range tx.Ops {
		if op.Kind != OpAddTable && op.Kind != OpAddCounter {
			return fmt.Sprintf("table %s needs %d operations, the first %q", ShardTable(t), len(tx.Ops), op.Text(a.Family))
		}
	}
	if len(tx.Ops) > 0 {
		return fmt.Sprintf("table %s is dormant", ShardTable(t))
	}
	return ""
}

// fragment returns what s records of its fragment as one: its chains by
// name only (their rules are compared by digest, see Reconciler), its sets
// and its map elements.
func (s *FragmentSummary) fragment() *Fragment {
	f := &Fragment{Chains: make([]*Chain, len(s.Chains)), Sets: s.Sets, Elements: map[string][]MapElement{}, Place: s.Place}
	for i := range s.Chains {
		f.Chains[i] = &Chain{Name: s.ChainName(i)}
	}
	for _, e := range s.Elements {
		f.Elements[e.Map] = append(f.Elements[e.Map], e.MapElement)
	}
	return f
}

// mainElements returns the fragment of s's elements that a sharded layout
// keeps in the main table (those of maps that are not IsShardMap), nil
// when it has none.
func (s *FragmentSummary) mainElements() *Fragment {
	var f *Fragment
	for _, e := range s.Elements {
		if IsShardMap(e.Map) {
			continue
		}
		if f == nil {
			f = &Fragment{Elements: map[string][]MapElement{}}
		}
		f.Elements[e.Map] = append(f.Elements[e.Map], e.MapElement)
	}
	return f
}
