package nftgen

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// OpKind is the kind of one operation in a transaction.
type OpKind string

// The operations a transaction is made of.
const (
	OpAddTable      OpKind = "add table"
	OpDeleteTable   OpKind = "delete table"
	OpAddChain      OpKind = "add chain"
	OpFlushChain    OpKind = "flush chain"
	OpDeleteChain   OpKind = "delete chain"
	OpAddRule       OpKind = "add rule"
	OpAddMap        OpKind = "add map"
	OpFlushMap      OpKind = "flush map"
	OpDeleteMap     OpKind = "delete map"
	OpAddElement    OpKind = "add element"
	OpDeleteElement OpKind = "delete element"
	OpAddSet        OpKind = "add set"
	OpDeleteSet     OpKind = "delete set"
	// OpAddCounter adds a named counter; one that exists is kept, with
	// its counts.
	OpAddCounter OpKind = "add counter"
)

// Op is one operation. Name is the chain or map it acts on.
type Op struct {
	Kind OpKind
	Name string
	// Table is the table the operation acts on: empty for TableName, a
	// shard's name (ShardTable) in a sharded layout.
	Table string
	// Base is set for OpAddChain of a base chain.
	Base *BaseChain
	// Rule is set for OpAddRule.
	Rule *Rule
	// Map is set for OpAddMap.
	Map *MapSpec
	// Set is set for OpAddSet.
	Set *SetSpec
	// Element is set for OpAddElement and OpDeleteElement.
	Element *MapElement
}

// Transaction is an ordered list of operations on one family's table that
// the kernel applies atomically: all of it or nothing. A transaction that
// writes the whole table (PlanFull, a cold build) and one that patches it
// are encoded alike: every object either touches, endpoint maps included,
// is one of its operations, so the dataplane keeps nothing between
// transactions.
type Transaction struct {
	Family Family
	Ops    []Op
}

// Empty reports whether the transaction does nothing.
func (t *Transaction) Empty() bool { return len(t.Ops) == 0 }

// Count returns how many operations of kind k the transaction holds.
func (t *Transaction) Count(k OpKind) int {
	n := 0
	for _, op := range t.Ops {
		if op.Kind == k {
			n++
		}
	}
	return n
}

// String renders the transaction one operation a line, close to nft syntax.
func (t *Transaction) String() string {
	var b strings.Builder
	for _, op := range t.Ops {
		b.WriteString(op.Text(t.Family))
		b.WriteByte('\n')
	}
	return b.String()
}

// Text renders the operation in nft syntax.
func (op Op) Text(f Family) string {
	table := op.Table
	if table == "" {
		table = TableName
	}
	prefix := fmt.Sprintf("%s %s %s", op.Kind, f, table)
	switch op.Kind {
	case OpAddTable:
		return prefix
	case OpAddRule:
		return fmt.Sprintf("%s %s %s", prefix, op.Name, op.Rule.Text(f))
	case OpAddElement, OpDeleteElement:
		return fmt.Sprintf("%s %s { %s }", prefix, op.Name, op.Element.Text())
	case OpAddSet:
		return fmt.Sprintf("%s %s { type %s; flags dynamic,timeout; timeout %ds; }", prefix, op.Name, op.Set.keyType(f), op.Set.TimeoutSeconds)
	case OpAddChain:
		if op.Base != nil {
			return fmt.Sprintf("%s %s { type %s hook %s priority %d; }", prefix, op.Name, op.Base.Type, op.Base.Hook, op.Base.Priority)
		}
	}
	return prefix + " " + op.Name
}

// Inventory names what a table holds in the kernel.
type Inventory struct {
	Chains []string
	// Sets are the named sets and maps.
	Sets []string
	// Shards are the inventories of the family's shard tables, by table
	// name (ShardTable); nil when it has none.
	Shards map[string]*Inventory
}

// Foreign reports whether the table is another program's that has
// TableName: kube-proxy's nftables mode, whose chains have names of their
// own (mark-for-masquerade, not KUBE-MARK-MASQ). Every nftproxy table holds
// ChainMarkMasq from its first transaction on.
func (inv *Inventory) Foreign() bool {
	return !slices.Contains(inv.Chains, ChainMarkMasq)
}

// PlanFull returns a transaction that makes the table hold exactly desired,
// whatever it holds now. existing is what the kernel holds (nil if the table
// does not exist); chains and maps that are not desired are deleted, and a
// foreign table of nftproxy's name is deleted first. Used for
// the first sync, after a failure and for the periodic repair.
func PlanFull(desired *Ruleset, existing *Inventory) *Transaction {
	tx := &Transaction{Family: desired.Family}
	add := func(op Op) { tx.Ops = append(tx.Ops, op) }
	if existing != nil && existing.Foreign() {
		// kube-proxy's nftables-mode table: replaced in this one
		// transaction, so that one of the two rulesets acts at any time.
		add(Op{Kind: OpDeleteTable})
		existing = nil
	}
	add(Op{Kind: OpAddTable})
	chains := desired.Chains()
	want := make(map[string]bool, len(chains))
	for _, c := range chains {
		want[c.Name] = true
		add(Op{Kind: OpAddChain, Name: c.Name, Base: c.Base})
	}
	tx.Ops = append(tx.Ops, counterOps(desired.Top.Counters)...)
	wantMap, wantSet := map[string]bool{}, map[string]bool{}
	for i := range desired.Maps {
		m := &desired.Maps[i]
		wantMap[m.Name] = true
		add(Op{Kind: OpAddMap, Name: m.Name, Map: m})
	}
	// Dynamic sets are created if missing but never flushed: they hold
	// session affinity state that a resync must not lose.
	for _, set := range desired.Sets() {
		wantSet[set.Name] = true
		add(Op{Kind: OpAddSet, Name: set.Name, Set: &set})
	}
	var strayChains, strayMaps, endpointMaps []string
	var had map[string]bool
	if existing != nil {
		had = map[string]bool{}
		for _, name := range existing.Chains {
			had[name] = true
			if !want[name] {
				strayChains = append(strayChains, name)
			}
		}
		for _, name := range existing.Sets {
			switch {
			case wantMap[name]:
				add(Op{Kind: OpFlushMap, Name: name})
			case IsEndpointMap(name):
				endpointMaps = append(endpointMaps, name)
			case !wantSet[name]:
				strayMaps = append(strayMaps, name)
			}
		}
	}
	for _, c := range chains {
		if had[c.Name] {
			add(Op{Kind: OpFlushChain, Name: c.Name})
		}
	}
	for _, name := range strayChains {
		add(Op{Kind: OpFlushChain, Name: name})
	}
	// Every chain is flushed: no rule reads the old endpoint maps, and the
	// rules added next create theirs, some of the same names.
	for _, name := range endpointMaps {
		add(Op{Kind: OpDeleteSet, Name: name})
	}
	for _, c := range chains {
		addRules(tx, c)
	}
	for _, m := range desired.Maps {
		for _, e := range desired.Elements(m.Name) {
			add(Op{Kind: OpAddElement, Name: m.Name, Element: &e})
		}
	}
	// Maps go first: their elements may still jump to stray chains.
	for _, name := range strayMaps {
		add(Op{Kind: OpDeleteSet, Name: name})
	}
	for _, name := range strayChains {
		add(Op{Kind: OpDeleteChain, Name: name})
	}
	return tx
}

// counterOps add the named counters (before the rules that count in
// them).
func counterOps(names []string) []Op {
	ops := make([]Op, len(names))
	for i, name := range names {
		ops[i] = Op{Kind: OpAddCounter, Name: name}
	}
	return ops
}

func addRules(tx *Transaction, c *Chain) {
	for i := range c.Rules {
		tx.Ops = append(tx.Ops, Op{Kind: OpAddRule, Name: c.Name, Rule: &c.Rules[i]})
	}
}

// PlanUpdate returns the transaction that moves the kernel from applied (what
// it holds now) to applied with the service fragments in updates replaced; a
// nil fragment deletes that service. Only the chains and map elements of
// those services are touched, so the size of the transaction does not depend
// on the number of other services. A chain is rewritten when its rules'
// digest differs from the applied one's.
func PlanUpdate(applied *Applied, updates map[string]*Fragment) *Transaction {
	return applied.PlanUpdate(updates).Tx
}

// Update is a planned change of an Applied: the transaction, and the
// summary of each updated fragment it was planned from, which Commit
// records once the transaction is in the kernel, without digesting the
// fragments again.
type Update struct {
	// Tx is the transaction that makes the change.
	Tx        *Transaction
	applied   *Applied
	summaries map[string]*FragmentSummary
}

// PlanUpdate plans the replacement of the service fragments in updates, as
// the package's PlanUpdate does, and returns it with the summaries that
// Update.Commit records.
func (applied *Applied) PlanUpdate(updates map[string]*Fragment) *Update {
	tx := &Transaction{Family: applied.Family}
	u := &Update{Tx: tx, applied: applied, summaries: make(map[string]*FragmentSummary, len(updates))}
	var ops updateOps
	for _, key := range slices.Sorted(maps.Keys(updates)) {
		oldF, newF := applied.Services[key], updates[key]
		newS := applied.Summarize(newF)
		u.summaries[key] = newS
		if oldF.equal(newS) {
			continue
		}
		from, to := -1, -1 // the shards it leaves and goes to
		if oldF != nil {
			from = applied.Layout.ShardOf(oldF.Place)
		}
		if newF != nil {
			to = applied.Layout.ShardOf(newF.Place)
		}
		if from >= 0 && to >= 0 && from != to {
			// Its place changed (its cluster IP, or it gained or lost a
			// node port or an external address): deleted from the old
			// shard, added to the new one.
			ops.fragment(oldF, nil, nil, from)
			ops.fragment(nil, newF, newS, to)
			continue
		}
		ops.fragment(oldF, newF, newS, max(from, to))
	}
	slices.SortStableFunc(ops.deleteSets, func(a, b Op) int { return strings.Compare(a.Name, b.Name) })
	for _, list := range [][]Op{ops.addChains, ops.addSets, ops.delElems, ops.flushChains, ops.dropMaps, ops.replaceSets, ops.rulesOf, ops.addElems, ops.deleteChains, ops.deleteSets} {
		tx.Ops = append(tx.Ops, list...)
	}
	return u
}

// updateOps are the operations of an update, a list per kind, in the
// order they are sent; every operation names the table of its fragment
// (Applied.Layout).
type updateOps struct {
	addChains, flushChains, deleteChains, rulesOf, delElems, addElems, addSets, replaceSets, dropMaps, deleteSets []Op
}

// fragment adds the operations that replace oldF by newF (either may be
// nil) in shard.
func (ops *updateOps) fragment(oldF *FragmentSummary, newF *Fragment, newS *FragmentSummary, shard int) {
	changedSet := ops.sets(oldF, newF, opTable(shard))
	ops.chains(oldF, newF, newS, changedSet, opTable(shard))
	d, a := diffElements(oldF, newF)
	for i := range d {
		d[i].Table = opTableOfMap(shard, d[i].Name)
	}
	for i := range a {
		a[i].Table = opTableOfMap(shard, a[i].Name)
	}
	ops.delElems = append(ops.delElems, d...)
	ops.addElems = append(ops.addElems, a...)
}

// sets adds the operations on a fragment's sets in table: a set whose
// timeout changed is deleted and created again, so the chains that use it
// are rewritten too; it returns those sets.
func (ops *updateOps) sets(oldF *FragmentSummary, newF *Fragment, table string) map[string]bool {
	oldSets := map[string]SetSpec{}
	if oldF != nil {
		for _, set := range oldF.Sets {
			oldSets[set.Name] = set
		}
	}
	changedSet := map[string]bool{}
	newSets := map[string]bool{}
	if newF != nil {
		for i := range newF.Sets {
			set := &newF.Sets[i]
			newSets[set.Name] = true
			old, had := oldSets[set.Name]
			switch {
			case !had:
				ops.addSets = append(ops.addSets, Op{Kind: OpAddSet, Name: set.Name, Set: set, Table: table})
			case old != *set:
				ops.replaceSets = append(ops.replaceSets, Op{Kind: OpDeleteSet, Name: set.Name, Table: table}, Op{Kind: OpAddSet, Name: set.Name, Set: set, Table: table})
				changedSet[set.Name] = true
			}
		}
	}
	for name := range oldSets {
		if !newSets[name] {
			ops.deleteSets = append(ops.deleteSets, Op{Kind: OpDeleteSet, Name: name, Table: table})
		}
	}
	return changedSet
}

// chains adds the operations on a fragment's chains in table: new ones
// added, changed ones (by digest, or using a changed set) flushed and
// refilled, gone ones flushed and deleted with the endpoint maps of their
// rules.
func (ops *updateOps) chains(oldF *FragmentSummary, newF *Fragment, newS *FragmentSummary, changedSet map[string]bool, table string) {
	flushedFrom := len(ops.flushChains)
	var oldNames []string // unpacked once: both loops below read them
	oldChains := map[string]uint64{}
	if oldF != nil {
		oldNames = make([]string, len(oldF.Chains))
		for i, c := range oldF.Chains {
			oldNames[i] = oldF.ChainName(i)
			oldChains[oldNames[i]] = c.Digest()
		}
	}
	newNames := map[string]bool{}
	if newF != nil {
		for i, c := range newF.Chains {
			newNames[c.Name] = true
			old, had := oldChains[c.Name]
			switch {
			case !had:
				ops.addChains = append(ops.addChains, Op{Kind: OpAddChain, Name: c.Name, Table: table})
				ops.rulesOf = appendRules(ops.rulesOf, c, table)
			// An unchanged digest means unchanged rules: those of c
			// name the same sets as the applied ones.
			case old != newS.Chains[i].Digest() || usesAnySet(c, changedSet):
				ops.flushChains = append(ops.flushChains, Op{Kind: OpFlushChain, Name: c.Name, Table: table})
				ops.rulesOf = appendRules(ops.rulesOf, c, table)
			}
		}
	}
	if oldF == nil {
		return
	}
	for _, name := range oldNames {
		if !newNames[name] {
			ops.flushChains = append(ops.flushChains, Op{Kind: OpFlushChain, Name: name, Table: table})
			ops.deleteChains = append(ops.deleteChains, Op{Kind: OpDeleteChain, Name: name, Table: table})
		}
	}
	// The endpoint map of a flushed chain goes with its rules.
	for _, cm := range oldF.EndpointMaps() {
		if slices.ContainsFunc(ops.flushChains[flushedFrom:], func(op Op) bool { return op.Name == cm.Chain }) {
			ops.dropMaps = append(ops.dropMaps, Op{Kind: OpDeleteSet, Name: cm.Map, Table: table})
		}
	}
}

// appendRules appends the operations that add c's rules in table.
func appendRules(ops []Op, c *Chain, table string) []Op {
	for i := range c.Rules {
		ops = append(ops, Op{Kind: OpAddRule, Name: c.Name, Rule: &c.Rules[i], Table: table})
	}
	return ops
}

// usesAnySet reports whether a rule of c refers to one of sets.
func usesAnySet(c *Chain, sets map[string]bool) bool {
	if len(sets) == 0 {
		return false
	}
	for i := range c.Rules {
		for _, ref := range ruleSetRefs(&c.Rules[i]) {
			if sets[ref] {
				return true
			}
		}
	}
	return false
}

// diffElements returns the element deletions and additions that turn the
// elements of oldF into those of newF. A changed element is deleted and
// added again.
func diffElements(oldF *FragmentSummary, newF *Fragment) (del, add []Op) {
	type mk struct {
		m string
		k MapKey
	}
	oldEls := map[mk]MapElement{}
	if oldF != nil {
		for _, e := range oldF.Elements {
			oldEls[mk{e.Map, e.Key}] = e.MapElement
		}
	}
	newEls := map[mk]bool{}
	if newF != nil {
		for _, m := range slices.Sorted(maps.Keys(newF.Elements)) {
			for _, e := range newF.Elements[m] {
				newEls[mk{m, e.Key}] = true
				old, had := oldEls[mk{m, e.Key}]
				if had && old == e {
					continue
				}
				if had {
					del = append(del, Op{Kind: OpDeleteElement, Name: m, Element: &old})
				}
				add = append(add, Op{Kind: OpAddElement, Name: m, Element: &e})
			}
		}
	}
	if oldF != nil {
		for i := range oldF.Elements {
			e := &oldF.Elements[i]
			if !newEls[mk{e.Map, e.Key}] {
				del = append(del, Op{Kind: OpDeleteElement, Name: e.Map, Element: &e.MapElement})
			}
		}
	}
	return del, add
}
