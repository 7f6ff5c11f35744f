package nftgen

import "slices"

// SplitRuleset returns the ruleset of each table of layout l, index 0 the
// main table and i the shard ShardTable(i): the main table keeps rs's maps
// and top level and every Service's elements of the maps that stay there;
// a shard holds shardTop's chains, shardMaps and its Services' chains, sets
// and dispatch elements (see TableLayout). The fragments share their
// chains and elements with rs. In the single layout it returns rs alone.
func SplitRuleset(rs *Ruleset, l TableLayout, shardTops []*Fragment, shardMaps []MapSpec) []*Ruleset {
	if !l.Sharded() {
		return []*Ruleset{rs}
	}
	out := make([]*Ruleset, l.Shards+1)
	out[0] = &Ruleset{Family: rs.Family, Maps: rs.Maps, Top: rs.Top, Services: make(map[string]*Fragment, len(rs.Services))}
	for i := 1; i <= l.Shards; i++ {
		out[i] = &Ruleset{Family: rs.Family, Table: ShardTable(i), Maps: shardMaps, Top: shardTops[i], Services: map[string]*Fragment{}}
	}
	for key, f := range rs.Services {
		main, shard := splitFragment(f)
		out[0].Services[key] = main
		out[l.ShardOf(f.Place)].Services[key] = shard
	}
	return out
}

// splitFragment returns the parts of a Service fragment that live in the
// main table (the elements of the maps that stay there) and in its shard
// (its chains, sets and dispatch elements). They share f's chains and
// elements.
func splitFragment(f *Fragment) (main, shard *Fragment) {
	main = &Fragment{Elements: map[string][]MapElement{}, HealthCheckRules: f.HealthCheckRules, Place: f.Place}
	shard = &Fragment{Chains: f.Chains, Sets: f.Sets, Elements: map[string][]MapElement{}, Place: f.Place}
	for m, els := range f.Elements {
		if IsShardMap(m) {
			shard.Elements[m] = els
		} else {
			main.Elements[m] = els
		}
	}
	return main, shard
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

// LayoutReconciler is a Reconciler of every table of a layout: the main
// table and each shard are compared with their live counterparts on their
// own, and the transaction patches them all at once. It gives up (nil
// transaction) where a Reconciler would, and when the live tables are not
// the layout's (a shard missing or one too many: the layout changed), so
// that the caller rewrites them (PlanFullSharded).
type LayoutReconciler struct {
	layout TableLayout
	// tables are the reconcilers of the main table (0) and each shard.
	tables []*Reconciler
	failed bool
}

// NewLayoutReconciler returns a LayoutReconciler of the live tables (live
// is the main table's state with its shards, as Dataplane.ReadCompact
// reads it) towards layout l with these top levels and maps.
func NewLayoutReconciler(live *TableState, digests *LiveDigests, top *Fragment, maps []MapSpec, shardTops []*Fragment, shardMaps []MapSpec, l TableLayout) *LayoutReconciler {
	r := &LayoutReconciler{layout: l, tables: []*Reconciler{NewReconciler(live, digests, top, maps)}}
	shards := map[string]*TableState{}
	if live != nil {
		for _, sh := range live.Shards {
			shards[sh.Name] = sh
		}
	}
	want := 0
	if l.Sharded() {
		want = l.Shards
	}
	if len(shards) != want {
		r.failed = true
		return r
	}
	for i := 1; i <= want; i++ {
		sh := shards[ShardTable(i)]
		if sh == nil {
			r.failed = true
			return r
		}
		r.tables = append(r.tables, NewReconciler(sh, digests, shardTops[i], shardMaps))
	}
	return r
}

// AddService adds the fragment of the Service port key (or a part of it,
// as Reconciler.Add takes it) to the reconcilers of its tables.
func (r *LayoutReconciler) AddService(key string, f *Fragment, sum *FragmentSummary) {
	if r.failed || f == nil {
		return
	}
	if !r.layout.Sharded() {
		r.tables[0].Add(f, sum)
		return
	}
	main, shard := splitFragment(f)
	r.tables[0].Add(main, nil)
	r.tables[r.layout.ShardOf(f.Place)].Add(shard, sum)
}

// Transaction returns the transaction that patches every table, empty when
// none differs, or nil when they cannot be patched in place.
func (r *LayoutReconciler) Transaction() *Transaction {
	if r.failed {
		return nil
	}
	var tx *Transaction
	for i, rec := range r.tables {
		sub := rec.Transaction()
		if sub == nil {
			return nil
		}
		if tx == nil {
			tx = &Transaction{Family: sub.Family}
		}
		for _, op := range sub.Ops {
			op.Table = opTable(i)
			tx.Ops = append(tx.Ops, op)
		}
	}
	return tx
}
