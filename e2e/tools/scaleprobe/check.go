package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nftproxy/nftproxy/e2e/harness"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier"
	"github.com/nftproxy/nftproxy/proxier/metrics"
	"github.com/nftproxy/nftproxy/proxier/runner"
)

// measureChecks measures the periodic check of the n Services' tables
// that engine programmed (see CheckReport). Every step must find the
// tables as they were applied and every sync must write nothing but the
// changes.
//
// The engine must run on clk and count into m: the changes are made while
// the clock is moved along so that each periodic sync is followed by a
// step, and m counts the steps.
func measureChecks(ctx context.Context, engine *proxier.Engine, dp nftgen.Dataplane, clk *clocktesting.FakeClock, m *metrics.Metrics, n, endpoints int) (*harness.CheckReport, error) {
	rep := &harness.CheckReport{Tables: engine.Tables()}
	if err := measureSteps(ctx, engine, rep); err != nil {
		return nil, err
	}
	res, err := engine.FullSync(ctx, "hourly full sync")
	if err != nil {
		return nil, fmt.Errorf("full sync of the live tables: %w", err)
	}
	if !res.Full || res.Ops != 0 {
		return nil, fmt.Errorf("full sync of the untouched live tables: full=%v, %d operations", res.Full, res.Ops)
	}
	rep.FullSeconds = res.Duration.Seconds()
	// The element count of every table's maps, which periodic syncs of
	// the single table take (and of sharded ones while the drift watch
	// does not run).
	start := time.Now()
	if _, err := dp.ElementCounts(ctx, nftgen.FamilyIPv4); err != nil {
		return nil, err
	}
	rep.ElementCountSeconds = time.Since(start).Seconds()
	if err := measureChanges(ctx, engine, clk, m, n, endpoints, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// measureSteps runs one round of the rolling check, each step followed by
// the sync that recomputes its table's Services, and records their times.
func measureSteps(ctx context.Context, engine *proxier.Engine, rep *harness.CheckReport) error {
	var shards []float64
	for range rep.Tables {
		c, err := engine.CheckNextTable(ctx)
		if err != nil {
			return err
		}
		if c.Drift != "" {
			return fmt.Errorf("the check of table %d found %s", c.Table, c.Drift)
		}
		rep.RoundSeconds += c.Duration.Seconds()
		if c.Table == 0 {
			rep.MainSeconds = c.Duration.Seconds()
		} else {
			shards = append(shards, c.Duration.Seconds())
		}
		res, err := engine.Sync(ctx, runner.Requested)
		if err != nil {
			return fmt.Errorf("the sync after the check of table %d: %w", c.Table, err)
		}
		if res.Ops != 0 {
			return fmt.Errorf("the sync after the check of table %d sent %d operations", c.Table, res.Ops)
		}
		rep.RecomputeMaxSeconds = max(rep.RecomputeMaxSeconds, res.Duration.Seconds())
	}
	if len(shards) > 0 {
		slices.Sort(shards)
		rep.ShardMedianSeconds, rep.ShardMaxSeconds = shards[len(shards)/2], shards[len(shards)-1]
	}
	return nil
}

// measureChanges runs a round as the daemon runs it, compressed: syncs,
// each one a step of the check later on the engine's clock, so that every
// sync is followed by a step (runSteps), while a Service's endpoints
// change every 200 ms, each change synced at once; it records how long
// each change took to be programmed.
func measureChanges(ctx context.Context, engine *proxier.Engine, clk *clocktesting.FakeClock, m *metrics.Metrics, n, endpoints int, rep *harness.CheckReport) error {
	svc, slice := harness.ScaleObjects(n+1, endpoints)
	engine.SetService(svc)
	engine.SetEndpointSlice(slice)
	if _, err := engine.Sync(ctx, runner.Requested); err != nil {
		return err
	}
	stepsBefore := stepCount(m)
	done := runSteps(ctx, engine, clk, rep.Tables)
	all := slice.Endpoints
	var latencies []float64
	var stepsErr error
	// The first change at once, so that even a round shorter than 200 ms
	// meets one.
	next := time.After(0)
	for i := 0; ; i++ {
		select {
		case stepsErr = <-done:
		case <-next:
			next = time.After(200 * time.Millisecond)
			slice.Endpoints = all[:len(all)-1+i%2]
			start := time.Now()
			engine.SetEndpointSlice(slice)
			// A sync of the steps' may take the lock first and program
			// the change; this sync's end bounds it either way. The
			// single table's hourly full sync may be this one.
			if res, err := engine.Sync(ctx, runner.Requested); err != nil || (res.Full && rep.Tables > 1) {
				return fmt.Errorf("change during the checks: full=%v, %v", res.Full, err)
			}
			latencies = append(latencies, time.Since(start).Seconds())
			continue
		}
		break
	}
	if stepsErr != nil {
		return stepsErr
	}
	if got := stepCount(m) - stepsBefore; rep.Tables > 1 && got < uint64(rep.Tables) {
		return fmt.Errorf("the syncs during the changes ran %d steps of the check, want %d", got, rep.Tables)
	}
	engine.DeleteEndpointSlice(slice.Namespace, slice.Name)
	engine.DeleteService(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
	if _, err := engine.Sync(ctx, runner.Requested); err != nil {
		return err
	}
	if len(latencies) > 0 {
		slices.Sort(latencies)
		rep.Changes, rep.ChangeMedianSeconds, rep.ChangeMaxSeconds = len(latencies), latencies[len(latencies)/2], latencies[len(latencies)-1]
	}
	return nil
}

// runSteps moves clk a step of the check at a time (FullSyncPeriod over
// tables) and syncs after each, so that each sync is followed by a step;
// the channel gets its error, or nil, once a round is done. The single
// table has no steps: its check is the hourly full sync, which then comes
// at every sync.
func runSteps(ctx context.Context, engine *proxier.Engine, clk *clocktesting.FakeClock, tables int) <-chan error {
	done := make(chan error, 1)
	single := tables == 1
	step := proxier.FullSyncPeriod / time.Duration(tables)
	if single {
		step = proxier.FullSyncPeriod
	}
	// The round that measureSteps ended starts a period later.
	clk.Step(proxier.FullSyncPeriod)
	go func() {
		for range tables {
			clk.Step(step)
			// Requested: the daemon's periodic syncs count the maps'
			// elements only when they are not sharded or the watch is
			// not running (measured apart, ElementCount).
			if res, err := engine.Sync(ctx, runner.Requested); err != nil || (res.Full && !single) {
				done <- fmt.Errorf("sync during the changes: full=%v, %v", res.Full, err)
				return
			}
		}
		done <- nil
	}()
	return done
}

// stepCount is the number of steps of the check m has counted.
func stepCount(m *metrics.Metrics) uint64 {
	var out dto.Metric
	if err := m.TableCheckDuration.Write(&out); err != nil {
		return 0
	}
	return out.GetHistogram().GetSampleCount()
}
