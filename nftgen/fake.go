package nftgen

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"
)

var _ Dataplane = (*Fake)(nil)

// Fake is an in-memory Dataplane that checks transactions the way the
// kernel does (missing objects, duplicate elements, chains still in use)
// and applies each one to a copy, so that a failed transaction changes
// nothing. It is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	tables map[Family]*fakeTable
	// shards are each family's shard tables, by name.
	shards map[Family]map[string]*fakeTable
	// Transactions counts the successful Apply calls.
	Transactions int
	// LastTransaction is the last transaction passed to Apply.
	LastTransaction *Transaction
	// FailNext, if set, makes the next Apply fail with this error.
	FailNext error
	// BeforeApply, if set, is called with each transaction before it is
	// applied; an error fails that Apply.
	BeforeApply func(tx *Transaction) error
	// watchers are the channels of Watch, with their contexts.
	watchers map[chan Change]context.Context
	// Handovers holds, per family with a handover table, the spec it was
	// written from.
	Handovers map[Family]*HandoverSpec
}

type fakeTable struct {
	chains map[string]*Chain
	maps   map[string]map[MapKey]MapElement
	specs  map[string]MapSpec
	sets   map[string]SetSpec
	// counters are the named counters (the fake counts no packets).
	counters map[string]bool
	// endpointMaps are the endpoint maps the numgen rules created (their
	// elements are the rules' targets), as the kernel holds them: they
	// outlive a flush of the chain and go only when deleted.
	endpointMaps map[string][]string
}

// NewFake returns an empty Fake.
func NewFake() *Fake {
	return &Fake{tables: map[Family]*fakeTable{}, shards: map[Family]map[string]*fakeTable{}}
}

func newFakeTable() *fakeTable {
	return &fakeTable{chains: map[string]*Chain{}, maps: map[string]map[MapKey]MapElement{}, specs: map[string]MapSpec{}, sets: map[string]SetSpec{}, counters: map[string]bool{}, endpointMaps: map[string][]string{}}
}

// familyTables returns the family's main table (if any) and its shard
// tables in name order. f.mu is held.
func (f *Fake) familyTables(fam Family) []*fakeTable {
	var out []*fakeTable
	if t := f.tables[fam]; t != nil {
		out = append(out, t)
	}
	for _, name := range slices.Sorted(maps.Keys(f.shards[fam])) {
		out = append(out, f.shards[fam][name])
	}
	return out
}

func (t *fakeTable) clone() *fakeTable {
	c := &fakeTable{chains: map[string]*Chain{}, maps: map[string]map[MapKey]MapElement{}, specs: maps.Clone(t.specs), sets: maps.Clone(t.sets), counters: maps.Clone(t.counters), endpointMaps: maps.Clone(t.endpointMaps)}
	for n, ch := range t.chains {
		cp := *ch
		cp.Rules = slices.Clone(ch.Rules)
		c.chains[n] = &cp
	}
	for n, m := range t.maps {
		c.maps[n] = maps.Clone(m)
	}
	return c
}

func errorf(errno syscall.Errno, format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), errno)
}

// Apply implements Dataplane.
func (f *Fake) Apply(_ context.Context, tx *Transaction) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.LastTransaction = tx
	if err := f.FailNext; err != nil {
		f.FailNext = nil
		return err
	}
	if f.BeforeApply != nil {
		if err := f.BeforeApply(tx); err != nil {
			return err
		}
	}
	if err := f.commit(tx); err != nil {
		return err
	}
	f.Transactions++
	return nil
}

// commit applies tx to copies of the tables it touches (the family's main
// table, or a shard named by Op.Table) and keeps the copies only when every
// operation succeeded. f.mu is held.
func (f *Fake) commit(tx *Transaction) error {
	// work holds the copy of each table touched so far; a nil copy is a
	// table that does not exist (or was deleted).
	work := map[string]*fakeTable{}
	table := func(name string) *fakeTable {
		if t, ok := work[name]; ok {
			return t
		}
		old := f.tables[tx.Family]
		if name != "" {
			old = f.shards[tx.Family][name]
		}
		var t *fakeTable
		if old != nil {
			t = old.clone()
		}
		work[name] = t
		return t
	}
	for i, op := range tx.Ops {
		t := table(op.Table)
		switch {
		case op.Kind == OpDeleteTable:
			if t == nil {
				return errorf(syscall.ENOENT, "op %d (%s): no table", i, op.Kind)
			}
			work[op.Table] = nil
			continue
		case op.Kind == OpAddTable:
			if t == nil {
				work[op.Table] = newFakeTable()
			}
			continue
		case t == nil:
			return errorf(syscall.ENOENT, "op %d (%s): no table", i, op.Kind)
		}
		if err := t.apply(op); err != nil {
			return fmt.Errorf("op %d: %s: %w", i, op.Text(tx.Family), err)
		}
	}
	for name, t := range work {
		switch {
		case name == "" && t != nil:
			f.tables[tx.Family] = t
		case name == "":
			delete(f.tables, tx.Family) // the transaction deleted the table
		case t != nil:
			if f.shards[tx.Family] == nil {
				f.shards[tx.Family] = map[string]*fakeTable{}
			}
			f.shards[tx.Family][name] = t
		default:
			delete(f.shards[tx.Family], name)
		}
	}
	return nil
}

// Inventory implements Dataplane.
func (f *Fake) Inventory(_ context.Context, fam Family, _ []string) (*Inventory, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tables[fam]
	if t == nil {
		return nil, nil
	}
	inv := t.inventory()
	for name, sh := range f.shards[fam] {
		if inv.Shards == nil {
			inv.Shards = map[string]*Inventory{}
		}
		inv.Shards[name] = sh.inventory()
	}
	return inv, nil
}

func (t *fakeTable) inventory() *Inventory {
	return &Inventory{Chains: slices.Sorted(maps.Keys(t.chains)), Sets: t.setNames()}
}

// ApplyStream implements Dataplane, one transaction after the other.
func (f *Fake) ApplyStream(ctx context.Context, txs iter.Seq[*Transaction], after func(ops int) error) error {
	for tx := range txs {
		if err := f.Apply(ctx, tx); err != nil {
			return err
		}
		if err := after(len(tx.Ops)); err != nil {
			return err
		}
	}
	return nil
}

// setNames names the table's maps, sets and endpoint maps.
func (t *fakeTable) setNames() []string {
	return slices.Concat(slices.Sorted(maps.Keys(t.maps)), slices.Sorted(maps.Keys(t.sets)), slices.Sorted(maps.Keys(t.endpointMaps)))
}

// Read implements Dataplane.
func (f *Fake) Read(_ context.Context, fam Family) (*TableState, error) { return f.State(fam), nil }

// ReadCompact implements Dataplane: the main table's state with the shard
// tables' in Shards.
func (f *Fake) ReadCompact(_ context.Context, fam Family, finish ChainFinish) (*TableState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.readState(fam, TableName, finish)
	if st == nil {
		return nil, nil
	}
	for _, name := range slices.Sorted(maps.Keys(f.shards[fam])) {
		st.Shards = append(st.Shards, f.readState(fam, name, finish))
	}
	return st, nil
}

// ReadTable implements Dataplane: ReadCompact of one table.
func (f *Fake) ReadTable(_ context.Context, fam Family, table int, finish ChainFinish) (*TableState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.readState(fam, ShardTable(table), finish), nil
}

// readState returns the state of the family's main table or the shard
// table called name, its chains' rules given to finish (the regular
// chains it omits left out); nil when it does not exist. Called with mu
// held.
func (f *Fake) readState(fam Family, name string, finish ChainFinish) *TableState {
	t := f.tables[fam]
	if name != TableName {
		t = f.shards[fam][name]
	}
	st := t.state(fam)
	if st == nil {
		return nil
	}
	if name != TableName {
		st.Name = name
	}
	listed := st.Chains[:0]
	for _, c := range st.Chains {
		var omit bool
		if c.Rules, omit = finish(name, c.Name, c.Rules); !omit || c.Base != nil {
			listed = append(listed, c)
		}
	}
	st.Chains = listed
	return st
}

// DeleteTable implements Dataplane: the main table and every shard.
func (f *Fake) DeleteTable(_ context.Context, fam Family) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.tables, fam)
	delete(f.shards, fam)
	return nil
}

// ShardTables returns the names of the family's shard tables.
func (f *Fake) ShardTables(fam Family) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.shards[fam]))
}

// Dump returns the family's table in nft syntax with chains, maps and
// elements sorted by name, or "" if there is no table.
func (f *Fake) Dump(fam Family) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tables[fam]
	if t == nil {
		return ""
	}
	var b strings.Builder
	t.dump(&b, fam, TableName)
	for _, name := range slices.Sorted(maps.Keys(f.shards[fam])) {
		f.shards[fam][name].dump(&b, fam, name)
	}
	return b.String()
}

// dump writes the table in nft syntax, sorted by name.
func (t *fakeTable) dump(b *strings.Builder, fam Family, name string) {
	fmt.Fprintf(b, "table %s %s {\n", fam, name)
	for _, c := range slices.Sorted(maps.Keys(t.counters)) {
		writeCounter(b, c)
	}
	for _, name := range slices.Sorted(maps.Keys(t.maps)) {
		els := slices.Collect(maps.Values(t.maps[name]))
		slices.SortFunc(els, func(a, b MapElement) int { return strings.Compare(a.Text(), b.Text()) })
		writeMap(b, fam, t.specs[name], els)
	}
	for _, name := range slices.Sorted(maps.Keys(t.sets)) {
		writeSet(b, fam, t.sets[name])
	}
	for _, name := range slices.Sorted(maps.Keys(t.chains)) {
		writeChain(b, fam, t.chains[name])
	}
	b.WriteString("}\n")
}
