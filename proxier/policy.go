package proxier

import (
	"context"
	"net/netip"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/pipeline"
	"github.com/nftproxy/nftproxy/proxier/runner"
)

// Reasons for a full sync, as fullSyncReason reports them and the drift
// repair metric counts them.
const (
	fullHourly        = "hourly full sync"
	fullMapsChanged   = "map elements changed"
	fullTableChanged  = "table changed"
	fullUnseenCommits = "unseen commits"
	// fullTableCheck: the rolling check found a table that differs from
	// what nftproxy applied (see checkDue).
	fullTableCheck = "table check"
)

// fullSyncReason decides whether this sync rewrites the whole table and
// says why, or returns "" for a sync of what changed only. With
// familyFullReason and checkDue it is the one place that decides. A full
// sync happens
//   - when the pipeline does not know a table (the first sync, or the last
//     one of that family failed);
//   - when an event asked for one (drift seen by the watch or by the
//     rolling check, new generators);
//   - with the single table, at any sync once the last full one is
//     FullSyncPeriod old, as kube-proxy does (so a steady stream of
//     changes does not put it off); sharded tables are instead checked
//     one at a time over that period (checkDue), since rewriting them all
//     would hold every change up for a read of the whole ruleset (tens
//     of seconds at 100,000 Services);
//   - on a periodic sync, when the kernel's map elements differ from what
//     was applied (drift the watch cannot attribute to nftproxy's table);
//     not counted with sharded tables while the watch runs (see below).
//
// Called with mu held.
func (e *Engine) fullSyncReason(ctx context.Context, reason runner.Reason) string {
	switch {
	case !e.pipe.Known():
		return pipeline.FullUnknown
	case e.needFull != "":
		return e.needFull
	case !e.rolling() && e.clock.Since(e.lastFull) >= FullSyncPeriod:
		return fullHourly
	case reason != runner.Periodic:
		return ""
	case e.rolling() && e.watching.Load():
		// The watch reports every element change of nftproxy's tables
		// and the rolling check compares every element within the hour;
		// counting all the tables' elements at every periodic sync, the
		// lock held (0.24-0.28 s at 100,000 Services), would only repeat
		// them.
		return ""
	case e.mapsChanged(ctx):
		klog.FromContext(ctx).Info("Map elements in the kernel differ from the last sync; rewriting the table")
		e.countRepair(fullMapsChanged)
		return fullMapsChanged
	}
	return ""
}

// countRepair counts a drift repair for reason.
func (e *Engine) countRepair(reason string) {
	if e.metrics != nil {
		e.metrics.DriftRepairs.WithLabelValues(reason).Inc()
	}
}

// mapsChanged compares the element counts of nftproxy's maps in the kernel
// with what the last sync applied. Called with mu held.
func (e *Engine) mapsChanged(ctx context.Context) bool {
	for _, f := range e.pipe.Families() {
		want := e.pipe.ElementCounts(f)
		if want == nil {
			continue
		}
		got, err := e.dp.ElementCounts(ctx, f)
		if err != nil {
			return true
		}
		for m, n := range want {
			if got[m] != n {
				return true
			}
		}
	}
	return false
}

// driftReason tells whether a change another process made needs a full
// sync, and why ("" when it does not).
func (e *Engine) driftReason(ctx context.Context, ch nftgen.Change) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.synced {
		return ""
	}
	if ch.Lost {
		// Usually a large commit overflowed the monitor; what can be
		// checked cheaply is checked below.
		klog.FromContext(ctx).Info("nftables monitor lost notifications; checking the map elements", "detail", ch.What)
	}
	switch {
	case ch.Missed:
		klog.FromContext(ctx).Info("Other processes committed to nftables while nftproxy committed; checking the whole table", "detail", ch.What)
		return fullUnseenCommits
	case ch.Ours && !ch.Lost:
		return fullTableChanged
	case e.mapsChanged(ctx):
		return fullMapsChanged
	}
	return ""
}

// followAddresses looks the node's addresses up again before every sync:
// no Service may capture one of them (pipeline.Pipeline.SetLocalAddresses), and when
// FollowAddresses is set and the node port addresses changed (an
// interface came up, a DHCP lease moved), the generators are replaced and
// the sync is a full one. Called with mu held.
func (e *Engine) followAddresses() {
	if e.cfg.LocalAddresses == nil {
		return
	}
	local, err := e.cfg.LocalAddresses()
	if err != nil {
		klog.ErrorS(err, "Cannot list the node's addresses; keeping the ones seen last")
		return
	}
	e.pipe.SetLocalAddresses(local)
	if e.cfg.Rules == nil || !e.cfg.Rules.FollowsAddresses() || slices.Equal(local, e.local) {
		return
	}
	e.local = local
	rules, err := e.cfg.Rules.Build(e.node, local)
	if err != nil {
		klog.ErrorS(err, "Cannot rebuild the rules for the node's addresses; keeping the node port addresses as they were")
		return
	}
	before, after := nodePortAddresses(e.pipe.Generators()), nodePortAddresses(rules.Generators)
	if slices.Equal(before, after) {
		return
	}
	klog.InfoS("The node's addresses changed; node ports now answer on the new ones", "before", before, "after", after)
	e.pipe.SetGenerators(rules.Generators...)
	e.needFull = "the node port addresses changed"
	e.after.setHealthCheckAddresses(rules.HealthCheckAddresses())
}

// nodePortAddresses returns the node port addresses of every family of
// gens.
func nodePortAddresses(gens []*nftgen.Generator) []netip.Addr {
	var out []netip.Addr
	for _, g := range gens {
		out = append(out, g.Config().NodePortAddresses...)
	}
	return out
}

// rolling reports whether the periodic check of the tables rolls over
// them one at a time (some family is sharded) instead of rewriting them
// all every FullSyncPeriod. Called with mu held.
func (e *Engine) rolling() bool {
	for _, f := range e.pipe.Families() {
		if e.pipe.Sharded(f) {
			return true
		}
	}
	return false
}

// checkDue decides whether this sync is followed by the rolling check of
// the next table: each round checks every table (of every family) once,
// evenly spread over FullSyncPeriod, the k-th one due at the round's
// start plus (k+1)/tables of it. At any sync, not only a periodic one, so
// that a steady stream of changes does not put it off; each step reads
// one table, so no change waits for more than that. Called with mu held.
func (e *Engine) checkDue() bool {
	if !e.rolling() {
		return false
	}
	step := FullSyncPeriod / time.Duration(e.tables())
	return !e.clock.Now().Before(e.check.start.Add(time.Duration(e.check.next+1) * step))
}

// tables is the rolling check's round: the largest number of tables of
// any family. Called with mu held.
func (e *Engine) tables() int {
	n := 1
	for _, f := range e.pipe.Families() {
		n = max(n, e.pipe.Tables(f))
	}
	return n
}
