package pipeline

import (
	"context"
	"fmt"
	"iter"
	"net/netip"
	"slices"
	"time"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/model"
)

// Pipeline programs the dataplane from a model.Store. The first sync, any
// sync after a failure and any sync asked to be full rewrite the whole
// table; every other sync touches only the services that changed. It is not
// safe for concurrent use.
type Pipeline struct {
	store      *model.Store
	generators []*nftgen.Generator
	dp         nftgen.Dataplane
	families   map[nftgen.Family]*familyState
	// retry holds Services the next sync recomputes whatever changed:
	// those that lost a conflict, on every sync until they win (e.g.
	// after the other Service is deleted), and those of a table the
	// rolling check read (CheckTable).
	retry map[types.NamespacedName]bool
	// OnProblem is called for each object, or part of one, that cannot be
	// programmed. It may be nil.
	OnProblem func(model.Problem)
	// OnRead is called with what a sync read of each Service it looked
	// at (nil for a deleted one), once per sync and Service, once per
	// family on a dual-stack full sync (see snapshot). It may be nil.
	OnRead func(types.NamespacedName, []svcmodel.ServicePortState)
	// readState reads one Service from the store (Store.State unless a
	// test counts the reads).
	readState func(types.NamespacedName) ([]svcmodel.ServicePortState, []model.Problem)
	// ChunkOps is the size of the transactions of a streamed cold sync
	// (nftgen.ChunkOps unless set).
	ChunkOps int
	// TableShards is the configured number of shard tables per family: 0
	// chooses by the number of Services, 1 is the single table (see
	// nftgen.ChooseLayout).
	TableShards int
	// local are the addresses of the node's interfaces (see
	// SetLocalAddresses); refusedAt the Services that named one of them,
	// to be recomputed when it is no longer the node's.
	local     map[netip.Addr]bool
	refusedAt map[netip.Addr]map[types.NamespacedName]bool
}

type familyState struct {
	gen *nftgen.Generator
	// applied is what the kernel holds, or nil when unknown.
	applied *nftgen.Applied
	// layout is the table layout of the last full sync.
	layout nftgen.TableLayout
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
	counts, lastCounts nftgen.RuleCounts
	// counter counts the compat view's rules of gen's fragments; counterOf
	// is the generator it was made for.
	counter   nftgen.RuleCounter
	counterOf *nftgen.Generator
	// objects counts the table's nftables objects, kept like counts.
	objects nftgen.ObjectCounts
	// owners maps an IP, protocol and port (or a node port), per claim
	// domain, to the service port that owns it, so that two Services
	// naming the same one can neither break the transaction nor shadow
	// each other (see claim and claimDomains).
	owners map[destination]claim
	// domains are gen's claim domains.
	domains claimDomains
	// inc, during a sync, tells who held each destination before it.
	inc *incumbents
	// refused counts, per Service, the destinations it names that are
	// not programmed, by reason (see refuse).
	refused map[types.NamespacedName]*[numRefusals]int32
}

// Result describes one sync.
type Result struct {
	// Full is true when the whole table was rewritten.
	Full bool
	// FullReason says why (of the first family rewritten).
	FullReason string
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

// New returns a Pipeline that programs one table per generator.
func New(store *model.Store, dp nftgen.Dataplane, generators ...*nftgen.Generator) *Pipeline {
	s := &Pipeline{store: store, generators: generators, dp: dp, families: map[nftgen.Family]*familyState{}, retry: map[types.NamespacedName]bool{},
		local: map[netip.Addr]bool{}, refusedAt: map[netip.Addr]map[types.NamespacedName]bool{}}
	for _, g := range generators {
		s.families[g.Family()] = newFamilyState(g)
	}
	return s
}

// SetGenerators replaces the generators (for example when the node's zone
// label changes) and makes the next Sync a full one.
func (s *Pipeline) SetGenerators(generators ...*nftgen.Generator) {
	s.generators = generators
	for _, g := range generators {
		fs := s.families[g.Family()]
		if fs == nil {
			s.families[g.Family()] = newFamilyState(g)
			continue
		}
		fs.gen, fs.applied = g, nil
	}
}

// Generators returns the generators, one per family.
func (s *Pipeline) Generators() []*nftgen.Generator { return s.generators }

// Sharded reports whether family f's tables are sharded, as of its last
// full sync.
func (s *Pipeline) Sharded(f nftgen.Family) bool {
	fs := s.families[f]
	return fs != nil && fs.layout.Sharded()
}

// Known reports whether the pipeline knows what every family's table holds.
// It does not before its first sync, after a family's sync failed, and
// after SetGenerators; its next Sync then rewrites those tables whatever
// it is asked.
func (s *Pipeline) Known() bool {
	for _, g := range s.generators {
		if s.families[g.Family()].applied == nil {
			return false
		}
	}
	return true
}

// Sync programs what changed since the last sync. With a reason, or for a
// family whose table must be rewritten anyway (see familyFullReason), it
// rewrites the whole table, which repairs any drift between the kernel and
// the model; otherwise it touches only the Services that changed. Whether
// to give a reason is the caller's policy (see Engine).
func (s *Pipeline) Sync(ctx context.Context, reason string) (Result, error) {
	start := time.Now()
	logger := klog.FromContext(ctx)
	changed := s.store.TakeChanged()
	// retry is a set: each of its names is looked for among the store's
	// only (a checked table adds a shard's Services to it).
	taken := len(changed)
	for nn := range s.retry {
		if !slices.Contains(changed[:taken], nn) {
			changed = append(changed, nn)
		}
	}
	clear(s.retry)
	res := Result{FamilyOps: map[nftgen.Family]int{}}
	snap := s.newSnapshot()
	var firstErr error
	for _, g := range s.generators {
		fs := s.families[g.Family()]
		txs, streamed, commit, err := s.planFamily(ctx, fs, snap, reason, changed, &res)
		if err != nil {
			fs.owners = nil
			if firstErr == nil {
				firstErr = fmt.Errorf("plan the %s table: %w", g.Family(), err)
			}
			res.Failed = append(res.Failed, g.Family())
			continue
		}
		ops, err := s.apply(ctx, g.Family(), res.Services, txs, streamed, commit)
		res.Ops += ops
		res.FamilyOps[g.Family()] = ops
		if err != nil {
			// Unknown now: the next sync rewrites everything, and learns
			// who holds each destination from the kernel.
			fs.applied, fs.owners = nil, nil
			res.Failed = append(res.Failed, g.Family())
			if firstErr == nil {
				firstErr = fmt.Errorf("sync %s table: %w", g.Family(), err)
			}
		}
	}
	res.Duration = time.Since(start)
	if firstErr != nil {
		return res, firstErr
	}
	logger.V(2).Info("Synced rules", "full", res.Full, "reason", res.FullReason, "services", res.Services, "ops", res.Ops, "elapsed", res.Duration)
	return res, nil
}

// planFamily plans one family's part of a sync: the whole table when
// familyFullReason says so (res says which Services that recomputes), or
// else the changed Services; commit records what was applied.
func (s *Pipeline) planFamily(ctx context.Context, fs *familyState, snap *snapshot, reason string, changed []types.NamespacedName, res *Result) (txs iter.Seq[*nftgen.Transaction], streamed bool, commit func() error, err error) {
	why := familyFullReason(reason, fs.applied != nil, func() bool { return s.countChanged(fs, snap, changed) })
	if why == "" {
		if !res.Full {
			res.Changed, res.Services = changed, len(changed)
		}
		tx, update := s.planUpdate(fs, snap, changed)
		return slices.Values([]*nftgen.Transaction{tx}), false, func() error { update(); return nil }, nil
	}
	fs.applied = nil
	if !res.Full {
		res.FullReason = why
	}
	res.Full = true
	res.Changed = s.store.ServiceNames()
	res.Services = len(res.Changed)
	// The one read of the kernel a full sync makes; what follows plans
	// from it without touching the kernel again.
	now, err := s.observe(ctx, fs, snap)
	if err != nil {
		return nil, false, nil, err
	}
	return s.planFull(ctx, fs, snap, now)
}

// apply sends txs in order, then records them with commit, and returns the
// operations sent. A streamed sync (a cold one, in chunks) stops between
// two transactions when ctx ends. It says at V(2) when it starts; at V(0)
// how far it got every few seconds and, if it took a second or more, when
// it ended.
func (s *Pipeline) apply(ctx context.Context, fam nftgen.Family, services int, txs iter.Seq[*nftgen.Transaction], streamed bool, commit func() error) (int, error) {
	logger := klog.FromContext(ctx)
	start, lastLog := time.Now(), time.Now()
	if streamed {
		logger.V(2).Info("Programming a new table in chunks; it is hooked up when complete", "family", fam, "services", services)
	}
	sent, n := 0, 0
	committed := func(ops int) error {
		n++
		sent += ops
		if streamed && time.Since(lastLog) >= progressInterval {
			lastLog = time.Now()
			logger.Info("Programming a new table, hooked up when complete", "family", fam, "services", services, "transactions", n, "operations", sent, "elapsed", time.Since(start).Round(time.Millisecond))
		}
		// A streamed sync stops between two transactions when ctx ends.
		if err := ctx.Err(); err != nil && streamed {
			return fmt.Errorf("stopped after %d transactions (the table is not hooked up yet): %w", n, err)
		}
		return nil
	}
	if streamed {
		if err := s.dp.ApplyStream(ctx, txs, committed); err != nil {
			return sent, fmt.Errorf("transaction %d: %w", n+1, err)
		}
	} else {
		for tx := range txs {
			if err := s.dp.Apply(ctx, tx); err != nil {
				return sent, err
			}
			if err := committed(len(tx.Ops)); err != nil {
				return sent, err
			}
		}
	}
	if err := commit(); err != nil {
		return sent, err
	}
	if streamed {
		v := 2
		if time.Since(start) >= time.Second {
			v = 0
		}
		logger.V(v).Info("Programmed and hooked up a new table", "family", fam, "services", services, "operations", sent, "transactions", n, "elapsed", time.Since(start).Round(time.Millisecond))
	}
	return sent, nil
}

// progressInterval is how often a long sync logs how far it got.
const progressInterval = 5 * time.Second

func (s *Pipeline) report(problems []model.Problem) {
	if s.OnProblem == nil {
		return
	}
	for _, p := range problems {
		s.OnProblem(p)
	}
}

// RuleCounts returns, per iptables table, the number of -A rules of the
// compat view of what the last successful sync applied in family f. It is
// computed at sync time, without listing the kernel.
func (s *Pipeline) RuleCounts(f nftgen.Family) nftgen.RuleCounts {
	fs := s.families[f]
	if fs == nil || fs.counts == nil {
		return nftgen.RuleCounts{}
	}
	out := nftgen.RuleCounts{}
	out.Add(fs.counts)
	return out
}

// LastRuleCounts returns, per iptables table, the rules of the fragments
// that the last successful sync wrote in family f.
func (s *Pipeline) LastRuleCounts(f nftgen.Family) nftgen.RuleCounts {
	out := nftgen.RuleCounts{}
	if fs := s.families[f]; fs != nil {
		out.Add(fs.lastCounts)
	}
	return out
}

// Objects returns the nftables objects of family f's table after the last
// successful sync.
func (s *Pipeline) Objects(f nftgen.Family) nftgen.ObjectCounts {
	if fs := s.families[f]; fs != nil {
		return fs.objects
	}
	return nftgen.ObjectCounts{}
}

// ElementCounts returns the number of elements of each named map that the
// last successful sync left in family f's table.
func (s *Pipeline) ElementCounts(f nftgen.Family) map[string]int {
	fs := s.families[f]
	if fs == nil || fs.applied == nil {
		return nil
	}
	return fs.applied.ElementCounts()
}

// Families returns the families the pipeline programs.
func (s *Pipeline) Families() []nftgen.Family {
	var out []nftgen.Family
	for _, g := range s.generators {
		out = append(out, g.Family())
	}
	return out
}

// countChanged updates the family's endpoint counts for the changed
// Services and reports whether the total crossed kube-proxy's large cluster
// threshold, which switches the generator's mode and changes every
// Service's rules. (A full sync counts as it goes: see eachCandidate.)
func (s *Pipeline) countChanged(fs *familyState, snap *snapshot, changed []types.NamespacedName) bool {
	for _, nn := range changed {
		fs.setEndpoints(nn, familyEndpoints(fs, snap.get(nn, true)))
	}
	return fs.setLargeCluster(largeCluster(fs.total))
}

// ruleCounter returns the compat rule counter of the family's generator.
func (fs *familyState) ruleCounter() nftgen.RuleCounter {
	if fs.counterOf != fs.gen {
		fs.counter, fs.counterOf = nftgen.NewRuleCounter(fs.gen.Top()), fs.gen
	}
	return fs.counter
}

func newFamilyState(g *nftgen.Generator) *familyState {
	return &familyState{gen: g, domains: newClaimDomains(g.Maps()), endpoints: map[types.NamespacedName]int{}, refused: map[types.NamespacedName]*[numRefusals]int32{}}
}
