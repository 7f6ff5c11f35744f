package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
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
	steps := func() uint64 {
		var out dto.Metric
		if err := m.TableCheckDuration.Write(&out); err != nil {
			return 0
		}
		return out.GetHistogram().GetSampleCount()
	}
	rep := &harness.CheckReport{Tables: engine.Proxier().Syncer.Tables(nftgen.FamilyIPv4)}
	var shards []float64
	for range rep.Tables {
		c, err := engine.CheckNextTable(ctx)
		if err != nil {
			return nil, err
		}
		if c.Drift != "" {
			return nil, fmt.Errorf("the check of table %d found %s", c.Table, c.Drift)
		}
		rep.RoundSeconds += c.Duration.Seconds()
		if c.Table == 0 {
			rep.MainSeconds = c.Duration.Seconds()
		} else {
			shards = append(shards, c.Duration.Seconds())
		}
		res, err := engine.Sync(ctx, runner.Requested)
		if err != nil {
			return nil, fmt.Errorf("the sync after the check of table %d: %w", c.Table, err)
		}
		if res.Ops != 0 {
			return nil, fmt.Errorf("the sync after the check of table %d sent %d operations", c.Table, res.Ops)
		}
		rep.RecomputeMaxSeconds = max(rep.RecomputeMaxSeconds, res.Duration.Seconds())
	}
	if len(shards) > 0 {
		slices.Sort(shards)
		rep.ShardMedianSeconds, rep.ShardMaxSeconds = shards[len(shards)/2], shards[len(shards)-1]
	}

	res, err := engine.Proxier().Sync(ctx, "hourly full sync")
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

	// A round as the daemon runs it, compressed: syncs, each
	// one a step of the check later on the engine's clock, so that every
	// sync is followed by a step, while a Service's endpoints change
	// every 200 ms, each change synced at once.
	svc, slice := harness.ScaleObjects(n+1, endpoints)
	engine.SetService(svc)
	engine.SetEndpointSlice(slice)
	if _, err := engine.Sync(ctx, runner.Requested); err != nil {
		return nil, err
	}
	stepsBefore := steps()
	clk.Step(proxier.FullSyncPeriod)
	// The single table has no steps: its periodic check is the hourly
	// full sync, at every one of these syncs.
	single := rep.Tables == 1
	var wg sync.WaitGroup
	done := make(chan struct{})
	var checkErr error
	wg.Go(func() {
		defer close(done)
		for range rep.Tables {
			step := proxier.FullSyncPeriod / time.Duration(rep.Tables)
			if single {
				step = proxier.FullSyncPeriod
			}
			clk.Step(step)
			// Requested: the daemon's periodic syncs count the maps'
			// elements only when they are not sharded or the watch is
			// not running (measured apart, ElementCount).
			if res, err := engine.Sync(ctx, runner.Requested); err != nil || res.Full != single {
				checkErr = fmt.Errorf("periodic sync during the changes: full=%v, %v", res.Full, err)
				return
			}
		}
	})
	all := slice.Endpoints
	var latencies []float64
	for i := 0; ; i++ {
		select {
		case <-done:
		case <-time.After(200 * time.Millisecond):
			slice.Endpoints = all[:len(all)-1+i%2]
			start := time.Now()
			engine.SetEndpointSlice(slice)
			res, err := engine.Sync(ctx, runner.Requested)
			if err != nil {
				return nil, fmt.Errorf("change during the checks: %w", err)
			}
			// A periodic sync may take the lock first and program the
			// change; this sync's end bounds it either way.
			if res.Full {
				return nil, fmt.Errorf("change during the checks: a full sync")
			}
			latencies = append(latencies, time.Since(start).Seconds())
			continue
		}
		break
	}
	wg.Wait()
	if checkErr != nil {
		return nil, checkErr
	}
	if got := steps() - stepsBefore; !single && got < uint64(rep.Tables) {
		return nil, fmt.Errorf("the periodic syncs during the changes ran %d steps of the check, want %d", got, rep.Tables)
	}
	engine.DeleteEndpointSlice(slice.Namespace, slice.Name)
	engine.DeleteService(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
	if _, err := engine.Sync(ctx, runner.Requested); err != nil {
		return nil, err
	}
	if len(latencies) > 0 {
		slices.Sort(latencies)
		rep.Changes, rep.ChangeMedianSeconds, rep.ChangeMaxSeconds = len(latencies), latencies[len(latencies)/2], latencies[len(latencies)-1]
	}
	return rep, nil
}
