package pipeline

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/nftgen"
)

// fullSync is what a full sync leaves for the family once committed.
type fullSync struct {
	applied *nftgen.Applied
	keys    map[types.NamespacedName][]string
	owners  map[destination]claim
	// layout is the table layout the sync programs.
	layout nftgen.TableLayout
	// err is set when a streamed sync stopped before it was complete.
	err error
}

// commit makes r the family's state after a successful full sync.
func (r *fullSync) commit(fs *familyState) error {
	if r.err != nil {
		return r.err
	}
	fs.applied, fs.keys, fs.owners, fs.layout = r.applied, r.keys, r.owners, r.layout
	fs.inc = nil // it held the owners before this sync
	fs.counts = fs.ruleCounter().Fragment(r.applied.Top)
	fs.objects = r.applied.Top.Objects()
	for _, sum := range r.applied.Services {
		fs.counts.AddFragment(sum.Counts, 1)
		fs.objects.Add(sum.Objects(), 1)
	}
	fs.lastCounts = nftgen.RuleCounts{}
	fs.lastCounts.Add(fs.counts)
	return nil
}

// fullSyncOf is the state of a full sync that programs rs.
func fullSyncOf(rs *nftgen.Ruleset, layout nftgen.TableLayout, counter nftgen.RuleCounter, keys map[types.NamespacedName][]string, owners map[destination]claim) *fullSync {
	r := &fullSync{applied: nftgen.AppliedFrom(rs), keys: keys, owners: owners, layout: layout}
	r.applied.Layout = layout
	for key, f := range rs.Services {
		r.applied.Services[key].Counts = counter.Compact(f)
	}
	return r
}

// DesiredTables returns DesiredRuleset(f) spread over the tables of the
// layout a full sync would choose now (nftgen.ChooseLayout): the main
// table first, then each shard.
func (s *Pipeline) DesiredTables(f nftgen.Family) []*nftgen.Ruleset {
	rs := s.DesiredRuleset(f)
	if rs == nil {
		return nil
	}
	fs := s.families[f]
	layout := s.chooseLayout(fs)
	return nftgen.SplitRuleset(rs, layout, fs.gen.ShardTops(layout), fs.gen.ShardMaps())
}

// chooseLayout is the table layout of fs's family at a full sync now: by
// the configuration and the number of Services of the family.
func (s *Pipeline) chooseLayout(fs *familyState) nftgen.TableLayout {
	services, open := s.store.ServiceCount(fs.gen.Family() == nftgen.FamilyIPv6)
	return nftgen.ChooseLayout(s.TableShards, services, open, fs.layout)
}

// planFull returns the transactions that install the whole ruleset over
// what the tables hold (now, as observe read them), and what to record
// once they are applied. It reads nothing from the kernel.
func (s *Pipeline) planFull(ctx context.Context, fs *familyState, snap *snapshot, now observed) (txs iter.Seq[*nftgen.Transaction], streamed bool, commit func() error, err error) {
	fam := fs.gen.Family()
	top := &nftgen.Ruleset{Top: fs.gen.Top()}
	layout := s.chooseLayout(fs)
	applied, digests := now.applied, now.digests
	live, inv, rs, keys, owners := now.live, now.inv, now.rs, now.keys, now.owners
	if !inv.Hooked(top) {
		// Nothing hooked up yet (none, or one whose streamed sync did not
		// finish): build it anew in chunks.
		return s.planAnew(ctx, fs, snap, applied, layout, inv)
	}
	if live != nil {
		// A live table is patched where it differs from the desired
		// rules, in one transaction: packets see the old rules or the new
		// ones, never a table in between, and a table nothing touched
		// costs no commit.
		if nftgen.CanPatch(live) {
			tx, r, err := s.planLive(ctx, fs, snap, live, digests, applied, layout)
			if err != nil {
				return nil, false, nil, err
			}
			if tx != nil {
				if !tx.Empty() {
					klog.FromContext(ctx).Info("The live table differs from the desired rules; patching it", "family", fam, "operations", len(tx.Ops))
				}
				return slices.Values([]*nftgen.Transaction{tx}), false, func() error { return r.commit(fs) }, nil
			}
		}
		if live.Foreign() {
			klog.FromContext(ctx).Info("The table of nftproxy's name is kube-proxy's nftables mode's; replacing it in one transaction", "family", fam, "chains", len(live.Chains))
		} else {
			klog.FromContext(ctx).Info("The live table holds objects nftproxy cannot patch in place; rewriting all of it", "family", fam, "unknown", len(live.Unknown))
		}
		if rs, keys, owners, err = s.desired(ctx, fs, snap); err != nil {
			return nil, false, nil, err
		}
		// A rewrite deletes what it does not program: the chains the
		// read omitted too.
		inv = digests.Inventory(live)
	}
	txs = slices.Values([]*nftgen.Transaction{planRewrite(fs.gen, rs, layout, inv)})
	r := fullSyncOf(rs, layout, fs.ruleCounter(), keys, owners)
	return txs, false, func() error { return r.commit(fs) }, nil
}

// planAnew returns the streamed cold sync of fs's tables; when tables
// exist that nothing hooks up (unfinished, the inventory of what an
// interrupted streamed sync left), the stream's first transaction
// deletes them.
func (s *Pipeline) planAnew(ctx context.Context, fs *familyState, snap *snapshot, applied *nftgen.Applied, layout nftgen.TableLayout, unfinished *nftgen.Inventory) (iter.Seq[*nftgen.Transaction], bool, func() error, error) {
	chunk := s.ChunkOps
	if chunk <= 0 {
		chunk = nftgen.ChunkOps
	}
	txs, r := s.planCold(ctx, fs, snap, applied, layout, chunk)
	if unfinished != nil {
		txs = withFirst(deleteTables(fs.gen.Family(), unfinished), txs)
	}
	return txs, true, func() error { return r.commit(fs) }, nil
}

// deleteTables returns the transaction that deletes the family's main
// table and the shard tables inv lists.
func deleteTables(fam nftgen.Family, inv *nftgen.Inventory) *nftgen.Transaction {
	tx := &nftgen.Transaction{Family: fam, Ops: []nftgen.Op{{Kind: nftgen.OpDeleteTable}}}
	for _, name := range slices.Sorted(maps.Keys(inv.Shards)) {
		tx.Ops = append(tx.Ops, nftgen.Op{Kind: nftgen.OpDeleteTable, Table: name})
	}
	return tx
}

// withFirst returns the transactions of rest after first.
func withFirst(first *nftgen.Transaction, rest iter.Seq[*nftgen.Transaction]) iter.Seq[*nftgen.Transaction] {
	return func(yield func(*nftgen.Transaction) bool) {
		if !yield(first) {
			return
		}
		rest(yield)
	}
}

// liveDigests returns what a read of the family's tables keeps, keyed
// like a's digests: the rules of every table's shared chains (the top
// levels') whole, and of the other chains digests, compared with the
// desired or applied ones as they come.
func (fs *familyState) liveDigests(a *nftgen.Applied) *nftgen.LiveDigests {
	return a.LiveDigests(append((&nftgen.Ruleset{Top: fs.gen.Top()}).ChainNames(), nftgen.ShardTopChainNames()...))
}

// observed is what a full sync read of a family's tables: the tables as
// they are (live, nil when they could not be read) and their inventory
// (of a read, only the chains live lists: digests.Inventory adds those the
// read omitted); when they could not be read, the desired ruleset is already computed
// (rs, keys, owners), as listing them by name needed it. applied is the
// empty record the full sync fills, and digests what the read kept of the
// chains outside the top levels, keyed like applied's.
type observed struct {
	applied *nftgen.Applied
	digests *nftgen.LiveDigests
	live    *nftgen.TableState
	inv     *nftgen.Inventory
	rs      *nftgen.Ruleset
	keys    map[types.NamespacedName][]string
	owners  map[destination]claim
}

// observe reads the family's tables once, keeping the shared chains whole
// and the others as digests, and learns from them who held each
// destination when the pipeline does not know (a restart, a failed sync).
// Only if they cannot be read are their objects listed by name instead.
func (s *Pipeline) observe(ctx context.Context, fs *familyState, snap *snapshot) (observed, error) {
	fam := fs.gen.Family()
	applied := nftgen.NewApplied(fam, nil, nil)
	digests := fs.liveDigests(applied)
	live, err := s.dp.ReadCompact(ctx, fam, digests.Finish)
	fs.inc = nil
	if fs.owners != nil {
		fs.inc = appliedIncumbents(fs.owners)
	} else if err == nil && live != nil {
		fs.inc = kernelIncumbents(live.Merged(), fs.domains)
	}
	if err == nil {
		if live != nil && live.Unreached > 0 {
			klog.FromContext(ctx).Info("The table holds chains that no rule reaches; at this size they are not listed (the kernel's listing takes minutes): those nftproxy programs are emptied and refilled, the others stay in place",
				"family", fam, "chains", live.Unreached)
		}
		return observed{applied: applied, digests: digests, live: live, inv: live.Inventory()}, nil
	}
	klog.FromContext(ctx).Error(err, "Reading the table failed; listing it to rewrite it", "family", fam)
	o := observed{applied: applied, digests: digests}
	if o.rs, o.keys, o.owners, err = s.desired(ctx, fs, snap); err != nil {
		return o, err
	}
	if o.inv, err = s.dp.Inventory(ctx, fam, o.rs.ChainNames()); err != nil {
		return o, fmt.Errorf("inventory of %s table: %w", fam, err)
	}
	return o, nil
}

// planRewrite returns the transaction that rewrites every table of the
// family to hold rs in layout, whatever inv (what the tables hold) says:
// Services move between the main table and shards, and shard tables not
// in the layout go, in the same transaction.
func planRewrite(g *nftgen.Generator, rs *nftgen.Ruleset, layout nftgen.TableLayout, inv *nftgen.Inventory) *nftgen.Transaction {
	parts := nftgen.SplitRuleset(rs, layout, g.ShardTops(layout), g.ShardMaps())
	invs := []*nftgen.Inventory{inv}
	var stray []string
	if inv != nil {
		for i := 1; i < len(parts); i++ {
			invs = append(invs, inv.Shards[nftgen.ShardTable(i)])
		}
		for name := range inv.Shards {
			if n, ok := nftgen.ShardIndex(name); !ok || n >= len(parts) {
				stray = append(stray, name)
			}
		}
	}
	return nftgen.PlanFullSharded(parts, invs, stray)
}

// planCold returns the transactions of a streamed cold sync of fs's table,
// made as they are taken: each Service's fragments are generated in turn,
// their chains and rules go into the current chunk at once, and their map
// elements, which depend on every other Service's claims, into the chunks
// after the last Service. Only a summary of each fragment is kept, so that
// the whole ruleset never exists in memory at once. The result is complete
// once every transaction was taken; its err says why not otherwise. The
// summaries go into applied, an empty Applied.
func (s *Pipeline) planCold(ctx context.Context, fs *familyState, snap *snapshot, applied *nftgen.Applied, layout nftgen.TableLayout, chunk int) (iter.Seq[*nftgen.Transaction], *fullSync) {
	fam := fs.gen.Family()
	r := newFullSync(applied, layout)
	r.err = errors.New("the streamed sync did not finish")
	txs := func(yield func(*nftgen.Transaction) bool) {
		var b *nftgen.ColdBuilder
		add := func(key string, f *nftgen.Fragment) bool {
			tx := b.AddService(key, f)
			return tx == nil || yield(tx)
		}
		done, err := s.streamFull(ctx, fs, snap, r,
			func() {
				b = nftgen.NewShardedColdBuilder(fam, r.applied.Maps, r.applied.Top, fs.gen.ShardMaps(), fs.gen.ShardTops(layout), layout, chunk)
			},
			func(key string, f *nftgen.Fragment, _ *nftgen.FragmentSummary) bool { return add(key, f) }, add)
		if err != nil {
			r.err = err
			return
		}
		if !done {
			return
		}
		for _, tx := range b.Finish() {
			if !yield(tx) {
				return
			}
		}
		r.err = nil
	}
	return txs, r
}

// planUpdate computes the fragments of the changed Services and a
// transaction that replaces only those. A changed Service that wins a
// destination from another Service makes that one recomputed too, so the
// result is the same as a full sync's.
func (s *Pipeline) planUpdate(fs *familyState, snap *snapshot, changed []types.NamespacedName) (*nftgen.Transaction, func()) {
	updates := map[string]*nftgen.Fragment{}
	newKeys := map[types.NamespacedName][]string{}
	// The owner index is updated in place: if the transaction fails, the
	// next sync is a full one and rebuilds it. The journal remembers who
	// held each destination it changes before this sync.
	j := &ownerJournal{owners: fs.owners, prior: map[destination]string{}}
	fs.inc = &incumbents{frag: j.heldBefore}
	defer func() { fs.inc = nil }()
	release := func(nn types.NamespacedName) {
		for _, key := range fs.keys[nn] {
			updates[key] = nil
			for _, e := range fs.applied.Services[key].Elements {
				if d := fs.domains.of(e.Map, e.Key); fs.owners[d].frag == key {
					j.del(d)
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
		cands := s.candidates(fs, nn, snap.get(nn, true))
		for _, c := range cands {
			for _, k := range c.domains.destinations(c.frag) {
				cl := c.claimOn(k)
				cur, ok := fs.owners[k]
				cur.held = ok && j.heldBefore(k) == cur.frag
				if ok && cur.frag != cl.frag && !cl.beats(cur) {
					continue
				}
				if holder := cur.service(); ok && holder != nn && !queued[holder] {
					// Evicted: recompute that Service without it.
					queued[holder] = true
					work = append(work, holder)
					release(holder)
				}
				j.set(k, cl)
			}
		}
		for _, c := range cands {
			updates[c.claim.frag] = s.settle(c, fs.owners)
			newKeys[nn] = append(newKeys[nn], c.claim.frag)
		}
	}
	planned := fs.applied.PlanUpdate(updates)
	return planned.Tx, func() { fs.recordUpdate(planned, updates, queued, newKeys) }
}

// recordUpdate makes a planned update, now in the kernel, fs's state: the
// applied summaries, the rule and object counts of the replaced fragments
// (updates), and the fragment keys of each recomputed Service (queued).
func (fs *familyState) recordUpdate(planned *nftgen.Update, updates map[string]*nftgen.Fragment, queued map[types.NamespacedName]bool, newKeys map[types.NamespacedName][]string) {
	counts := make(map[string]nftgen.FragmentRuleCounts, len(updates))
	for key, f := range updates {
		fs.counts.AddFragment(fs.applied.Services[key].RuleCounts(), -1)
		fs.objects.Add(fs.applied.Services[key].Objects(), -1)
		fs.objects.Add(f.Objects(), 1)
		if f != nil {
			counts[key] = fs.ruleCounter().Compact(f)
			fs.counts.AddFragment(counts[key], 1)
		}
	}
	changed := planned.Commit()
	for key, c := range counts {
		fs.applied.Services[key].Counts = c
	}
	fs.lastCounts = nftgen.RuleCounts{}
	for _, key := range changed {
		fs.lastCounts.AddFragment(counts[key], 1)
	}
	for nn := range queued {
		if len(newKeys[nn]) == 0 {
			delete(fs.keys, nn)
		} else {
			fs.keys[nn] = newKeys[nn]
		}
	}
}
