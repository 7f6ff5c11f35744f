package pipeline

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/compat"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/model"
)

// addServices stores Services s0 to s(n-1), each with two endpoints.
func (f *fixture) addServices(n int) {
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		f.store.SetService(svc(name, fmt.Sprintf("10.96.0.%d", i+1)))
		f.store.SetEndpointSlice(slice(name, fmt.Sprintf("10.0.%d.1", i), fmt.Sprintf("10.0.%d.2", i)))
	}
}

// compatOf is the compat view of what the fake holds.
func compatOf(fake *nftgen.Fake) string {
	return compat.Render(compat.Build(fake.State(nftgen.FamilyIPv4)), compat.Options{})
}

// freshCompat is the compat view of a single-table full sync of the
// fixture's store.
func (f *fixture) freshCompat(t *testing.T) string {
	t.Helper()
	g, _ := nftgen.NewGenerator(nftgen.Config{Family: nftgen.FamilyIPv4})
	fake := nftgen.NewFake()
	s := New(f.store, fake, g)
	s.TableShards = 1
	if _, err := s.Sync(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	return compatOf(fake)
}

// TestShardedSyncFollowsTheLayout: with shard tables configured, the cold
// sync, a partial sync, a full check of the live tables and moves between
// layouts (more shards, the single table, shards again) all leave the
// compat view a single table's full sync gives, and a partial sync touches
// only the main table and the changed Service's shard.
func TestShardedSyncFollowsTheLayout(t *testing.T) {
	f := newFixture(t)
	f.pipe.TableShards = 4
	f.addServices(20)
	check := func(when string, shards int) {
		t.Helper()
		if got := f.fake.ShardTables(nftgen.FamilyIPv4); len(got) != shards {
			t.Errorf("%s: shard tables %v, want %d", when, got, shards)
		}
		if got, want := compatOf(f.fake), f.freshCompat(t); got != want {
			t.Errorf("%s: compat view\n%s\nwant\n%s", when, got, want)
		}
	}
	if res := f.sync(t); !res.Full {
		t.Fatalf("first sync %+v, want full", res)
	}
	check("cold sync", 4)

	f.store.SetEndpointSlice(slice("s3", "10.0.3.9"))
	if res := f.sync(t); res.Full || res.Services != 1 {
		t.Fatalf("partial sync %+v", res)
	}
	shard := nftgen.ShardTable(nftgen.TableLayout{Shards: 4}.ShardOf(nftgen.ClusterIPPlace(netip.MustParseAddr("10.96.0.4"))))
	inShard := 0
	for _, op := range f.fake.LastTransaction.Ops {
		switch op.Table {
		case "":
		case shard:
			inShard++
		default:
			t.Errorf("partial sync of ns/s3 acts on %s, not its shard %s: %s", op.Table, shard, op.Text(nftgen.FamilyIPv4))
		}
	}
	if inShard == 0 {
		t.Errorf("partial sync of ns/s3 wrote nothing to its shard %s", shard)
	}
	check("partial sync", 4)

	// s5 deleted and created again with another cluster IP, in another
	// shard, between two syncs: one partial sync moves it.
	from := nftgen.ShardTable(nftgen.TableLayout{Shards: 4}.ShardOf(nftgen.ClusterIPPlace(netip.MustParseAddr("10.96.0.6"))))
	to := nftgen.ShardTable(nftgen.TableLayout{Shards: 4}.ShardOf(nftgen.ClusterIPPlace(netip.MustParseAddr("10.96.0.103"))))
	if from == to {
		t.Fatalf("both cluster IPs of s5 are in %s", from)
	}
	f.store.SetService(svc("s5", "10.96.0.103"))
	if res := f.sync(t); res.Full || res.Services != 1 {
		t.Fatalf("partial sync of the moved Service %+v", res)
	}
	tables := map[string]bool{}
	for _, op := range f.fake.LastTransaction.Ops {
		tables[op.Table] = true
	}
	if !tables[from] || !tables[to] {
		t.Errorf("the move of s5 from %s to %s acts on the tables %v", from, to, tables)
	}
	check("cluster IP moved to another shard", 4)

	// s6 becomes a NodePort Service: its packets no longer tell its shard
	// by the cluster IP, so one partial sync moves it to the shard that
	// takes the Services placed by name (the first: none had a node port
	// at the last full sync).
	from = nftgen.ShardTable(nftgen.TableLayout{Shards: 4}.ShardOf(nftgen.ClusterIPPlace(netip.MustParseAddr("10.96.0.7"))))
	if from == nftgen.ShardTable(1) {
		t.Fatalf("s6 is in %s already", from)
	}
	np := svc("s6", "10.96.0.7")
	np.Spec.Type = v1.ServiceTypeNodePort
	np.Spec.Ports[0].NodePort = 30006
	f.store.SetService(np)
	if res := f.sync(t); res.Full || res.Services != 1 {
		t.Fatalf("partial sync of s6 turned NodePort %+v", res)
	}
	tables = map[string]bool{}
	for _, op := range f.fake.LastTransaction.Ops {
		tables[op.Table] = true
	}
	if !tables[from] || !tables[nftgen.ShardTable(1)] {
		t.Errorf("the move of s6 from %s to %s acts on the tables %v", from, nftgen.ShardTable(1), tables)
	}
	check("a Service given a node port moved to the shard for them", 4)

	f.store.DeleteService(types.NamespacedName{Namespace: "ns", Name: "s4"})
	f.sync(t)
	check("deleted Service", 4)

	if res := f.sync(t); res.Ops != 0 {
		t.Errorf("a sync with no change sent %d operations", res.Ops)
	}
	if res, err := f.pipe.Sync(context.Background(), fullRequested); err != nil || !res.Full || res.Ops != 0 {
		t.Errorf("full check of untouched shards: %+v, %v; want full with no operation", res, err)
	}
	for _, step := range []struct {
		shards, tables int
	}{{8, 8}, {1, 0}, {4, 4}} {
		f.pipe.TableShards = step.shards
		if _, err := f.pipe.Sync(context.Background(), fullRequested); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("moved to %d shards", step.shards), step.tables)
		f.store.SetEndpointSlice(slice("s7", "10.0.7.7"))
		f.sync(t)
		check(fmt.Sprintf("partial sync in %d shards", step.shards), step.tables)
	}
}

// TestShardedFailedCommitChangesNoTable: a partial sync whose commit fails
// leaves every table as it was (one transaction per family spans the main
// table and the shards), and the next sync, a full one, programs them all.
func TestShardedFailedCommitChangesNoTable(t *testing.T) {
	f := newFixture(t)
	f.pipe.TableShards = 4
	f.addServices(12)
	f.sync(t)
	before := f.fake.Dump(nftgen.FamilyIPv4)
	f.store.SetEndpointSlice(slice("s1", "10.0.1.9"))
	f.store.SetEndpointSlice(slice("s2", "10.0.2.9"))
	f.fake.FailNext = fmt.Errorf("injected")
	if _, err := f.pipe.Sync(context.Background(), ""); err == nil {
		t.Fatal("the injected failure was not returned")
	}
	if got := f.fake.Dump(nftgen.FamilyIPv4); got != before {
		t.Errorf("a failed commit changed the tables:\n%s\nwant:\n%s", got, before)
	}
	if res := f.sync(t); !res.Full {
		t.Errorf("the sync after a failure = %+v, want full", res)
	}
	if got, want := compatOf(f.fake), f.freshCompat(t); got != want {
		t.Errorf("after the retry:\n%s\nwant:\n%s", got, want)
	}
	if got := len(f.fake.ShardTables(nftgen.FamilyIPv4)); got != 4 {
		t.Errorf("%d shard tables after the retry, want 4", got)
	}
}

// TestAutomaticLayoutCountsTheFamilysServices: above the threshold the
// IPv4 table is sharded, while the IPv6 table of the same IPv4-only
// Services stays one table.
func TestAutomaticLayoutCountsTheFamilysServices(t *testing.T) {
	g4, _ := nftgen.NewGenerator(nftgen.Config{Family: nftgen.FamilyIPv4})
	g6, _ := nftgen.NewGenerator(nftgen.Config{Family: nftgen.FamilyIPv6})
	f := &fixture{store: model.NewStore(), fake: nftgen.NewFake()}
	f.pipe = New(f.store, f.fake, g4, g6)
	n := nftgen.ShardFromServices + 1
	for i := range n {
		f.store.SetService(svc(fmt.Sprintf("s%d", i), fmt.Sprintf("10.96.%d.%d", i/250, 1+i%250)))
	}
	f.sync(t)
	want := 1 // the power of two at or above one shard per ServicesPerShard
	for want < (n+nftgen.ServicesPerShard-1)/nftgen.ServicesPerShard {
		want *= 2
	}
	if got := len(f.fake.ShardTables(nftgen.FamilyIPv4)); got != want {
		t.Errorf("IPv4: %d shard tables for %d Services, want %d", got, n, want)
	}
	if got := f.fake.ShardTables(nftgen.FamilyIPv6); len(got) != 0 {
		t.Errorf("IPv6 holds none of the Services but has shard tables %v", got)
	}
}
