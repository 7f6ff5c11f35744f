package nftgen

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// TableState is what one family's table holds: read back from the kernel,
// from a Fake, or taken from a desired Ruleset. The compat view renders it.
type TableState struct {
	Family Family
	// Dormant is set when another process made the table dormant (its
	// chains hook nothing then); nftproxy writes it active.
	Dormant bool
	// Chains are in the kernel's order (Ruleset order for a desired one).
	Chains []*Chain
	// Maps are the named verdict maps with their elements.
	Maps []MapState
	// Sets are the dynamic affinity sets.
	Sets []SetSpec
	// SetNames names every named set and map of the table, those the
	// dataplane made for its own use (endpoint maps) included.
	SetNames []string
	// Unknown describes objects in the table that nftproxy did not create
	// or cannot decode.
	Unknown []string
	// Unreached counts the chains of a large table that no rule or map
	// element reaches and that were not listed: only a listing of every
	// chain names them, and the kernel's listing is quadratic in the
	// table's chains (minutes at 100,000 Services). They carry no
	// traffic; a full sync leaves them in place, and flushes any chain it
	// programs that the read did not reach (it may be one of them).
	Unreached int
	// Members are the addresses each dynamic (affinity) set holds, as read
	// from the kernel; nil when not known (a desired Ruleset's state).
	Members map[string][]SetMember
	// Shards are the states of the family's shard tables, each on its
	// own, in a state read for planning (Dataplane.ReadCompact); Merged
	// folds them in. Name is a shard's table name.
	Shards []*TableState
	Name   string
	// Unread are the chains a leaving read (Dataplane.ReadLeaving) found
	// but did not read the rules of; they are not in Chains.
	Unread []ChainRef
}

// SetMember is one address in a dynamic set and the time it has left.
type SetMember struct {
	Addr netip.Addr
	// Endpoint is the endpoint the client is kept on, in a Service port's
	// shared set (SetSpec.ByEndpoint); invalid in a set of one endpoint.
	Endpoint netip.AddrPort
	Expires  time.Duration
}

// MapState is a named map and its elements.
type MapState struct {
	Spec     MapSpec
	Elements []MapElement
}

// Chain returns the chain called name, or nil.
func (s *TableState) Chain(name string) *Chain {
	for _, c := range s.Chains {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Map returns the map called name, or nil.
func (s *TableState) Map(name string) *MapState {
	for i := range s.Maps {
		if s.Maps[i].Spec.Name == name {
			return &s.Maps[i]
		}
	}
	return nil
}

// Set returns the set called name, if the table has it.
func (s *TableState) Set(name string) (SetSpec, bool) {
	for _, set := range s.Sets {
		if set.Name == name {
			return set, true
		}
	}
	return SetSpec{}, false
}

// Inventory names what the table holds, as Dataplane.Inventory does: the
// chains it lists (those a compact read omitted are named by
// LiveDigests.Inventory).
func (s *TableState) Inventory() *Inventory {
	if s == nil {
		return nil
	}
	inv := &Inventory{Sets: s.SetNames, Chains: s.chainNames()}
	for _, sh := range s.Shards {
		if inv.Shards == nil {
			inv.Shards = map[string]*Inventory{}
		}
		inv.Shards[sh.Name] = sh.Inventory()
	}
	return inv
}

// chainNames returns the names of the chains s lists.
func (s *TableState) chainNames() []string {
	out := make([]string, len(s.Chains))
	for i, c := range s.Chains {
		out[i] = c.Name
	}
	return out
}

// TableName returns the name of the table s is the state of: Name, or
// TableName for the main table's.
func (s *TableState) TableName() string {
	if s.Name == "" {
		return TableName
	}
	return s.Name
}

// State returns the table that applying r would produce.
func (r *Ruleset) State() *TableState {
	s := &TableState{Family: r.Family, Chains: r.Chains(), Sets: r.Sets()}
	for _, m := range r.Maps {
		s.Maps = append(s.Maps, MapState{Spec: m, Elements: r.Elements(m.Name)})
	}
	return s
}

// State returns the table the Fake holds for family f, or nil: a sharded
// family's tables as one (TableState.Merged).
func (f *Fake) State(fam Family) *TableState {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.tables[fam].state(fam)
	if st == nil {
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(f.shards[fam])) {
		sh := f.shards[fam][name].state(fam)
		sh.Name = name
		st.Shards = append(st.Shards, sh)
	}
	return st.Merged()
}

// state returns what t holds; nil for no table.
func (t *fakeTable) state(fam Family) *TableState {
	if t == nil {
		return nil
	}
	s := &TableState{Family: fam}
	for _, name := range slices.Sorted(maps.Keys(t.chains)) {
		c := *t.chains[name]
		s.Chains = append(s.Chains, &c)
	}
	for _, name := range slices.Sorted(maps.Keys(t.maps)) {
		m := MapState{Spec: t.specs[name]}
		for _, e := range t.maps[name] {
			m.Elements = append(m.Elements, e)
		}
		slices.SortFunc(m.Elements, func(a, b MapElement) int { return strings.Compare(a.Text(), b.Text()) })
		s.Maps = append(s.Maps, m)
	}
	for _, name := range slices.Sorted(maps.Keys(t.sets)) {
		s.Sets = append(s.Sets, t.sets[name])
	}
	s.SetNames = t.setNames()
	return s
}

// Foreign reports whether the live table is another program's table of
// nftproxy's name (see Inventory.Foreign).
func (s *TableState) Foreign() bool {
	for _, c := range s.Chains {
		if c.Name == ChainMarkMasq {
			return false
		}
	}
	return true
}
