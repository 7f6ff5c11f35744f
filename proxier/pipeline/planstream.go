package pipeline

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
)

// newFullSync returns the empty record of a full sync whose summaries go
// into applied.
func newFullSync(applied *nftgen.Applied, layout nftgen.TableLayout) *fullSync {
	applied.Layout = layout
	return &fullSync{
		applied: applied,
		layout:  layout,
		keys:    map[types.NamespacedName][]string{},
		owners:  map[destination]claim{},
	}
}

// streamFull visits the fragments of a full sync that never holds the
// whole ruleset, in two passes, and records their summaries in r: first
// each candidate's chains and sets as it is generated (chains, with their
// summary), then, once every claim is known, each settled fragment's map
// elements (elements). The generator (its large cluster mode) is final
// once the first candidate is visited: then r.applied gets its maps and
// top level and started is called, before either callback. Both callbacks
// are given the fragment's key. It stops when a callback returns false
// (done is then false) or ctx ends (the error).
func (s *Pipeline) streamFull(ctx context.Context, fs *familyState, snap *snapshot, r *fullSync, started func(), chains func(string, *nftgen.Fragment, *nftgen.FragmentSummary) bool, elements func(string, *nftgen.Fragment) bool) (done bool, err error) {
	var counter nftgen.RuleCounter
	begun := false
	start := func() {
		begun = true
		r.applied.Maps, r.applied.Top, r.applied.Layout = fs.gen.Maps(), fs.gen.Top(), r.layout
		counter = fs.ruleCounter()
		started()
	}
	var pending []heldElements
	stopped := false
	err = s.eachCandidate(ctx, fs, snap, r.owners, func(c *candidate) bool {
		if !begun {
			start()
		}
		f, key := &nftgen.Fragment{Chains: c.frag.Chains, Sets: c.frag.Sets, Place: c.frag.Place}, c.claim.frag
		sum := r.applied.Summarize(f)
		if !chains(key, f, sum) {
			stopped = true
			return false
		}
		sum.Counts = counter.Compact(f)
		r.applied.Services[key] = sum
		pending = append(pending, holdElements(c))
		return true
	})
	if err != nil || stopped {
		return false, err
	}
	if !begun { // no Service
		start()
	}
	for i := range pending {
		c := pending[i].candidate(fs)
		pending[i] = heldElements{} // let it go as the elements go out
		f, key := s.settle(c, r.owners), c.claim.frag
		if !elements(key, f) {
			return false, nil
		}
		sum := r.applied.Services[key]
		sum.SetElements(f)
		sum.Counts = sum.Counts.Plus(counter.Compact(f))
		r.keys[c.svc] = append(r.keys[c.svc], key)
	}
	return true, nil
}

// heldElements is what the second pass needs of a candidate whose chains
// went out: its claim, its map elements until every claim is known (flat,
// since a fragment's map of them took five times the size of its one
// element: a map's smallest table has eight slots; 10 MB of heap at
// 30,000 Services), and what a lost destination's report reads. The
// candidate itself, with what only its claims read, is let go: 12 MB at
// 100,000 Services.
type heldElements struct {
	claim    claim
	lbIPs    []netip.Addr
	elements []nftgen.NamedElement
	hcRules  int
	place    nftgen.Place
}

// holdElements keeps what the second pass needs of c, and lets go of the
// rest of its fragment.
func holdElements(c *candidate) heldElements {
	h := heldElements{claim: c.claim, lbIPs: c.lbIPs, hcRules: c.frag.HealthCheckRules, place: c.frag.Place}
	n := 0
	for _, els := range c.frag.Elements {
		n += len(els)
	}
	h.elements = make([]nftgen.NamedElement, 0, n)
	for _, m := range slices.Sorted(maps.Keys(c.frag.Elements)) {
		for _, e := range c.frag.Elements[m] {
			h.elements = append(h.elements, nftgen.NamedElement{Map: m, MapElement: e})
		}
	}
	c.frag = nil
	return h
}

// candidate returns the held candidate, made for family fs, with a
// fragment of its elements: what settling its claims reads.
func (h heldElements) candidate(fs *familyState) *candidate {
	f := &nftgen.Fragment{Elements: map[string][]nftgen.MapElement{}, HealthCheckRules: h.hcRules, Place: h.place}
	for _, e := range h.elements {
		f.Elements[e.Map] = append(f.Elements[e.Map], e.MapElement)
	}
	return &candidate{claim: h.claim, svc: h.claim.service(), frag: f, domains: fs.domains, lbIPs: h.lbIPs, fam: fs}
}

// planLive returns the transaction that patches the live table of fs's
// family where it differs from the desired rules, and what to record once
// it is applied; a nil transaction when the table cannot be patched in
// place. Like planCold it never holds the whole ruleset (streamFull): each
// Service's chains are compared with the live ones as they are made (by
// digest, against what the read recorded in digests, whose Applied is
// applied) and only those that differ are kept for the transaction; the
// map elements are compared once the last Service is read.
func (s *Pipeline) planLive(ctx context.Context, fs *familyState, snap *snapshot, live *nftgen.TableState, digests *nftgen.LiveDigests, applied *nftgen.Applied, layout nftgen.TableLayout) (*nftgen.Transaction, *fullSync, error) {
	r := newFullSync(applied, layout)
	var rec *nftgen.LayoutReconciler
	_, err := s.streamFull(ctx, fs, snap, r,
		func() {
			rec = nftgen.NewLayoutReconciler(live, digests, applied.Top, applied.Maps, fs.gen.ShardTops(layout), fs.gen.ShardMaps(), layout)
		},
		func(key string, f *nftgen.Fragment, sum *nftgen.FragmentSummary) bool {
			rec.AddService(key, f, sum)
			return true
		},
		func(key string, f *nftgen.Fragment) bool { rec.AddService(key, f, nil); return true })
	if err != nil {
		return nil, nil, fmt.Errorf("compare the %s table: %w", fs.gen.Family(), err)
	}
	return rec.Transaction(), r, nil
}
