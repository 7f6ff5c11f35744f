package proxier

import (
	"context"
	"time"

	"k8s.io/klog/v2"
)

// tableCheck is where the rolling check stands (see checkDue): the round
// that began at start checks table next of every family.
type tableCheck struct {
	start time.Time
	next  int
}

// TableCheck is what one step of the rolling check found.
type TableCheck struct {
	// Table is the index of the table checked (0 the main table, i shard
	// i) in every family that has it.
	Table int
	// Drift says how it differs from what was applied ("" when it does
	// not); the next sync then rewrites the tables.
	Drift string
	// Duration is the time the step took, the engine's lock held.
	Duration time.Duration
}

// CheckNextTable runs the next step of the rolling check now, whether it
// is due or not (a tool's or a test's measure; the engine runs it after
// a sync when checkDue says so).
func (e *Engine) CheckNextTable(ctx context.Context) (TableCheck, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.checkNextTable(ctx)
}

// checkNextTable compares the next table of every family with what was
// applied there and has the next sync recompute its Services
// (pipeline.Pipeline.CheckTable). A table that differs makes the next sync a full
// one, which starts a new round; one that cannot be read is read again at
// the next sync. Called with mu held.
func (e *Engine) checkNextTable(ctx context.Context) (TableCheck, error) {
	start := time.Now()
	res := TableCheck{Table: e.check.next}
	logger := klog.FromContext(ctx)
	for _, f := range e.pipe.Families() {
		drift, err := e.pipe.CheckTable(ctx, f, res.Table)
		if err != nil {
			logger.Error(err, "Cannot check the table; checking it again at the next sync", "family", f)
			res.Duration = time.Since(start)
			return res, err
		}
		if drift != "" {
			logger.Info("The table differs from what nftproxy applied; rewriting the tables", "family", f, "difference", drift)
			e.countRepair(fullTableCheck)
			e.needFull = fullTableCheck
			e.runner.Run()
			res.Drift = drift
			break
		}
	}
	res.Duration = time.Since(start)
	if m := e.metrics; m != nil {
		m.TableCheckDuration.Observe(res.Duration.Seconds())
	}
	if res.Drift == "" {
		e.check.next++
		if e.check.next >= e.tables() {
			// A round late by more than a whole period (a node that
			// slept) starts again from now rather than rushing.
			next := e.check.start.Add(FullSyncPeriod)
			if now := e.clock.Now(); next.Before(now.Add(-FullSyncPeriod)) {
				next = now
			}
			e.check = tableCheck{start: next}
		}
	}
	logger.V(2).Info("Checked a table against what was applied", "table", res.Table, "differs", res.Drift != "", "elapsed", res.Duration)
	return res, nil
}
