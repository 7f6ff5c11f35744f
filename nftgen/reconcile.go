package nftgen

import (
	"slices"
	"strings"
)

// PlanReconcile returns a transaction that makes a live table, whose
// decoded content is live, hold
// exactly desired, touching only what differs: chains whose rules differ
// are flushed and refilled, missing ones added, stray ones deleted, and
// map elements added or deleted one by one. A table nothing has touched
// gives an empty transaction, so a periodic full sync or the adoption of a table
// written by an earlier nftproxy costs a read and no commit; a tampered
// one is repaired in one small commit, with no moment at which packets see
// a half-written table.
//
// A chain that picks endpoints from a numgen map is kept like any other
// when its rules, the endpoint map's name and elements included, are
// unchanged; otherwise it is rewritten, and the endpoint map its live rule
// read is deleted after the flush, with every endpoint map no live chain
// reads, before the new rules create theirs. A non-empty transaction
// starts by declaring the table (which makes a dormant table active) and
// is a patch, not a replacement.
//
// It returns nil when the live table cannot be patched in place (objects
// nftproxy cannot decode, a base chain or map declared differently, another
// program's table of nftproxy's name): the caller then rewrites the table
// (PlanFull).
func PlanReconcile(desired *Ruleset, live *TableState) *Transaction {
	if live == nil || len(live.Unknown) > 0 || live.Foreign() {
		return nil
	}
	tx := &Transaction{Family: desired.Family}
	add := func(op Op) { tx.Ops = append(tx.Ops, op) }
	add(Op{Kind: OpAddTable})

	liveChains := make(map[string]*Chain, len(live.Chains))
	for _, c := range live.Chains {
		liveChains[c.Name] = c
	}
	chains := desired.Chains()
	want := make(map[string]bool, len(chains))
	var refill []*Chain
	var flush []string
	for _, c := range chains {
		want[c.Name] = true
		old := liveChains[c.Name]
		switch {
		case old == nil:
			add(Op{Kind: OpAddChain, Name: c.Name, Base: c.Base})
			refill = append(refill, c)
		case (old.Base == nil) != (c.Base == nil):
			return nil
		case old.Base != nil && !samePlacement(old.Base, c.Base):
			// Another hook, priority or type: the chain is made anew in
			// the same transaction (a base chain is no jump target, and a
			// chain that exists keeps its hook).
			add(Op{Kind: OpFlushChain, Name: c.Name})
			add(Op{Kind: OpDeleteChain, Name: c.Name})
			add(Op{Kind: OpAddChain, Name: c.Name, Base: c.Base})
			refill = append(refill, c)
		default:
			rules := old
			if old.Base != nil && *old.Base != *c.Base {
				// Only the policy differs: adding the chain sets it again.
				add(Op{Kind: OpAddChain, Name: c.Name, Base: c.Base})
				same := *old
				same.Base = c.Base
				rules = &same
			}
			if !rules.Equal(c) {
				flush = append(flush, c.Name)
				refill = append(refill, c)
			}
		}
	}
	var stray []string
	for _, c := range live.Chains {
		if !want[c.Name] {
			if c.Base != nil {
				return nil
			}
			stray = append(stray, c.Name)
		}
	}

	var delElems, addElems []Op
	wantMap := map[string]bool{}
	for i := range desired.Maps {
		spec := &desired.Maps[i]
		wantMap[spec.Name] = true
		cur := live.Map(spec.Name)
		if cur == nil {
			add(Op{Kind: OpAddMap, Name: spec.Name, Map: spec})
		} else if cur.Spec.Key != spec.Key {
			return nil
		}
		have := map[MapKey]MapElement{}
		if cur != nil {
			for _, e := range cur.Elements {
				have[e.Key] = e
			}
		}
		for _, e := range desired.Elements(spec.Name) {
			old, ok := have[e.Key]
			delete(have, e.Key)
			if ok && old == e {
				continue
			}
			if ok {
				delElems = append(delElems, Op{Kind: OpDeleteElement, Name: spec.Name, Element: &old})
			}
			addElems = append(addElems, Op{Kind: OpAddElement, Name: spec.Name, Element: &e})
		}
		for _, e := range sortedElements(have) {
			delElems = append(delElems, Op{Kind: OpDeleteElement, Name: spec.Name, Element: &e})
		}
	}
	wantSet := map[string]bool{}
	for _, set := range desired.Sets() {
		wantSet[set.Name] = true
		if old, ok := live.Set(set.Name); !ok {
			add(Op{Kind: OpAddSet, Name: set.Name, Set: &set})
		} else if old != set {
			// A different timeout: the set is re-created once its rules
			// are gone (affinity state is lost, as on any change of it).
			return nil
		}
	}

	tx.Ops = append(tx.Ops, delElems...)
	flushed := map[string]bool{}
	for _, name := range append(flush, stray...) {
		flushed[name] = true
		add(Op{Kind: OpFlushChain, Name: name})
	}
	// The endpoint maps that a kept chain reads stay; the others (those of
	// the chains just flushed, and any no chain reads) go before the new
	// rules create theirs, some of the same names.
	kept := map[string]bool{}
	for _, c := range live.Chains {
		if !flushed[c.Name] {
			for _, m := range c.EndpointMaps() {
				kept[m] = true
			}
		}
	}
	for _, name := range live.SetNames {
		if IsEndpointMap(name) && !kept[name] {
			add(Op{Kind: OpDeleteSet, Name: name})
		}
	}
	for _, c := range refill {
		addRules(tx, c)
	}
	tx.Ops = append(tx.Ops, addElems...)
	for _, name := range live.SetNames {
		if !IsEndpointMap(name) && !wantMap[name] && !wantSet[name] {
			add(Op{Kind: OpDeleteSet, Name: name})
		}
	}
	for _, name := range stray {
		add(Op{Kind: OpDeleteChain, Name: name})
	}
	if len(refill) > 0 {
		// The rules written may count in the named counters; one that
		// exists keeps its counts.
		tx.Ops = slices.Insert(tx.Ops, 1, counterOps(desired.Top.Counters)...)
	}
	if len(tx.Ops) == 1 && !live.Dormant { // the table op alone makes a dormant table active
		tx.Ops = nil
	}
	return tx
}

// SharedRules returns what a read of a live table to compare with rs does
// with the rules read of each chain (Dataplane.ReadAgainst): it returns
// the rules of rs's chain of that name when they are equal, and the rules
// read otherwise. A table that matches rs then holds no copy of its rules,
// and PlanReconcile sees at once that they are equal. The function may be
// called from several goroutines at once.
func (rs *Ruleset) SharedRules() func(chain string, rules []Rule) []Rule {
	chains := rs.Chains()
	want := make(map[string][]Rule, len(chains))
	for _, c := range chains {
		want[c.Name] = c.Rules
	}
	return func(chain string, rules []Rule) []Rule {
		if d, ok := want[chain]; ok && len(d) == len(rules) && len(d) > 0 && slices.EqualFunc(d, rules, func(a, b Rule) bool { return a.Equal(&b) }) {
			return d
		}
		return rules
	}
}

// samePlacement reports whether two base chains hook the same place: the
// same type, hook and priority, whatever their policies.
func samePlacement(a, b *BaseChain) bool {
	return a.Type == b.Type && a.Hook == b.Hook && a.Priority == b.Priority
}

// EndpointMaps returns the named endpoint maps c's rules read.
func (c *Chain) EndpointMaps() []string {
	var out []string
	for i := range c.Rules {
		for _, s := range c.Rules[i].Stmts {
			if v, ok := s.(NumgenVmap); ok && v.Map != "" {
				out = append(out, v.Map)
			}
		}
	}
	return out
}

func sortedElements(m map[MapKey]MapElement) []MapElement {
	out := make([]MapElement, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b MapElement) int { return strings.Compare(a.Text(), b.Text()) })
	return out
}
