package nftgen

import (
	"encoding/binary"
	"hash/maphash"
	"maps"
	"slices"
)

// Applied is what one family's table holds, kept compactly for planning
// incremental updates (PlanUpdate): the top-level fragment as it is, and for
// each service fragment only the names of its chains with a digest of their
// rules, its sets and its map elements. The statements themselves are not
// kept: at 30,000 Services x 10 endpoints they are most of a ruleset's
// memory, and an update only needs to know whether a chain's rules changed.
type Applied struct {
	Family Family
	// Maps are the table's named maps.
	Maps []MapSpec
	// Top is the top-level fragment (base chains and shared chains).
	Top *Fragment
	// Services summarizes each service fragment, by fragment key.
	Services map[string]*FragmentSummary
	// Layout places each fragment's chains, sets and dispatch elements
	// (the single table unless sharded).
	Layout TableLayout
	// seed keys the digests. It is chosen at random per Applied, so that
	// no input can be crafted to give a changed chain an unchanged digest.
	seed maphash.Seed
}

// FragmentSummary is what Applied keeps of one fragment.
type FragmentSummary struct {
	// Chains are its chains' digests; ChainName names them.
	Chains []ChainDigest
	Sets   []SetSpec
	// Elements are the fragment's map elements, map by map in the order of
	// the fragment's map names.
	Elements []NamedElement
	// Rules is the number of rules of all its chains.
	Rules int
	// odd holds what only fragments nftproxy did not generate have (nil
	// for every one it does).
	odd *oddParts
	// Place is the fragment's Place: where its shard is.
	Place Place
	// Counts are the fragment's rules in the compat view, per iptables
	// table, as the pipeline counted them (a RuleCounter's; Summarize
	// leaves them zero, and equal does not compare them: they follow from
	// the rest).
	Counts FragmentRuleCounts
}

// RuleCounts returns s's Counts (zero for nil).
func (s *FragmentSummary) RuleCounts() FragmentRuleCounts {
	if s == nil {
		return FragmentRuleCounts{}
	}
	return s.Counts
}

// ChainMap names a chain and the endpoint map its numgen rule reads.
type ChainMap struct {
	Chain, Map string
}

// ChainDigest digests a chain's rules; its name is packed (see
// FragmentSummary.ChainName). It is 20 bytes, aligned to one: a
// Service's 11 chains (10 endpoints) fit in 224 bytes, not 264.
type ChainDigest struct {
	name   packedName
	digest [8]byte
	// readsMap is set when the chain's numgen rule reads the endpoint map
	// named after it (EndpointMapName).
	readsMap bool
}

// Digest returns the digest of the chain's rules (see Applied).
func (c ChainDigest) Digest() uint64 { return binary.LittleEndian.Uint64(c.digest[:]) }

// NamedElement is a map element with the name of its map.
type NamedElement struct {
	Map string
	MapElement
}

// NewApplied returns an empty Applied for a table with these maps and top
// level fragment.
func NewApplied(f Family, maps []MapSpec, top *Fragment) *Applied {
	return &Applied{Family: f, Maps: maps, Top: top, Services: map[string]*FragmentSummary{}, seed: maphash.MakeSeed()}
}

// AppliedFrom returns the Applied of a whole ruleset.
func AppliedFrom(rs *Ruleset) *Applied {
	a := NewApplied(rs.Family, rs.Maps, rs.Top)
	for k, f := range rs.Services {
		a.Services[k] = a.Summarize(f)
	}
	return a
}

// Summarize returns what a keeps of f (nil for nil).
func (a *Applied) Summarize(f *Fragment) *FragmentSummary {
	if f == nil {
		return nil
	}
	s := &FragmentSummary{Chains: make([]ChainDigest, len(f.Chains)), Sets: slices.Clip(slices.Clone(f.Sets)), Place: f.Place}
	for i, c := range f.Chains {
		reads := false
		d := a.digestRecording(c, func(m string) {
			if isEndpointMapOf(m, c.Name) {
				reads = true
			} else {
				s.oddParts().maps = append(s.oddParts().maps, ChainMap{Chain: c.Name, Map: m})
			}
		})
		s.setChain(i, c.Name, d, reads)
		s.Rules += len(c.Rules)
	}
	s.SetElements(f)
	return s
}

// SetElements replaces the elements s records with f's, map by map in
// name order.
func (s *FragmentSummary) SetElements(f *Fragment) {
	n := 0
	for _, els := range f.Elements {
		n += len(els)
	}
	s.Elements = make([]NamedElement, 0, n)
	for _, m := range slices.Sorted(maps.Keys(f.Elements)) {
		for _, e := range f.Elements[m] {
			s.Elements = append(s.Elements, NamedElement{Map: m, MapElement: e})
		}
	}
}

// equal reports whether two summaries are the same.
func (s *FragmentSummary) equal(o *FragmentSummary) bool {
	if s == nil || o == nil {
		return s == o
	}
	return s.Place == o.Place && slices.Equal(s.Chains, o.Chains) && s.odd.equal(o.odd) && slices.Equal(s.Sets, o.Sets) && slices.Equal(s.Elements, o.Elements)
}

// Matches reports whether f is what s summarizes.
func (a *Applied) Matches(s *FragmentSummary, f *Fragment) bool {
	return s.equal(a.Summarize(f))
}

// Commit records in a that updates were applied (see PlanUpdate); a nil
// fragment removes that service. It returns the keys whose fragments
// changed.
func (a *Applied) Commit(updates map[string]*Fragment) (changed []string) {
	sums := make(map[string]*FragmentSummary, len(updates))
	for key, f := range updates {
		sums[key] = a.Summarize(f)
	}
	return a.record(sums)
}

// Commit records u in the Applied it was planned on, as Applied.Commit
// does, from the summaries made when it was planned.
func (u *Update) Commit() (changed []string) { return u.applied.record(u.summaries) }

// record replaces the summaries of the fragments in sums (nil deletes one)
// and returns the keys whose summary changed.
func (a *Applied) record(sums map[string]*FragmentSummary) (changed []string) {
	for key, sum := range sums {
		if !a.Services[key].equal(sum) {
			changed = append(changed, key)
		}
		if sum == nil {
			delete(a.Services, key)
		} else {
			a.Services[key] = sum
		}
	}
	return changed
}

// ElementCounts returns the number of elements of each named map.
func (a *Applied) ElementCounts() map[string]int {
	out := make(map[string]int, len(a.Maps))
	for _, m := range a.Maps {
		out[m.Name] = len(a.Top.Elements[m.Name])
	}
	for _, s := range a.Services {
		for _, e := range s.Elements {
			out[e.Map]++
		}
	}
	return out
}

// Objects counts the chains, rules, map elements and sets s stands for.
func (s *FragmentSummary) Objects() ObjectCounts {
	if s == nil {
		return ObjectCounts{}
	}
	return ObjectCounts{Chains: len(s.Chains), Rules: s.Rules, Elements: len(s.Elements), Sets: len(s.Sets)}
}

// digest hashes a chain's hook and rules.
func (a *Applied) digest(c *Chain) uint64 { return a.digestRecording(c, nil) }

// digestRecording is digest, giving record (if not nil) the name of each
// endpoint map c's rules read, in the same walk.
func (a *Applied) digestRecording(c *Chain, record func(endpointMap string)) uint64 {
	var h maphash.Hash
	h.SetSeed(a.seed)
	if c.Base != nil {
		maphash.WriteComparable(&h, *c.Base)
	}
	for i := range c.Rules {
		r := &c.Rules[i]
		maphash.WriteComparable(&h, len(r.Stmts))
		for _, st := range r.Stmts {
			if v, ok := st.(NumgenVmap); ok {
				if record != nil && v.Map != "" {
					record(v.Map)
				}
				// The one statement with slices, not comparable as a value.
				h.WriteByte(1)
				writeStrings(&h, []string{v.Map})
				writeStrings(&h, v.Targets)
				writeStrings(&h, v.Comments)
				continue
			}
			h.WriteByte(0)
			maphash.WriteComparable(&h, st)
		}
		writeStrings(&h, []string{r.Comment})
	}
	return h.Sum64()
}

// writeStrings writes each string with its length, so that no two lists
// of strings write the same bytes.
func writeStrings(h *maphash.Hash, ss []string) {
	maphash.WriteComparable(h, len(ss))
	for _, s := range ss {
		maphash.WriteComparable(h, len(s))
		h.WriteString(s)
	}
}
