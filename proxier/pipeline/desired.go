package pipeline

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/svcmodel"
	"github.com/nftproxy/nftproxy/proxier/model"
)

// eachCandidate computes the candidate fragments of every Service in name
// order, records each one's claims in owners, and calls visit with it; it
// stops when visit returns false or ctx ends (the error). A candidate's
// elements are final only once every claim is in owners (see settle).
//
// It also counts the family's endpoints anew, which decide kube-proxy's
// large cluster mode and so every endpoint rule's comment. The total is
// known only at the end, but it only grows: until it passes the threshold
// the Services read are held and generated once the mode is decided. What
// is held is what this family's generator reads (see familyStates), so it
// stays small: at most the threshold's endpoints, and nothing of a Service
// the family has no port of.
func (s *Pipeline) eachCandidate(ctx context.Context, fs *familyState, snap *snapshot, owners map[destination]claim, visit func(*candidate) bool) error {
	type read struct {
		nn     types.NamespacedName
		states []svcmodel.ServicePortState
	}
	clear(fs.endpoints)
	clear(fs.refused)
	fs.total = 0
	var held []read
	decided := false
	emit := func(r read) bool { return s.claimAndVisit(fs, r.nn, r.states, owners, visit) }
	emitHeld := func() bool {
		for _, r := range held {
			if !emit(r) {
				return false
			}
		}
		held = nil
		return true
	}
	for i, nn := range s.store.ServiceNames() {
		if i%1024 == 0 && ctx.Err() != nil {
			return fmt.Errorf("stopped while building the ruleset: %w", ctx.Err())
		}
		r := read{nn: nn, states: snap.get(nn, false)}
		fs.setEndpoints(nn, familyEndpoints(fs, r.states))
		if decided {
			if !emit(r) {
				return nil
			}
			continue
		}
		if r.states = familyStates(fs, r.states); len(r.states) > 0 {
			held = append(held, r)
		}
		if largeCluster(fs.total) {
			decided = true
			fs.setLargeCluster(true)
			if !emitHeld() {
				return nil
			}
		}
	}
	if !decided {
		fs.setLargeCluster(false)
		emitHeld()
	}
	return nil
}

// claimAndVisit makes each candidate of nn's states claim its
// destinations in owners (the best claim wins) and visits it; false when
// visit said stop.
func (s *Pipeline) claimAndVisit(fs *familyState, nn types.NamespacedName, states []svcmodel.ServicePortState, owners map[destination]claim, visit func(*candidate) bool) bool {
	for _, c := range s.candidates(fs, nn, states) {
		for _, k := range c.domains.destinations(c.frag) {
			cl := c.claimOn(k)
			if cur, ok := owners[k]; !ok || cl.beats(cur) {
				owners[k] = cl
			}
		}
		if !visit(c) {
			return false
		}
	}
	return true
}

// settle returns c's fragment without the destinations it lost to another
// Service in owners, and reports those.
func (s *Pipeline) settle(c *candidate, owners map[destination]claim) *nftgen.Fragment {
	f, lost := withoutLost(c, owners)
	s.reportLost(c, lost)
	return f
}

// desired builds the whole ruleset of one family, with every conflict over
// a destination decided (see claim). It is what a full sync of a live table
// programs and what render prints; a cold sync builds the same through
// planCold, a Service at a time.
func (s *Pipeline) desired(ctx context.Context, fs *familyState, snap *snapshot) (*nftgen.Ruleset, map[types.NamespacedName][]string, map[destination]claim, error) {
	rs := &nftgen.Ruleset{Family: fs.gen.Family(), Maps: fs.gen.Maps(), Top: fs.gen.Top(), Services: map[string]*nftgen.Fragment{}}
	var cands []*candidate
	owners := map[destination]claim{}
	if err := s.eachCandidate(ctx, fs, snap, owners, func(c *candidate) bool {
		cands = append(cands, c)
		return true
	}); err != nil {
		return nil, nil, nil, err
	}
	keys := map[types.NamespacedName][]string{}
	for _, c := range cands {
		rs.Services[c.claim.frag] = s.settle(c, owners)
		keys[c.svc] = append(keys[c.svc], c.claim.frag)
	}
	return rs, keys, owners, nil
}

// DesiredRuleset returns the ruleset a full sync would program in family f
// now, through the same path as Sync: conflicts, node addresses and large
// cluster mode are decided as they are for the kernel. It is meant for a
// Pipeline that has not synced (render); problems go to OnProblem.
func (s *Pipeline) DesiredRuleset(f nftgen.Family) *nftgen.Ruleset {
	fs := s.families[f]
	if fs == nil {
		return nil
	}
	snap := s.newSnapshot()
	snap.onRead = nil // not a sync: nothing follows it
	rs, _, _, _ := s.desired(context.Background(), fs, snap)
	return rs
}

// reportLost reports the destinations a service port lost to another
// Service, and retries that Service on the next sync, when the other one
// may be gone.
func (s *Pipeline) reportLost(c *candidate, lost []lostDestination) {
	if len(lost) == 0 {
		return
	}
	s.retry[c.svc] = true
	c.fam.refuse(c.svc, refusedConflict, len(lost))
	for _, l := range lost {
		s.report([]model.Problem{l.problem(c)})
	}
}

// candidates computes the fragments of one Service's ports in one family,
// from what the sync read of it, before conflicts with other Services are
// decided.
func (s *Pipeline) candidates(fs *familyState, nn types.NamespacedName, states []svcmodel.ServicePortState) []*candidate {
	var out []*candidate
	var since int64
	if t := s.store.Created(nn); !t.IsZero() {
		since = t.UnixNano()
	}
	delete(fs.refused, nn)
	for i := range states {
		st := states[i] // the snapshot's states are shared by every family
		if !s.withoutNodeAddresses(fs, nn, &st) {
			continue
		}
		if f := fs.gen.Service(&st); f != nil {
			out = append(out, &candidate{claim: claim{frag: nftgen.ServiceKey(st.Name), since: since}, svc: nn, frag: f, domains: fs.domains, clusterIPs: st.ClusterIPs, lbIPs: st.LoadBalancerIPs, inc: fs.inc, fam: fs})
		}
	}
	return out
}
