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
	r := NewReconciler(live, nil, desired.Top, desired.Maps)
	for _, k := range desired.serviceKeys() {
		r.Add(desired.Services[k], nil)
	}
	return r.Transaction()
}

// Reconciler plans PlanReconcile's transaction a fragment at a time, so
// that a full sync of a live table never holds the whole desired ruleset:
// each Service's chains are compared with the live table as they are
// generated and only those that differ are kept. With LiveDigests, the
// live table's chains outside the top level are not in its state at all:
// they are looked up, compared by digest and marked wanted in the
// digests.
type Reconciler struct {
	live *TableState
	// digests is what the read recorded of live's omitted chains (nil
	// when it omitted none), and applied the Applied whose digests they
	// are.
	digests *tableDigests
	applied *Applied
	top     *Fragment
	maps    []MapSpec
	// failed is set once the table is found not to be patchable.
	failed bool

	// liveChains indexes the chains live lists by name, and wanted says
	// which of them the desired rules hold (by the same index).
	liveChains map[string]int32
	wanted     []bool
	addChains  []Op
	flush      []string
	refill     []*Chain
	elements   map[string][]MapElement
	sets       []SetSpec
	// omitted stands for a live chain the read omitted: a regular chain
	// whose rules are known by their digest only.
	omitted Chain
}

// NewReconciler returns a Reconciler of the live table towards a ruleset
// with this top level and these maps; digests, if not nil, is what the
// read of live recorded of the chains it omitted (live's table's part of
// it). The top level is added at once; the Services follow through Add.
func NewReconciler(live *TableState, digests *LiveDigests, top *Fragment, maps []MapSpec) *Reconciler {
	r := &Reconciler{live: live, top: top, maps: maps, elements: map[string][]MapElement{}}
	if !CanPatch(live) {
		r.failed = true
		return r
	}
	if digests != nil {
		r.digests, r.applied = digests.table(live.TableName()), digests.applied
	}
	r.liveChains = make(map[string]int32, len(live.Chains))
	for i, c := range live.Chains {
		r.liveChains[c.Name] = int32(i)
	}
	r.wanted = make([]bool, len(live.Chains))
	r.Add(top, nil)
	return r
}

// Add compares what fragment f holds (chains, sets, map elements; a
// Service's chains and its settled elements may come in two calls) with
// the live table. sum, if not nil, is f's summary by the Applied of the
// reconciler's digests, whose chain digests are then not computed again.
func (r *Reconciler) Add(f *Fragment, sum *FragmentSummary) {
	if r.failed || f == nil {
		return
	}
	for i, c := range f.Chains {
		var old *Chain
		var digest uint64
		var digested bool
		if li, ok := r.liveChains[c.Name]; ok {
			old = r.live.Chains[li]
			r.wanted[li] = true
			if old.Base != nil { // listed, and digested when not kept
				digest, digested = r.digests.lookup(c.Name)
			}
		} else if digest, digested = r.digests.want(c.Name); digested {
			old = &r.omitted
		}
		switch {
		case old == nil:
			r.addChains = append(r.addChains, Op{Kind: OpAddChain, Name: c.Name, Base: c.Base})
			if r.live.Unreached > 0 {
				// The read did not reach every chain (a large table is not
				// listed): this one may exist with rules, for example an
				// endpoint chain of a Service chain another program
				// flushed. Adding a chain that exists keeps its rules.
				r.addChains = append(r.addChains, Op{Kind: OpFlushChain, Name: c.Name})
			}
			r.refill = append(r.refill, c)
		case (old.Base == nil) != (c.Base == nil):
			r.failed = true
			return
		case old.Base != nil && !samePlacement(old.Base, c.Base):
			// Another hook, priority or type: the chain is made anew in
			// the same transaction (a base chain is no jump target, and a
			// chain that exists keeps its hook).
			r.addChains = append(r.addChains, Op{Kind: OpFlushChain, Name: c.Name}, Op{Kind: OpDeleteChain, Name: c.Name}, Op{Kind: OpAddChain, Name: c.Name, Base: c.Base})
			r.refill = append(r.refill, c)
		default:
			if old.Base != nil && *old.Base != *c.Base {
				// Only the policy differs: adding the chain sets it again.
				r.addChains = append(r.addChains, Op{Kind: OpAddChain, Name: c.Name, Base: c.Base})
			}
			if !r.sameRules(old, c, sum, i, digest, digested) {
				r.flush = append(r.flush, c.Name)
				r.refill = append(r.refill, c)
			}
		}
	}
	r.sets = append(r.sets, f.Sets...)
	for m, els := range f.Elements {
		r.elements[m] = append(r.elements[m], els...)
	}
}

// sameRules reports whether the live chain old (r.omitted for one the
// read omitted) holds c's rules: compared rule by rule when its rules
// were kept, by their digest otherwise (c's is the i-th of sum, when
// given).
func (r *Reconciler) sameRules(old, c *Chain, sum *FragmentSummary, i int, digest uint64, digested bool) bool {
	if !digested {
		return slices.EqualFunc(old.Rules, c.Rules, func(a, b Rule) bool { return a.Equal(&b) })
	}
	if c.Base != nil {
		return false // the digests of base chains are not comparable
	}
	if sum != nil && i < len(sum.Chains) && sum.chainNamed(i, c.Name) {
		return sum.Chains[i].Digest() == digest
	}
	return r.applied.digest(c) == digest
}

// Transaction returns the transaction that makes the live table hold
// everything added: empty when it already does, nil when it cannot be
// patched in place (see PlanReconcile).
func (r *Reconciler) Transaction() *Transaction {
	if r.failed {
		return nil
	}
	live := r.live
	tx := &Transaction{Family: live.Family}
	add := func(op Op) { tx.Ops = append(tx.Ops, op) }
	add(Op{Kind: OpAddTable})
	tx.Ops = append(tx.Ops, r.addChains...)
	var stray []string
	for i, c := range live.Chains {
		if !r.wanted[i] {
			if c.Base != nil {
				return nil
			}
			stray = append(stray, c.Name)
		}
	}
	for _, name := range r.digests.chains(true) {
		if _, listed := r.liveChains[name]; !listed { // a base chain is listed and digested
			stray = append(stray, name)
		}
	}
	slices.Sort(stray)

	delElems, addElems, wantMap, ok := r.mapOps(add)
	if !ok {
		return nil
	}
	wantSet, ok := r.setOps(add)
	if !ok {
		return nil
	}

	tx.Ops = append(tx.Ops, delElems...)
	flushed := map[string]bool{}
	for _, name := range append(r.flush, stray...) {
		flushed[name] = true
		add(Op{Kind: OpFlushChain, Name: name})
	}
	// The endpoint maps that a kept chain reads stay; the others (those of
	// the chains just flushed, and any no chain reads) go before the new
	// rules create theirs, some of the same names.
	for _, name := range r.unreadEndpointMaps(flushed) {
		add(Op{Kind: OpDeleteSet, Name: name})
	}
	for _, c := range r.refill {
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
	if len(r.refill) > 0 {
		// The rules written may count in the named counters; one that
		// exists keeps its counts.
		tx.Ops = slices.Insert(tx.Ops, 1, counterOps(r.top.Counters)...)
	}
	if len(tx.Ops) == 1 && !live.Dormant { // the table op alone makes a dormant table active
		tx.Ops = nil
	}
	return tx
}

// mapOps adds the maps the live table lacks (add) and returns the element
// operations that make every map hold what was added, and the maps
// wanted; false when a live map cannot be patched (another key type).
func (r *Reconciler) mapOps(add func(Op)) (delElems, addElems []Op, wantMap map[string]bool, ok bool) {
	wantMap = map[string]bool{}
	for i := range r.maps {
		spec := &r.maps[i]
		wantMap[spec.Name] = true
		cur := r.live.Map(spec.Name)
		if cur == nil {
			add(Op{Kind: OpAddMap, Name: spec.Name, Map: spec})
		} else if cur.Spec.Key != spec.Key {
			return nil, nil, nil, false
		}
		have := map[MapKey]MapElement{}
		if cur != nil {
			for _, e := range cur.Elements {
				have[e.Key] = e
			}
		}
		for _, e := range r.elements[spec.Name] {
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
	return delElems, addElems, wantMap, true
}

// setOps adds the sets the live table lacks (add) and returns the sets
// wanted; false when a live set differs (a different timeout: the set is
// re-created once its rules are gone, and affinity state is lost, as on
// any change of it).
func (r *Reconciler) setOps(add func(Op)) (map[string]bool, bool) {
	wantSet := map[string]bool{}
	for _, set := range r.sets {
		wantSet[set.Name] = true
		if old, ok := r.live.Set(set.Name); !ok {
			add(Op{Kind: OpAddSet, Name: set.Name, Set: &set})
		} else if old != set {
			return nil, false
		}
	}
	return wantSet, true
}

// unreadEndpointMaps returns the live endpoint maps that no chain kept
// (not in flushed) reads.
func (r *Reconciler) unreadEndpointMaps(flushed map[string]bool) []string {
	kept := map[string]bool{}
	for _, c := range r.live.Chains {
		if !flushed[c.Name] {
			for _, m := range c.EndpointMaps() {
				kept[m] = true
			}
		}
	}
	if r.digests != nil {
		for chain, maps := range r.digests.maps {
			if !flushed[chain] {
				for _, m := range maps {
					kept[m] = true
				}
			}
		}
	}
	var out []string
	for _, name := range r.live.SetNames {
		if IsEndpointMap(name) && !kept[name] {
			out = append(out, name)
		}
	}
	return out
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

// CanPatch reports whether the live table can be patched in place at
// all: it holds nothing nftproxy cannot decode and is not another
// program's table of nftproxy's name (PlanReconcile may still find a base
// chain or a map declared differently).
func CanPatch(live *TableState) bool {
	return live != nil && len(live.Unknown) == 0 && !live.Foreign()
}
