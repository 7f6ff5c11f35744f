package proxier

import (
	"context"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nftproxy/nftproxy/nftgen"
)

// driftGuard decides when a repair of nftproxy's table, changed by another
// process, runs. The first change of a kind is repaired at once; when the
// same change comes back within a window after its repair (another writer
// that wants the table its own way: a second nftproxy or kube-proxy with
// other flags, a script in a loop), each repair waits twice as long as the
// one before, up to maxDelay, so that neither side burns the node's CPU.
// A kind that stays away for the window starts over. It is not safe for
// concurrent use.
type driftGuard struct {
	// base is the first delay (the minimum sync period, at least a
	// second); maxDelay the longest.
	base, maxDelay time.Duration
	kinds          map[string]*driftKind
}

// driftKind is what the guard remembers of one kind of change.
type driftKind struct {
	last   time.Time
	streak int
	delay  time.Duration
	// since counts the changes since the writer was last named.
	since int
}

// contestedStreak is the number of returns in a row after which health
// reports the table as contested.
const contestedStreak = 4

// maxDriftKinds bounds what the guard remembers.
const maxDriftKinds = 256

func newDriftGuard(minSyncPeriod, syncPeriod time.Duration) *driftGuard {
	return &driftGuard{base: max(minSyncPeriod, time.Second), maxDelay: max(syncPeriod, 5*time.Minute), kinds: map[string]*driftKind{}}
}

// window is how long a kind must stay away to start over.
func (k *driftKind) window() time.Duration { return 10*time.Second + 2*k.delay }

// driftVerdict is what the guard decided of one change.
type driftVerdict struct {
	// delay is how long the repair waits.
	delay time.Duration
	// name is set when the writer is to be named in the log (once per
	// step of the backoff); count is the changes of this kind since it was
	// last named.
	name  bool
	count int
	// contested is set once the change came back contestedStreak times in
	// a row; until is when that ends if it does not come back.
	contested bool
	until     time.Time
}

// observe records a change of kind at now.
func (g *driftGuard) observe(kind string, now time.Time) driftVerdict {
	k := g.kinds[kind]
	if k == nil {
		if len(g.kinds) >= maxDriftKinds {
			clear(g.kinds)
		}
		k = &driftKind{}
		g.kinds[kind] = k
	} else if now.Sub(k.last) >= k.window() {
		*k = driftKind{}
	} else {
		k.streak++
	}
	k.last = now
	k.since++
	before := k.delay
	k.delay = 0
	if k.streak > 0 {
		k.delay = g.base
		for i := 1; i < k.streak && k.delay < g.maxDelay; i++ {
			k.delay *= 2
		}
		k.delay = min(k.delay, g.maxDelay)
	}
	v := driftVerdict{delay: k.delay, count: k.since, contested: k.streak >= contestedStreak, until: now.Add(k.window())}
	if k.streak == 0 || k.delay != before {
		v.name = true
		k.since = 0
	}
	return v
}

// repairDrift repairs what other processes change in nftproxy's tables,
// as the watch reports it, with a full sync through the runner (so at most
// one per minimum sync period), instead of waiting for the periodic one.
// A change that keeps coming back is repaired later each time (see
// driftGuard), named in the log once per step, counted in
// nftproxy_foreign_commits_total, and turns /healthz unhealthy while it
// lasts. Changes that arrive while a repair waits join it. Before the
// first sync there is nothing of nftproxy's to repair.
func (e *Engine) repairDrift(ctx context.Context, changes <-chan nftgen.Change) {
	guard := newDriftGuard(e.cfg.MinSyncPeriod, e.cfg.SyncPeriod)
	// quiet fires when the changes that made repairs wait have stayed
	// away for their window: the backoff gauge goes back to 0.
	var quiet clock.Timer
	var quietC <-chan time.Time
	defer func() {
		if quiet != nil {
			quiet.Stop()
		}
	}()
	for {
		select {
		case <-quietC:
			quiet, quietC = nil, nil
			if m := e.metrics; m != nil {
				m.DriftBackoff.Set(0)
			}
		case ch, ok := <-changes:
			if !ok {
				return
			}
			v, ok := e.repairChange(ctx, guard, ch, changes)
			if !ok {
				return
			}
			if v.delay > 0 {
				if quiet != nil {
					quiet.Stop()
				}
				quiet = e.clock.NewTimer(v.until.Sub(e.clock.Now()))
				quietC = quiet.C()
			}
		}
	}
}

// repairChange repairs one change another process made, if it needs it,
// after the guard's delay; false when ctx ended or the watch stopped
// meanwhile.
func (e *Engine) repairChange(ctx context.Context, guard *driftGuard, ch nftgen.Change, changes <-chan nftgen.Change) (driftVerdict, bool) {
	logger := klog.FromContext(ctx)
	reason := e.driftReason(ctx, ch)
	if reason == "" {
		return driftVerdict{}, true
	}
	if m := e.metrics; m != nil && ch.Ours {
		m.ForeignCommits.Inc()
	}
	v := guard.observe(reason+": "+ch.What, e.clock.Now())
	switch {
	case v.delay == 0:
		logger.Info("Repairing nftproxy's table changed by another process", "process", ch.Process, "change", ch.What)
	case v.name:
		logger.Info("Another process keeps changing nftproxy's table; repairing it less often", "process", ch.Process, "change", ch.What,
			"changes", v.count, "nextRepairIn", v.delay)
	}
	if e.cfg.Health != nil {
		if v.contested {
			e.cfg.Health.SetContested(ch.Process, v.until)
		}
		for _, f := range e.pipe.Families() {
			e.cfg.Health.QueuedUpdate(familyLabel(f))
		}
	}
	if m := e.metrics; m != nil && v.delay > 0 {
		m.DriftBackoff.Set(v.delay.Seconds())
	}
	if v.delay > 0 && !e.waitJoining(ctx, changes, v.delay) {
		return v, false
	}
	// Changes before the repair runs are repaired by it.
	e.mu.Lock()
	pending := e.needFull != ""
	e.needFull = reason
	e.mu.Unlock()
	if !pending {
		e.countRepair(reason)
	}
	e.runner.Run()
	return v, true
}

// waitJoining waits d, taking the changes that arrive meanwhile into the
// repair that waits; false when ctx ended or the watch stopped.
func (e *Engine) waitJoining(ctx context.Context, changes <-chan nftgen.Change, d time.Duration) bool {
	t := e.clock.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C():
			return true
		case ch, ok := <-changes:
			if !ok {
				return false
			}
			if m := e.metrics; m != nil && ch.Ours {
				m.ForeignCommits.Inc()
			}
		}
	}
}
