package nftgen

import "slices"

// SplitRuleset returns the ruleset of each table of layout l, index 0 the
// main table and i the shard ShardTable(i): the main table keeps rs's maps
// and top level and every Service's elements of the maps that stay there;
// a shard holds shardTop's chains, shardMaps and its Services' chains, sets
// and dispatch elements (see TableLayout). The fragments share their
// chains and elements with rs. In the single layout it returns rs alone.
func SplitRuleset(rs *Ruleset, l TableLayout, shardTop *Fragment, shardMaps []MapSpec) []*Ruleset {
	if !l.Sharded() {
		return []*Ruleset{rs}
	}
	out := make([]*Ruleset, l.Shards+1)
	out[0] = &Ruleset{Family: rs.Family, Maps: rs.Maps, Top: rs.Top, Services: make(map[string]*Fragment, len(rs.Services))}
	for i := 1; i <= l.Shards; i++ {
		out[i] = &Ruleset{Family: rs.Family, Maps: shardMaps, Top: shardTop, Services: map[string]*Fragment{}}
	}
	for key, f := range rs.Services {
		main := &Fragment{Elements: map[string][]MapElement{}, HealthCheckRules: f.HealthCheckRules}
		shard := &Fragment{Chains: f.Chains, Sets: f.Sets, Elements: map[string][]MapElement{}}
		for m, els := range f.Elements {
			if IsShardMap(m) {
				shard.Elements[m] = els
			} else {
				main.Elements[m] = els
			}
		}
		out[0].Services[key] = main
		out[l.ShardOf(key)].Services[key] = shard
	}
	return out
}

// PlanFullSharded is PlanFull for every table of a layout at once, in one
// transaction: parts are SplitRuleset's rulesets and existing[i] what
// table i holds (nil if it does not exist). Shard tables that exist but
// are not part of the layout (stray, named in strayShards) are deleted in
// the same transaction, so that a node moves between layouts, single
// included, with no moment in which a Service is in neither table or in
// both.
func PlanFullSharded(parts []*Ruleset, existing []*Inventory, strayShards []string) *Transaction {
	tx := &Transaction{Family: parts[0].Family}
	for i, part := range parts {
		var inv *Inventory
		if i < len(existing) {
			inv = existing[i]
		}
		sub := PlanFull(part, inv)
		table := opTable(i)
		for j := range sub.Ops {
			sub.Ops[j].Table = table
		}
		tx.Ops = append(tx.Ops, sub.Ops...)
	}
	for _, name := range slices.Sorted(slices.Values(strayShards)) {
		tx.Ops = append(tx.Ops, Op{Kind: OpDeleteTable, Table: name})
	}
	return tx
}

// opTable is Op.Table of table i: empty for the main table.
func opTable(i int) string {
	if i == 0 {
		return ""
	}
	return ShardTable(i)
}

// opTableOfMap is Op.Table of the elements a fragment in shard adds to
// map name.
func opTableOfMap(shard int, name string) string {
	if IsShardMap(name) {
		return opTable(shard)
	}
	return ""
}
