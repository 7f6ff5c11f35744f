package kernel

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/compat"
	"github.com/nftproxy/nftproxy/e2e/testns"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
	"github.com/nftproxy/nftproxy/nftgen/svcmodel"
)

// compatText is the compat view of the family's tables as the kernel holds
// them.
func compatText(t *testing.T, dp *Netlink, f nftgen.Family) string {
	t.Helper()
	st, err := dp.Read(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if st == nil {
		t.Fatalf("%s: no table", f)
	}
	if len(st.Unknown) > 0 {
		t.Errorf("%s: unknown objects: %v", f, st.Unknown)
	}
	return compat.Render(compat.Build(st), compat.Options{})
}

// shardedPorts are the feature ports and enough plain ones that every
// shard of eight holds some.
func shardedPorts(ipv6 bool) []svcmodel.ServicePortState {
	ports := nftgentest.FeaturePortsOf(ipv6)
	if !ipv6 {
		ports = append(ports, nftgentest.ManyPorts(40)...)
	}
	return ports
}

// shardedGenerator returns the feature generator of family f and
// shardedPorts for it.
func shardedGenerator(t *testing.T, f nftgen.Family) (*nftgen.Generator, []svcmodel.ServicePortState) {
	if f == nftgen.FamilyIPv6 {
		return testGenerator6(t), shardedPorts(true)
	}
	return featureGenerator(t), shardedPorts(false)
}

// TestShardedLayoutReadsAsTheSingleTable programs the same Services in the
// single table and spread over eight shard tables, in two namespaces: the
// compat view read back from the kernel is the same text, before and after
// one Service is changed and one deleted; an update touches the main table
// and the Service's shard only; a node moves from one layout to the other
// in place and back, and DeleteTable leaves no table of either.
func TestShardedLayoutReadsAsTheSingleTable(t *testing.T) {
	testns.RequireRoot(t)
	ctx := context.Background()
	layout := nftgen.TableLayout{Shards: 8, Named: 2}
	for _, fam := range []nftgen.Family{nftgen.FamilyIPv4, nftgen.FamilyIPv6} {
		g, ports := shardedGenerator(t, fam)
		rs := g.Ruleset(ports)
		_, single := kernelNetlink(t, "nfp-sh1")
		_, sharded := kernelNetlink(t, "nfp-sh8")
		if err := single.Apply(ctx, nftgen.PlanFull(rs, nil)); err != nil {
			t.Fatal(err)
		}
		parts := nftgen.SplitRuleset(rs, layout, g.ShardTops(layout), g.ShardMaps())
		if err := sharded.Apply(ctx, nftgen.PlanFullSharded(parts, nil, nil)); err != nil {
			t.Fatalf("%s: %v", fam, err)
		}
		names, err := sharded.ShardTables(ctx, fam)
		if err != nil || len(names) != layout.Shards {
			t.Fatalf("%s: shard tables %v (%v), want %d", fam, names, err, layout.Shards)
		}
		main, _, err := sharded.readTable(fam, nftgen.TableName, layoutChains(fam), readOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m := main.Map(nftgen.MapServiceIPs); m == nil || len(m.Elements) != 0 {
			t.Errorf("%s: the main table's dispatch map holds %v, want no element", fam, m)
		}
		want := compatText(t, single, fam)
		if got := compatText(t, sharded, fam); got != want {
			t.Errorf("%s: the sharded compat view differs:\n%s", fam, nftgentest.LineDiff(want, got))
		}

		// One Service changed (an endpoint moved), one deleted.
		appliedSingle, appliedSharded := nftgen.AppliedFrom(rs), nftgen.AppliedFrom(rs)
		appliedSharded.Layout = layout
		moved := ports[len(ports)-1]
		moved.Endpoints = slices.Clone(moved.Endpoints)
		if len(moved.Endpoints) > 0 {
			moved.Endpoints[0].Addr = moved.Endpoints[0].Addr.Next()
		}
		movedKey, goneKey := nftgen.ServiceKey(moved.Name), nftgen.ServiceKey(ports[0].Name)
		updates := map[string]*nftgen.Fragment{movedKey: g.Service(&moved), goneKey: nil}
		for _, key := range []string{movedKey, goneKey} {
			upd := map[string]*nftgen.Fragment{key: updates[key]}
			u := appliedSharded.PlanUpdate(upd)
			shard := nftgen.ShardTable(layout.ShardOf(rs.Services[key].Place))
			inShard := 0
			for _, op := range u.Tx.Ops {
				switch op.Table {
				case "":
				case shard:
					inShard++
				default:
					t.Errorf("%s: update of %s acts on table %s, not its shard %s: %s", fam, key, op.Table, shard, op.Text(fam))
				}
			}
			if inShard == 0 {
				t.Errorf("%s: update of %s does nothing in its shard %s", fam, key, shard)
			}
			if err := sharded.Apply(ctx, u.Tx); err != nil {
				t.Fatalf("%s: %v", fam, err)
			}
			u.Commit()
			us := appliedSingle.PlanUpdate(upd)
			if err := single.Apply(ctx, us.Tx); err != nil {
				t.Fatal(err)
			}
			us.Commit()
		}
		want = compatText(t, single, fam)
		if got := compatText(t, sharded, fam); got != want {
			t.Errorf("%s: after the updates the sharded compat view differs:\n%s", fam, nftgentest.LineDiff(want, got))
		}

		// In place: single to sharded, and back.
		inv, err := single.Inventory(ctx, fam, rs.ChainNames())
		if err != nil {
			t.Fatal(err)
		}
		rs2 := g.Ruleset(ports)
		if err := single.Apply(ctx, nftgen.PlanFullSharded(nftgen.SplitRuleset(rs2, layout, g.ShardTops(layout), g.ShardMaps()), []*nftgen.Inventory{inv}, nil)); err != nil {
			t.Fatalf("%s: single to sharded: %v", fam, err)
		}
		want2 := compat.Render(compat.Build(rs2.State()), compat.Options{})
		if got := compatText(t, single, fam); got != want2 {
			t.Errorf("%s: after moving to shards in place the compat view differs:\n%s", fam, nftgentest.LineDiff(want2, got))
		}
		if inv, err = single.Inventory(ctx, fam, nil); err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(inv.Chains, func(c string) bool { return strings.HasPrefix(c, nftgen.PrefixService) }) {
			t.Errorf("%s: the main table keeps Service chains after the move: %v", fam, inv.Chains)
		}
		names, _ = single.ShardTables(ctx, fam)
		if err := single.Apply(ctx, nftgen.PlanFullSharded([]*nftgen.Ruleset{rs2}, []*nftgen.Inventory{inv}, names)); err != nil {
			t.Fatalf("%s: sharded to single: %v", fam, err)
		}
		if names, _ = single.ShardTables(ctx, fam); len(names) != 0 {
			t.Errorf("%s: shard tables left after moving back: %v", fam, names)
		}
		if got := compatText(t, single, fam); got != want2 {
			t.Errorf("%s: after moving back the compat view differs:\n%s", fam, nftgentest.LineDiff(want2, got))
		}
		if err := sharded.DeleteTable(ctx, fam); err != nil {
			t.Fatal(err)
		}
		if names, _ = sharded.ShardTables(ctx, fam); len(names) != 0 {
			t.Errorf("%s: DeleteTable left %v", fam, names)
		}
		if st, err := sharded.Read(ctx, fam); st != nil || err != nil {
			t.Errorf("%s: DeleteTable left the main table (%v)", fam, err)
		}
	}
}

// TestLayoutReconcilerRepairsEachShard tampers with two shards through nft
// (a Service chain flushed, a dispatch element deleted, a stray chain, the
// shard's copy of KUBE-MARK-MASQ rewritten) and reconciles the tables as a
// full sync does: the repair touches only what differs, a second finds
// nothing, and the compat view is the untouched one.
func TestLayoutReconcilerRepairsEachShard(t *testing.T) {
	testns.RequireRoot(t)
	ctx := context.Background()
	layout := nftgen.TableLayout{Shards: 4, Named: 2}
	g := testGenerator("10.244.0.0/16")
	ports := nftgentest.ManyPorts(20)
	rs := g.Ruleset(ports)
	ns, dp := kernelNetlink(t, "nfp-shr")
	if err := dp.Apply(ctx, nftgen.PlanFullSharded(nftgen.SplitRuleset(rs, layout, g.ShardTops(layout), g.ShardMaps()), nil, nil)); err != nil {
		t.Fatal(err)
	}
	want := compatText(t, dp, nftgen.FamilyIPv4)
	key := nftgen.ServiceKey(ports[2].Name)
	shard := nftgen.ShardTable(layout.ShardOf(rs.Services[key].Place))
	other := nftgen.ShardTable(layout.ShardOf(rs.Services[key].Place)%layout.Shards + 1)
	ns.MustRun(t, "nft", "flush", "chain", "ip", shard, rs.Services[key].Chains[0].Name)
	el := rs.Services[key].Elements[nftgen.MapServiceIPs][0]
	ns.MustRun(t, "nft", "delete", "element", "ip", shard, nftgen.MapServiceIPs, "{ "+el.Key.Addr.String()+" . tcp . 80 }")
	ns.MustRun(t, "nft", "add", "chain", "ip", other, "stray")
	ns.MustRun(t, "nft", "flush", "chain", "ip", other, nftgen.ChainMarkMasq)
	if st, err := dp.Read(ctx, nftgen.FamilyIPv4); err != nil || compat.Render(compat.Build(st), compat.Options{}) == want || len(st.Unknown) != 1 {
		t.Fatalf("the tampering does not show in the compat view and as the shard's copy of %s (%v)", nftgen.ChainMarkMasq, err)
	}
	reconcile := func() *nftgen.Transaction {
		live, err := dp.ReadCompact(ctx, nftgen.FamilyIPv4, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := nftgen.NewLayoutReconciler(live, nil, g.Top(), g.Maps(), g.ShardTops(layout), g.ShardMaps(), layout)
		for k, f := range rs.Services {
			r.AddService(k, f, nil)
		}
		tx := r.Transaction()
		if tx == nil {
			t.Fatal("reconcile gave up")
		}
		if err := dp.Apply(ctx, tx); err != nil {
			t.Fatalf("reconcile: %v\n%s", err, tx)
		}
		return tx
	}
	tx := reconcile()
	for _, op := range tx.Ops {
		if op.Table != shard && op.Table != other && op.Kind != nftgen.OpAddTable {
			t.Errorf("the repair acts on table %q: %s", op.Table, op.Text(nftgen.FamilyIPv4))
		}
	}
	if len(tx.Ops) == 0 || len(tx.Ops) > 30 {
		t.Errorf("repair sent %d operations, want a handful:\n%s", len(tx.Ops), tx)
	}
	if tx := reconcile(); !tx.Empty() {
		t.Errorf("second reconcile sent %d operations:\n%s", len(tx.Ops), tx)
	}
	if got := compatText(t, dp, nftgen.FamilyIPv4); got != want {
		t.Errorf("after the repair the compat view differs:\n%s", nftgentest.LineDiff(want, got))
	}
	if list := ns.MustRun(t, "nft", "list", "table", "ip", other); strings.Contains(list, "chain stray") {
		t.Errorf("stray chain not deleted:\n%s", list)
	}
}

// TestReadTableChecksEachTableOnItsOwn: in the kernel, each table of a
// sharded layout read alone (ReadTable, as the rolling check reads it)
// compares clean with what was applied, in both families; a Service chain
// emptied in one shard is found by that shard's check only.
func TestReadTableChecksEachTableOnItsOwn(t *testing.T) {
	testns.RequireRoot(t)
	ctx := context.Background()
	layout := nftgen.TableLayout{Shards: 4, Named: 2}
	for _, fam := range []nftgen.Family{nftgen.FamilyIPv4, nftgen.FamilyIPv6} {
		g, ports := shardedGenerator(t, fam)
		rs := g.Ruleset(ports)
		_, dp := kernelNetlink(t, "nfp-chk")
		parts := nftgen.SplitRuleset(rs, layout, g.ShardTops(layout), g.ShardMaps())
		if err := dp.Apply(ctx, nftgen.PlanFullSharded(parts, nil, nil)); err != nil {
			t.Fatalf("%s: %v", fam, err)
		}
		applied := nftgen.AppliedFrom(rs)
		applied.Layout = layout
		keep := append((&nftgen.Ruleset{Top: rs.Top}).ChainNames(), nftgen.ShardTopChainNames()...)
		check := func() []string {
			var out []string
			for i := range layout.Shards + 1 {
				digests := applied.LiveDigests(keep)
				live, err := dp.ReadTable(ctx, fam, i, digests.Finish)
				if err != nil {
					t.Fatalf("%s: read table %d: %v", fam, i, err)
				}
				out = append(out, applied.CheckTable(i, live, digests, g.ShardTop(layout, i), g.ShardMaps()))
			}
			return out
		}
		for i, got := range check() {
			if got != "" {
				t.Errorf("%s: untouched table %d: %s", fam, i, got)
			}
		}
		var key string
		for k, f := range rs.Services {
			if len(f.Chains) > 0 && (key == "" || k < key) {
				key = k
			}
		}
		shard := layout.ShardOf(rs.Services[key].Place)
		flush := nftgen.Op{Kind: nftgen.OpFlushChain, Name: rs.Services[key].Chains[0].Name, Table: nftgen.ShardTable(shard)}
		if err := dp.Apply(ctx, &nftgen.Transaction{Family: fam, Ops: []nftgen.Op{flush}}); err != nil {
			t.Fatal(err)
		}
		for i, got := range check() {
			if (got != "") != (i == shard) {
				t.Errorf("%s: after %s in table %d, the check of table %d says %q", fam, flush.Text(fam), shard, i, got)
			}
		}
	}
}
