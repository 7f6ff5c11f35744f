package proxier

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
)

// planLive returns the transaction that patches the live table of fs's
// family where it differs from the desired rules, and what to record once
// it is applied; a nil transaction when the table cannot be patched in
// place. Like planCold it generates one Service at a time and keeps a
// summary of each fragment, never the whole ruleset: each Service's chains
// are compared with the live ones as they are made (by digest, against
// what the read recorded in digests, whose Applied is applied) and only
// those that differ are kept, for the transaction; the map elements,
// which depend on every other Service's claims, are compared once the
// last Service is read.
func (s *Syncer) planLive(ctx context.Context, fs *familyState, snap *snapshot, live *nftgen.TableState, digests *nftgen.LiveDigests, applied *nftgen.Applied) (*nftgen.Transaction, *fullSync, error) {
	r := &fullSync{
		applied:    applied,
		keys:       map[types.NamespacedName][]string{},
		owners:     map[destination]claim{},
		fragCounts: map[string]nftgen.FragmentRuleCounts{},
	}
	var rec *nftgen.Reconciler
	var counter nftgen.RuleCounter
	// The generator (its large cluster mode) is final once the first
	// candidate is visited.
	start := func() {
		applied.Maps, applied.Top = fs.gen.Maps(), fs.gen.Top()
		rec, counter = nftgen.NewReconciler(live, digests, applied.Top, applied.Maps), fs.ruleCounter()
	}
	var pending []*candidate
	err := s.eachCandidate(ctx, fs, snap, r.owners, func(c *candidate) bool {
		if rec == nil {
			start()
		}
		chains := &nftgen.Fragment{Chains: c.frag.Chains, Sets: c.frag.Sets}
		key := c.claim.frag
		sum := applied.Summarize(chains)
		rec.Add(chains, sum)
		applied.Services[key] = sum
		r.fragCounts[key] = counter.Compact(chains)
		c.frag = &nftgen.Fragment{Elements: c.frag.Elements, HealthCheckRules: c.frag.HealthCheckRules}
		pending = append(pending, c)
		return true
	})
	if err != nil {
		return nil, nil, fmt.Errorf("compare the %s table: %w", fs.gen.Family(), err)
	}
	if rec == nil { // no Service
		start()
	}
	for _, c := range pending {
		f, key := s.settle(c, r.owners), c.claim.frag
		rec.Add(f, nil)
		applied.Services[key].SetElements(f)
		r.fragCounts[key] = r.fragCounts[key].Plus(counter.Compact(f))
		r.keys[c.svc] = append(r.keys[c.svc], key)
	}
	return rec.Transaction(), r, nil
}
