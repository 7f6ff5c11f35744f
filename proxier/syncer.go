// Package proxier wires the model to the dataplane: it keeps the current
// Services and EndpointSlices, turns what changed into nftables fragments
// and applies them, one atomic transaction per family and sync.
package proxier

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/compat"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/model"
)

// Syncer programs the dataplane from a model.Store. The first sync (and any
// sync after a failure, or a call to RequestFullSync) rewrites the whole
// table; every other sync touches only the services that changed. It is not
// safe for concurrent use.
type Syncer struct {
	store      *model.Store
	generators []*nftgen.Generator
	dp         nftgen.Dataplane
	families   map[nftgen.Family]*familyState
	// retry holds Services that lost a conflict; they are recomputed on
	// every sync until they win (e.g. after the other Service is deleted).
	retry map[types.NamespacedName]bool
	// OnProblem is called for each object, or part of one, that cannot be
	// programmed. It may be nil.
	OnProblem func(model.Problem)
}

type familyState struct {
	gen *nftgen.Generator
	// applied is what the kernel holds, or nil when unknown.
	applied *nftgen.Ruleset
	// keys maps a Service to the fragment keys it owns in applied.
	keys map[types.NamespacedName][]string
	// endpoints counts the endpoints of each Service's ports in this
	// family, and total sums them, as kube-proxy does to decide on its
	// large cluster mode.
	endpoints map[types.NamespacedName]int
	total     int
	// counts are the -A rules per iptables table of the compat view of
	// applied, kept up to date from the fragments each sync replaces;
	// lastCounts those of the fragments the last sync wrote.
	counts, lastCounts compat.Counts
	// objects counts the table's nftables objects, kept like counts.
	objects nftgen.ObjectCounts
	// owners maps an IP, protocol and port (or a node port) to the
	// service port that owns it, whatever map it is in, so that two
	// Services naming the same one can neither break the transaction nor
	// shadow each other (see claim).
	owners map[nftgen.MapKey]claim
}

// SyncResult describes one sync.
type SyncResult struct {
	// Full is true when the whole table was rewritten.
	Full bool
	// Services is the number of Services that were recomputed.
	Services int
	// Changed are the Services that were recomputed (every Service on a
	// full sync).
	Changed []types.NamespacedName
	// Ops is the number of operations sent, over all families.
	Ops int
	// FamilyOps is the number of operations sent per family.
	FamilyOps map[nftgen.Family]int
	// Failed lists the families whose transaction failed.
	Failed []nftgen.Family
	// Duration is the time the sync took.
	Duration time.Duration
}

// NewSyncer returns a Syncer that programs one table per generator.
func NewSyncer(store *model.Store, dp nftgen.Dataplane, generators ...*nftgen.Generator) *Syncer {
	s := &Syncer{store: store, generators: generators, dp: dp, families: map[nftgen.Family]*familyState{}, retry: map[types.NamespacedName]bool{}}
	for _, g := range generators {
		s.families[g.Family()] = &familyState{gen: g, endpoints: map[types.NamespacedName]int{}}
	}
	return s
}

// SetGenerators replaces the generators (for example when the node's zone
// label changes) and makes the next Sync a full one.
func (s *Syncer) SetGenerators(generators ...*nftgen.Generator) {
	s.generators = generators
	for _, g := range generators {
		fs := s.families[g.Family()]
		if fs == nil {
			s.families[g.Family()] = &familyState{gen: g, endpoints: map[types.NamespacedName]int{}}
			continue
		}
		fs.gen, fs.applied = g, nil
	}
}

// RequestFullSync makes the next Sync rewrite every table, repairing any
// drift between the kernel and the model.
func (s *Syncer) RequestFullSync() {
	for _, fs := range s.families {
		fs.applied = nil
	}
}

// Sync programs what changed since the last sync.
func (s *Syncer) Sync(ctx context.Context) (SyncResult, error) {
	start := time.Now()
	logger := klog.FromContext(ctx)
	changed := s.store.TakeChanged()
	for nn := range s.retry {
		if !slices.Contains(changed, nn) {
			changed = append(changed, nn)
		}
	}
	clear(s.retry)
	res := SyncResult{FamilyOps: map[nftgen.Family]int{}}
	var firstErr error
	for _, g := range s.generators {
		fs := s.families[g.Family()]
		s.countEndpoints(fs, changed)
		var tx *nftgen.Transaction
		var commit func()
		if fs.applied == nil {
			res.Full = true
			res.Changed = s.store.ServiceNames()
			res.Services = len(res.Changed)
			var err error
			tx, commit, err = s.planFull(ctx, fs)
			if err != nil {
				firstErr = err
				res.Failed = append(res.Failed, g.Family())
				continue
			}
		} else {
			if !res.Full {
				res.Changed, res.Services = changed, len(changed)
			}
			tx, commit = s.planUpdate(fs, changed)
		}
		res.Ops += len(tx.Ops)
		res.FamilyOps[g.Family()] = len(tx.Ops)
		if err := s.dp.Apply(ctx, tx); err != nil {
			fs.applied = nil // unknown now: the next sync rewrites everything
			res.Failed = append(res.Failed, g.Family())
			if firstErr == nil {
				firstErr = fmt.Errorf("sync %s table: %w", g.Family(), err)
			}
			continue
		}
		commit()
	}
	res.Duration = time.Since(start)
	if firstErr != nil {
		return res, firstErr
	}
	logger.V(2).Info("Synced rules", "full", res.Full, "services", res.Services, "ops", res.Ops, "elapsed", res.Duration)
	return res, nil
}

func (s *Syncer) report(problems []model.Problem) {
	if s.OnProblem == nil {
		return
	}
	for _, p := range problems {
		s.OnProblem(p)
	}
}

// desired builds the whole ruleset of one family, with every conflict over
// a destination decided (see claim). It is what a full sync programs and
// what render prints.
func (s *Syncer) desired(fs *familyState) (*nftgen.Ruleset, map[types.NamespacedName][]string, map[nftgen.MapKey]claim) {
	rs := &nftgen.Ruleset{Family: fs.gen.Family(), Maps: fs.gen.Maps(), Top: fs.gen.Top(), Services: map[string]*nftgen.Fragment{}}
	var cands []*candidate
	owners := map[nftgen.MapKey]claim{}
	for _, nn := range s.store.ServiceNames() {
		for _, c := range s.candidates(fs, nn) {
			cands = append(cands, c)
			for _, k := range destinations(c.frag) {
				cl := c.claimOn(k)
				if cur, ok := owners[k]; !ok || cl.beats(cur) {
					owners[k] = cl
				}
			}
		}
	}
	keys := map[types.NamespacedName][]string{}
	for _, c := range cands {
		f, lost := withoutLost(c, owners)
		s.reportLost(c, lost)
		rs.Services[c.claim.frag] = f
		keys[c.svc] = append(keys[c.svc], c.claim.frag)
	}
	return rs, keys, owners
}

// DesiredRuleset returns the ruleset a full sync would program in family f
// now, through the same path as Sync: conflicts, node addresses and large
// cluster mode are decided as they are for the kernel. It is meant for a
// Syncer that has not synced (render); problems go to OnProblem.
func (s *Syncer) DesiredRuleset(f nftgen.Family) *nftgen.Ruleset {
	fs := s.families[f]
	if fs == nil {
		return nil
	}
	s.countEndpoints(fs, nil)
	rs, _, _ := s.desired(fs)
	return rs
}

// planFull builds the whole ruleset and a transaction that installs it over
// whatever the table holds.
func (s *Syncer) planFull(ctx context.Context, fs *familyState) (*nftgen.Transaction, func(), error) {
	inv, err := s.dp.Inventory(ctx, fs.gen.Family())
	if err != nil {
		return nil, nil, fmt.Errorf("inventory of %s table: %w", fs.gen.Family(), err)
	}
	rs, keys, owners := s.desired(fs)
	commit := func() {
		fs.applied, fs.keys, fs.owners = rs, keys, owners
		fs.counts = compat.CountFragment(rs.Top)
		for _, f := range rs.Services {
			fs.counts.Add(compat.CountFragment(f))
		}
		fs.lastCounts = compat.Counts{}
		fs.lastCounts.Add(fs.counts)
		fs.objects = rs.Top.Objects()
		for _, f := range rs.Services {
			fs.objects.Add(f.Objects(), 1)
		}
	}
	return nftgen.PlanFull(rs, inv), commit, nil
}

// planUpdate computes the fragments of the changed Services and a
// transaction that replaces only those. A changed Service that wins a
// destination from another Service makes that one recomputed too, so the
// result is the same as a full sync's.
func (s *Syncer) planUpdate(fs *familyState, changed []types.NamespacedName) (*nftgen.Transaction, func()) {
	updates := map[string]*nftgen.Fragment{}
	newKeys := map[types.NamespacedName][]string{}
	// The owner index is updated in place: if the transaction fails, the
	// next sync is a full one and rebuilds it.
	release := func(nn types.NamespacedName) {
		for _, key := range fs.keys[nn] {
			updates[key] = nil
			for _, els := range fs.applied.Services[key].Elements {
				for _, e := range els {
					if fs.owners[e.Key].frag == key {
						delete(fs.owners, e.Key)
					}
				}
			}
		}
		for _, key := range newKeys[nn] {
			updates[key] = nil
		}
		delete(newKeys, nn)
	}
	queued := map[types.NamespacedName]bool{}
	work := slices.Clone(changed)
	for _, nn := range work {
		queued[nn] = true
		release(nn)
	}
	for len(work) > 0 {
		nn := work[0]
		work = work[1:]
		queued[nn] = false
		cands := s.candidates(fs, nn)
		for _, c := range cands {
			for _, k := range destinations(c.frag) {
				cl := c.claimOn(k)
				cur, ok := fs.owners[k]
				if ok && cur.frag != cl.frag && !cl.beats(cur) {
					continue
				}
				if ok && cur.svc != nn && !queued[cur.svc] {
					// Evicted: recompute that Service without it.
					queued[cur.svc] = true
					work = append(work, cur.svc)
					release(cur.svc)
				}
				fs.owners[k] = cl
			}
		}
		for _, c := range cands {
			f, lost := withoutLost(c, fs.owners)
			s.reportLost(c, lost)
			updates[c.claim.frag] = f
			newKeys[nn] = append(newKeys[nn], c.claim.frag)
		}
	}
	commit := func() {
		fs.lastCounts = compat.Counts{}
		for key, f := range updates {
			fs.counts.Sub(compat.CountFragment(fs.applied.Services[key]))
			fs.counts.Add(compat.CountFragment(f))
			fs.objects.Add(fs.applied.Services[key].Objects(), -1)
			fs.objects.Add(f.Objects(), 1)
			if !fs.applied.Services[key].Equal(f) {
				fs.lastCounts.Add(compat.CountFragment(f))
			}
		}
		fs.applied.Commit(updates)
		for nn := range queued {
			if len(newKeys[nn]) == 0 {
				delete(fs.keys, nn)
			} else {
				fs.keys[nn] = newKeys[nn]
			}
		}
	}
	return nftgen.PlanUpdate(fs.applied, updates), commit
}

// reportLost reports the destinations a service port lost to another
// Service, and retries that Service on the next sync, when the other one
// may be gone.
func (s *Syncer) reportLost(c *candidate, lost []lostDestination) {
	if len(lost) == 0 {
		return
	}
	s.retry[c.svc] = true
	for _, l := range lost {
		s.report([]model.Problem{l.problem(c)})
	}
}

// candidates computes the fragments of one Service's ports in one family,
// before conflicts with other Services are decided.
func (s *Syncer) candidates(fs *familyState, nn types.NamespacedName) []*candidate {
	states, problems := s.store.State(nn)
	s.report(problems)
	var out []*candidate
	nodeIPs := fs.gen.Config().NodeIPs
	for i := range states {
		// An external IP that is this node's own address would capture
		// the node's port for every client: skip that address.
		if len(nodeIPs) > 0 {
			kept := states[i].ExternalIPs[:0:0]
			for j, ip := range states[i].ExternalIPs {
				if slices.Contains(nodeIPs, ip) {
					s.report([]model.Problem{{Kind: "Service", Object: nn, Field: fmt.Sprintf("spec.externalIPs[%d]", j),
						Reason: fmt.Sprintf("%s is this node's own address; not programmed, it would capture the node's port %d", ip, states[i].Port)}})
					continue
				}
				kept = append(kept, ip)
			}
			states[i].ExternalIPs = kept
		}
		if f := fs.gen.Service(&states[i]); f != nil {
			out = append(out, &candidate{claim: claim{frag: nftgen.ServiceKey(states[i].Name), svc: nn}, frag: f, clusterIPs: states[i].ClusterIPs})
		}
	}
	return out
}

// RuleCounts returns, per iptables table, the number of -A rules of the
// compat view of what the last successful sync applied in family f. It is
// computed at sync time, without listing the kernel.
func (s *Syncer) RuleCounts(f nftgen.Family) compat.Counts {
	fs := s.families[f]
	if fs == nil || fs.counts == nil {
		return compat.Counts{}
	}
	out := compat.Counts{}
	out.Add(fs.counts)
	return out
}

// LastRuleCounts returns, per iptables table, the rules of the fragments
// that the last successful sync wrote in family f.
func (s *Syncer) LastRuleCounts(f nftgen.Family) compat.Counts {
	out := compat.Counts{}
	if fs := s.families[f]; fs != nil {
		out.Add(fs.lastCounts)
	}
	return out
}

// Objects returns the nftables objects of family f's table after the last
// successful sync.
func (s *Syncer) Objects(f nftgen.Family) nftgen.ObjectCounts {
	if fs := s.families[f]; fs != nil {
		return fs.objects
	}
	return nftgen.ObjectCounts{}
}

// ElementCounts returns the number of elements of each named map that the
// last successful sync left in family f's table.
func (s *Syncer) ElementCounts(f nftgen.Family) map[string]int {
	fs := s.families[f]
	if fs == nil || fs.applied == nil {
		return nil
	}
	out := map[string]int{}
	for _, m := range fs.applied.Maps {
		out[m.Name] = len(fs.applied.Elements(m.Name))
	}
	return out
}

// Families returns the families the syncer programs.
func (s *Syncer) Families() []nftgen.Family {
	var out []nftgen.Family
	for _, g := range s.generators {
		out = append(out, g.Family())
	}
	return out
}

// countEndpoints updates the family's endpoint count for the changed
// Services (all of them before a full sync) and switches the generator's
// large cluster mode, which rewrites every service, when the total crosses
// kube-proxy's threshold.
func (s *Syncer) countEndpoints(fs *familyState, changed []types.NamespacedName) {
	if fs.applied == nil {
		changed = s.store.ServiceNames()
		clear(fs.endpoints)
		fs.total = 0
	}
	for _, nn := range changed {
		n := 0
		states, _ := s.store.State(nn)
		for _, st := range states {
			if _, ok := st.ClusterIP(modelFamily(fs.gen.Family())); !ok {
				continue
			}
			for _, e := range st.Endpoints {
				if model.FamilyOf(e.Addr) == modelFamily(fs.gen.Family()) {
					n++
				}
			}
		}
		fs.total += n - fs.endpoints[nn]
		if n == 0 {
			delete(fs.endpoints, nn)
		} else {
			fs.endpoints[nn] = n
		}
	}
	if large := fs.total > nftgen.LargeClusterEndpoints; large != fs.gen.Config().LargeCluster {
		fs.gen = fs.gen.WithLargeCluster(large)
		if fs.applied != nil {
			// Every service's comments change: rewrite all of them.
			fs.applied = nil
		}
	}
}

func modelFamily(f nftgen.Family) model.IPFamily {
	if f == nftgen.FamilyIPv6 {
		return model.IPv6
	}
	return model.IPv4
}

// Cleanup deletes nftproxy's tables in every family.
func Cleanup(ctx context.Context, dp nftgen.Dataplane) error {
	for _, f := range []nftgen.Family{nftgen.FamilyIPv4, nftgen.FamilyIPv6} {
		if err := dp.DeleteTable(ctx, f); err != nil {
			return err
		}
	}
	return nil
}
