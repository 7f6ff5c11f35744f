package proxier

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/runner"
)

// TestEngineChecksShardedTablesInTurn: with shard tables, the hourly full
// sync gives way to a check of one table at a time, spread over the hour
// and run after requested syncs as well as periodic ones: a round with no
// drift rewrites nothing, each step has the next sync recompute that
// table's Services, and a table tampered with in a way neither the watch
// nor the element counts see is found by its own step and repaired by a
// full sync, which starts a new round.
func TestEngineChecksShardedTablesInTurn(t *testing.T) {
	f := newEngineFixtureOf(t, func(cfg *Config) { cfg.TableShards = 4 })
	for i := range 10 {
		name := fmt.Sprintf("s%d", i)
		f.e.SetService(svc(name, fmt.Sprintf("10.96.1.%d", i+1)))
		f.e.SetEndpointSlice(slice(name, fmt.Sprintf("10.0.1.%d", i+1)))
	}
	f.sync(t, runner.Requested)
	f.expectSyncs(t, "cold sync", 1, 0)
	want := f.fake.Dump(nftgen.FamilyIPv4)
	const tables = 5
	step := FullSyncPeriod / tables
	layout := nftgen.TableLayout{Shards: 4}
	inTable := map[int]int{}
	shardOf := func(clusterIP string) int {
		return layout.ShardOf(nftgen.ClusterIPPlace(netip.MustParseAddr(clusterIP)))
	}
	for _, nn := range f.e.store.ServiceNames() {
		states, _ := f.e.store.State(nn)
		inTable[shardOf(states[0].ClusterIPs[0].String())]++
	}

	// A round with nothing changed: one table a step, after requested
	// syncs; the sync after a step recomputes that table's Services and
	// writes nothing.
	f.clock.Step(step - time.Second)
	f.sync(t, runner.Requested)
	if f.e.check.next != 0 {
		t.Fatalf("a table was checked before its step was due")
	}
	partial := uint64(1)
	for table := range tables {
		if table > 0 {
			f.clock.Step(step)
		} else {
			f.clock.Step(time.Second)
		}
		f.sync(t, runner.Requested)
		partial++
		if next := f.e.check.next; next != (table+1)%tables {
			t.Fatalf("after the step of table %d the next table is %d", table, next)
		}
		res, err := f.e.Sync(context.Background(), runner.Requested)
		if err != nil {
			t.Fatal(err)
		}
		partial++
		if table > 0 && res.Services != inTable[table] {
			t.Errorf("the sync after the check of table %d recomputed %d Services, want its %d", table, res.Services, inTable[table])
		}
		if res.Ops != 0 {
			t.Errorf("the sync after the check of table %d sent %d operations to an untouched table", table, res.Ops)
		}
	}
	f.expectSyncs(t, "a round over the hour", 1, partial)
	if n := testutil.CollectAndCount(f.m.TableCheckDuration); n != 1 {
		t.Errorf("the table check duration is %d series, want 1", n)
	}
	var m dto.Metric
	if err := f.m.TableCheckDuration.Write(&m); err != nil || m.GetHistogram().GetSampleCount() != tables {
		t.Errorf("the table check duration counts %d steps (%v), want %d", m.GetHistogram().GetSampleCount(), err, tables)
	}

	// A Service chain of one shard emptied behind nftproxy's back: found
	// when that shard's turn comes, and not before.
	s0 := types.NamespacedName{Namespace: "ns", Name: "s0"}
	tampered := shardOf("10.96.1.1")
	chain := nftgen.ServiceChainName(svcmodel.ServicePortName{NamespacedName: s0, Port: "http", Protocol: v1.ProtocolTCP})
	tx := &nftgen.Transaction{Family: nftgen.FamilyIPv4, Ops: []nftgen.Op{{Kind: nftgen.OpFlushChain, Name: chain, Table: nftgen.ShardTable(tampered)}}}
	if err := f.fake.Apply(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	for table := range tampered + 1 {
		f.clock.Step(step)
		f.sync(t, runner.Periodic)
		partial++
		if table < tampered {
			f.expectSyncs(t, fmt.Sprintf("after the check of untampered table %d", table), 1, partial)
		}
	}
	if n := testutil.ToFloat64(f.m.DriftRepairs.WithLabelValues(fullTableCheck)); n != 1 {
		t.Fatalf("drift repairs by the table check = %v, want 1", n)
	}
	f.sync(t, runner.Requested)
	f.expectSyncs(t, "the sync after the check found the tampering", 2, partial)
	if got := f.fake.Dump(nftgen.FamilyIPv4); got != want {
		t.Errorf("the full sync did not repair the tables:\n%s", got)
	}
	if f.e.check.next != 0 {
		t.Errorf("the full sync did not start a new round: next table %d", f.e.check.next)
	}
}

// TestShardedPeriodicSyncsLeaveTheElementsToTheWatch: with shard tables
// and the drift watch running, a periodic sync does not count every
// table's map elements (the watch reports element changes, the rolling
// check compares them within the hour); without the watch it still does.
func TestShardedPeriodicSyncsLeaveTheElementsToTheWatch(t *testing.T) {
	for _, watching := range []bool{true, false} {
		f := newEngineFixtureOf(t, func(cfg *Config) { cfg.TableShards = 3 })
		f.e.watching.Store(watching)
		f.sync(t, runner.Requested)
		var del *nftgen.Transaction
		for i := 1; i <= 3 && del == nil; i++ {
			st, err := f.fake.ReadTable(context.Background(), nftgen.FamilyIPv4, i, nftgen.KeepRules)
			if err != nil || st == nil {
				t.Fatalf("shard %d: %v", i, err)
			}
			if m := st.Map(nftgen.MapServiceIPs); m != nil && len(m.Elements) > 0 {
				del = &nftgen.Transaction{Family: nftgen.FamilyIPv4, Ops: []nftgen.Op{{Kind: nftgen.OpDeleteElement, Name: nftgen.MapServiceIPs, Element: &m.Elements[0], Table: nftgen.ShardTable(i)}}}
			}
		}
		if del == nil {
			t.Fatal("no dispatch element in any shard")
		}
		if err := f.fake.Apply(context.Background(), del); err != nil {
			t.Fatal(err)
		}
		f.sync(t, runner.Periodic)
		full, _ := f.syncs(t)
		if n := testutil.ToFloat64(f.m.DriftRepairs.WithLabelValues(fullMapsChanged)); (n == 1) == watching || (full == 2) == watching {
			t.Errorf("watching=%v: the periodic sync counted the elements %v times and made %d full syncs", watching, n, full)
		}
	}
}
