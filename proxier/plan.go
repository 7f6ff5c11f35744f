package proxier

import (
	"context"
	"fmt"
	"iter"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/compat"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/model"
)

// desired builds the whole ruleset of one family, with every conflict over
// a destination decided (see claim). It is what a full sync programs and
// what render prints.
func (s *Syncer) desired(ctx context.Context, fs *familyState) (*nftgen.Ruleset, map[types.NamespacedName][]string, map[destination]claim, error) {
	rs := &nftgen.Ruleset{Family: fs.gen.Family(), Maps: fs.gen.Maps(), Top: fs.gen.Top(), Services: map[string]*nftgen.Fragment{}}
	var cands []*candidate
	owners := map[destination]claim{}
	for i, nn := range s.store.ServiceNames() {
		if i%1024 == 0 && ctx.Err() != nil {
			return nil, nil, nil, fmt.Errorf("stopped while building the ruleset: %w", ctx.Err())
		}
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
	return rs, keys, owners, nil
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
	rs, _, _, _ := s.desired(context.Background(), fs)
	return rs
}

// planFull builds the whole ruleset and the transactions that install it
// over whatever the table holds.
func (s *Syncer) planFull(ctx context.Context, fs *familyState) (txs iter.Seq[*nftgen.Transaction], streamed bool, commit func(), err error) {
	fam := fs.gen.Family()
	rs, keys, owners, err := s.desired(ctx, fs)
	if err != nil {
		return nil, false, nil, err
	}
	// The table as it is: read once, it tells whether the table is live
	// and what differs. Only if it cannot be read are its objects listed
	// by name instead, and a live one rewritten.
	var inv *nftgen.Inventory
	live, err := s.dp.Read(ctx, fam)
	if err == nil {
		inv = live.Inventory()
	} else {
		klog.FromContext(ctx).Error(err, "Reading the table failed; listing it to rewrite it", "family", fam)
		if inv, err = s.dp.Inventory(ctx, fam, rs.ChainNames()); err != nil {
			return nil, false, nil, fmt.Errorf("inventory of %s table: %w", fam, err)
		}
	}
	if inv.Hooked(rs) {
		// A live table is patched where it differs from rs, in one
		// transaction: packets see the old rules or the new ones, never a
		// table in between, and a table nothing touched costs no commit.
		txs = slices.Values([]*nftgen.Transaction{s.reconcile(ctx, rs, live, inv)})
	} else {
		// Nothing hooked up yet (none, or one whose streamed sync did not
		// finish): build it anew in chunks.
		if inv != nil {
			if err := s.dp.DeleteTable(ctx, fam); err != nil {
				return nil, false, nil, fmt.Errorf("delete the unfinished %s table: %w", fam, err)
			}
		}
		chunk := s.ChunkOps
		if chunk <= 0 {
			chunk = nftgen.ChunkOps
		}
		txs, streamed = nftgen.PlanCold(rs, chunk), true
	}
	commit = func() {
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
	return txs, streamed, commit, nil
}

// reconcile returns the transaction that makes the hooked table of rs's
// family hold rs, from what the table holds now (live, nil when it could
// not be read; inv lists it): only what differs, or a rewrite of
// everything when the table cannot be read or patched.
func (s *Syncer) reconcile(ctx context.Context, rs *nftgen.Ruleset, live *nftgen.TableState, inv *nftgen.Inventory) *nftgen.Transaction {
	logger := klog.FromContext(ctx)
	if live == nil {
		return nftgen.PlanFull(rs, inv)
	}
	if tx := nftgen.PlanReconcile(rs, live); tx != nil {
		if !tx.Empty() {
			logger.Info("The live table differs from the desired rules; patching it", "family", rs.Family, "operations", len(tx.Ops))
		}
		return tx
	}
	logger.Info("The live table holds objects nftproxy cannot patch in place; rewriting all of it", "family", rs.Family, "unknown", len(live.Unknown))
	return nftgen.PlanFull(rs, inv)
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
			for m, els := range fs.applied.Services[key].Elements {
				for _, e := range els {
					if d := (destination{Map: claimDomain(m), Key: e.Key}); fs.owners[d].frag == key {
						delete(fs.owners, d)
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
