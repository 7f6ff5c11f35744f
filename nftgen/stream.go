package nftgen

// ChunkOps is the smallest number of operations of one transaction of a
// streamed cold sync: about 3.5 MB of netlink messages, so that neither
// nftproxy nor the kernel holds the whole ruleset as messages at once.
// (Measured at 30,000 Services: 32,768 took as long and 15 MiB more peak
// RSS.) Chunks grow with the table (see chunkGrowth).
const ChunkOps = 16384

// chunkGrowth makes a chunk at least 1/chunkGrowth of the operations sent
// before it. Every commit walks every chain of the namespace (about 73 ns a
// chain on the test machine) while a chunk's operations cost about 5 us
// each, so with fixed chunks the walks grow quadratically: 100,000
// Services took 262 commits and 76 s with chunks of 16,384 operations, 56 s
// with chunks of at least a 48th of what went before (about a twelfth of
// the chains so far: the walk stays under a fifth of each commit), for 15%
// more peak memory; at 30,000 Services the two are within the noise.
const chunkGrowth = 48

// presizeMaxOps bounds the operations a new chunk makes room for ahead.
const presizeMaxOps = 1 << 18

// ColdBuilder cuts the operations that build a new table into transactions
// of about maxOps operations (more as the table grows), from fragments
// given one at a time, so that
// neither the ruleset nor its operations need to exist whole at once. The
// table gets no base chain until the last transaction, so nothing of it is
// hooked up, no packet sees it and the kernel validates nothing while it is
// being built; the last, small transaction adds the base chains and their
// rules, and the kernel validates the whole graph once. A fragment's
// chains, sets, rules and map elements stay in one transaction. If a chunk
// fails, the table is left unhooked: the next full sync deletes it and
// starts again (see Hooked).
type ColdBuilder struct {
	maps []MapSpec
	base []*Chain
	// baseTables is Op.Table of each base chain.
	baseTables []string
	// layout places a Service's chains, sets and dispatch elements
	// (AddService); shardMaps are a shard table's maps.
	layout    TableLayout
	shardMaps []MapSpec
	maxOps    int
	cur       *Transaction
	// sent counts the operations of the transactions returned so far.
	sent int
}

// NewColdBuilder starts the table of family f with its maps and the regular
// chains and elements of top; top's base chains wait for Finish.
func NewColdBuilder(f Family, maps []MapSpec, top *Fragment, maxOps int) *ColdBuilder {
	b := &ColdBuilder{maps: maps, maxOps: maxOps, cur: &Transaction{Family: f}}
	b.startTable("", maps, top)
	return b
}

// NewShardedColdBuilder is NewColdBuilder for every table of layout l: the
// main table from maps and top, shard i from shardMaps and shardTops[i]
// (Generator.ShardMaps, ShardTops), all hooked up by Finish's last
// transaction. Services are added with AddService.
func NewShardedColdBuilder(f Family, maps []MapSpec, top *Fragment, shardMaps []MapSpec, shardTops []*Fragment, l TableLayout, maxOps int) *ColdBuilder {
	b := NewColdBuilder(f, maps, top, maxOps)
	if !l.Sharded() {
		return b
	}
	b.layout, b.shardMaps = l, shardMaps
	for i := 1; i <= l.Shards; i++ {
		b.startTable(opTable(i), shardMaps, shardTops[i])
	}
	return b
}

// startTable adds the operations that declare a table, its maps and the
// regular chains and elements of top, and keeps top's base chains for
// Finish.
func (b *ColdBuilder) startTable(table string, maps []MapSpec, top *Fragment) {
	b.cur.Ops = append(b.cur.Ops, Op{Kind: OpAddTable, Table: table})
	for i := range maps {
		b.cur.Ops = append(b.cur.Ops, Op{Kind: OpAddMap, Name: maps[i].Name, Map: &maps[i], Table: table})
	}
	regular := &Fragment{Sets: top.Sets, Elements: top.Elements, Counters: top.Counters}
	for _, c := range top.Chains {
		if c.Base != nil {
			b.base = append(b.base, c)
			b.baseTables = append(b.baseTables, table)
		} else {
			regular.Chains = append(regular.Chains, c)
		}
	}
	addFragmentIn(b.cur, maps, regular, table)
}

// AddService is Add for the fragment of the Service port key: in a sharded
// layout its chains, sets and dispatch elements go to its shard and its
// other elements to the main table.
func (b *ColdBuilder) AddService(key string, f *Fragment) *Transaction {
	if !b.layout.Sharded() {
		return b.Add(f)
	}
	full := b.next()
	main, shard := splitFragment(f)
	addFragmentIn(b.cur, b.maps, main, "")
	addFragmentIn(b.cur, b.shardMaps, shard, opTable(b.layout.ShardOf(f.Place)))
	return full
}

// Add adds the operations that create f. It returns the transaction that
// f's operations start, when the one before is full, and nil otherwise.
// A fragment may come in parts (its chains, later its elements), as long as
// every chain exists before an element or rule jumps to it.
func (b *ColdBuilder) Add(f *Fragment) *Transaction {
	full := b.next()
	addFragmentIn(b.cur, b.maps, f, "")
	return full
}

// next starts a new transaction when the current one is full, and returns
// the full one (nil otherwise).
func (b *ColdBuilder) next() *Transaction {
	if len(b.cur.Ops) < max(b.maxOps, b.sent/chunkGrowth) {
		return nil
	}
	b.sent += len(b.cur.Ops)
	// Sized for the chunk it becomes (and a fragment past it), so that
	// its operations are not copied as it grows.
	size := min(max(b.maxOps, b.sent/chunkGrowth), presizeMaxOps)
	full := b.cur
	b.cur = &Transaction{Family: full.Family, Ops: make([]Op, 0, size+size/16)}
	return full
}

// Finish returns the last transactions: what is left, then the base chains
// with their rules.
func (b *ColdBuilder) Finish() []*Transaction {
	hook := &Transaction{Family: b.cur.Family}
	for i, c := range b.base {
		hook.Ops = append(hook.Ops, Op{Kind: OpAddChain, Name: c.Name, Base: c.Base, Table: b.baseTables[i]})
	}
	for i, c := range b.base {
		hook.Ops = appendRules(hook.Ops, c, b.baseTables[i])
	}
	return []*Transaction{b.cur, hook}
}

// addFragmentIn appends the operations that create f in table (Op.Table):
// chains before the rules that jump to them, sets before the rules that
// use them, map elements last.
func addFragmentIn(tx *Transaction, maps []MapSpec, f *Fragment, table string) {
	for _, op := range counterOps(f.Counters) {
		op.Table = table
		tx.Ops = append(tx.Ops, op)
	}
	for _, c := range f.Chains {
		tx.Ops = append(tx.Ops, Op{Kind: OpAddChain, Name: c.Name, Table: table})
	}
	for i := range f.Sets {
		tx.Ops = append(tx.Ops, Op{Kind: OpAddSet, Name: f.Sets[i].Name, Set: &f.Sets[i], Table: table})
	}
	for _, c := range f.Chains {
		tx.Ops = appendRules(tx.Ops, c, table)
	}
	for _, m := range maps {
		for i := range f.Elements[m.Name] {
			tx.Ops = append(tx.Ops, Op{Kind: OpAddElement, Name: m.Name, Element: &f.Elements[m.Name][i], Table: table})
		}
	}
}

// Hooked reports whether the table that inv describes has any of desired's
// base chains, that is, whether packets can reach it. A table without them
// is one whose streamed cold sync did not finish.
func (inv *Inventory) Hooked(desired *Ruleset) bool {
	if inv == nil {
		return false
	}
	have := make(map[string]bool, len(inv.Chains))
	for _, c := range inv.Chains {
		have[c] = true
	}
	for _, c := range desired.Top.Chains {
		if c.Base != nil && have[c.Name] {
			return true
		}
	}
	return false
}
