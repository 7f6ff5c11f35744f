//go:build linux

package kernel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	"github.com/nftproxy/nftproxy/e2e/testns"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// TestNetlinkApply programs a real kernel (in a throwaway namespace): a full
// sync, an incremental update and a deletion, and checks what `nft list`
// shows after each.
func TestNetlinkApply(t *testing.T) {
	testns.RequireRoot(t)
	ns, dp := kernelNetlink(t, "nfp-nl")
	ctx := context.Background()
	g := testGenerator("10.244.0.0/16")

	a := nftgentest.Port("ns1", "a", 80, "10.96.0.10", "10.244.0.2:8080", "10.244.0.3:8080", "10.244.0.4:8080")
	b := nftgentest.Port("ns1", "b", 53, "10.96.0.11")
	applied := g.Ruleset([]svcmodel.ServicePortState{a, b})

	inv, err := dp.Inventory(ctx, nftgen.FamilyIPv4, nil)
	if err != nil || inv != nil {
		t.Fatalf("inventory before first sync = %v, %v; want nil, nil", inv, err)
	}
	if err := dp.Apply(ctx, nftgen.PlanFull(applied, nil)); err != nil {
		t.Fatalf("full sync: %v", err)
	}
	list := ns.MustRun(t, "nft", "list", "table", "ip", nftgen.TableName)
	t.Log(list)
	for _, want := range []string{
		"10.96.0.10 . tcp . 80 comment \"ns1/a:p80 cluster IP\" : goto " + nftgen.ServiceChainName(a.Name),
		"10.96.0.11 . tcp . 53 comment \"ns1/b:p53 has no endpoints\" : goto reject-chain",
		"numgen random mod 3 0 goto " + nftgen.EndpointChainName(a.Name, "10.244.0.2:8080") + ` comment "ns1/a:p80 -> 10.244.0.2:8080"`,
		"numgen random mod 2 0 goto " + nftgen.EndpointChainName(a.Name, "10.244.0.3:8080"),
		"goto " + nftgen.EndpointChainName(a.Name, "10.244.0.4:8080") + ` comment "ns1/a:p80 -> 10.244.0.4:8080"`,
		"ip saddr != 10.244.0.0/16 jump KUBE-MARK-MASQ",
		"dnat to 10.244.0.3:8080",
		"meta mark set meta mark | 0x00004000",
		"masquerade fully-random",
		"reject",
		"ct state new jump filter-KUBE-SERVICES",
	} {
		if !strings.Contains(list, want) {
			t.Errorf("nft list lacks %q:\n%s", want, list)
		}
	}

	// Incremental: a grows past the cascade to a numgen map, b is deleted.
	state := nftgen.AppliedFrom(applied)
	var many []string
	for i := range nftgen.CascadeMaxEndpoints + 1 {
		many = append(many, fmt.Sprintf("10.244.%d.%d:8080", 1+i/250, 1+i%250))
	}
	a2 := nftgentest.Port("ns1", "a", 80, "10.96.0.10", many...)
	updates := map[string]*nftgen.Fragment{nftgen.ServiceKey(a.Name): g.Service(&a2), nftgen.ServiceKey(b.Name): nil}
	msgs0, bytes0 := dp.Sent()
	if err := dp.Apply(ctx, nftgen.PlanUpdate(state, updates)); err != nil {
		t.Fatalf("incremental sync: %v", err)
	}
	// Every message has a 16-byte header and a 4-byte nfgenmsg; the batch
	// markers add two more.
	if msgs, bytes := dp.Sent(); msgs-msgs0 == 0 || bytes-bytes0 < 20*(msgs-msgs0+2) {
		t.Errorf("incremental sync: %d messages in %d bytes", msgs-msgs0, bytes-bytes0)
	}
	state.Commit(updates)
	list = ns.MustRun(t, "nft", "list", "table", "ip", nftgen.TableName)
	if !strings.Contains(list, fmt.Sprintf("numgen random mod %d vmap @%s", nftgen.CascadeMaxEndpoints+1, nftgen.EndpointMapPrefix)) || strings.Contains(list, "10.96.0.11") {
		t.Errorf("after update, want a numgen map of %d and no 10.96.0.11:\n%s", nftgen.CascadeMaxEndpoints+1, list)
	}
	if n := strings.Count(list, "map "+nftgen.EndpointMapPrefix); n != 1 {
		t.Errorf("after update, %d endpoint maps, want 1:\n%s", n, list)
	}
	// One more endpoint: the map is deleted and made again under its
	// name, in one batch.
	a2b := nftgentest.Port("ns1", "a", 80, "10.96.0.10", append(many, "10.244.9.9:8080")...)
	updates = map[string]*nftgen.Fragment{nftgen.ServiceKey(a.Name): g.Service(&a2b)}
	tx := nftgen.PlanUpdate(state, updates)
	if err := dp.Apply(ctx, tx); err != nil {
		t.Fatalf("grow the numgen map: %v\n%s", err, tx)
	}
	state.Commit(updates)
	list = ns.MustRun(t, "nft", "list", "table", "ip", nftgen.TableName)
	want := fmt.Sprintf("numgen random mod %d vmap @%s", nftgen.CascadeMaxEndpoints+2, nftgen.EndpointMapName(nftgen.ServiceChainName(a.Name)))
	if !strings.Contains(list, want) || strings.Count(list, "map "+nftgen.EndpointMapPrefix) != 1 {
		t.Errorf("after growing the map, want one endpoint map and %q:\n%s", want, list)
	}
	// Back to 4 endpoints: a cascade again, and the map is gone.
	a3 := nftgentest.Port("ns1", "a", 80, "10.96.0.10", "10.244.0.2:8080", "10.244.0.3:8080", "10.244.0.4:8080", "10.244.0.5:8080")
	updates = map[string]*nftgen.Fragment{nftgen.ServiceKey(a.Name): g.Service(&a3)}
	if err := dp.Apply(ctx, nftgen.PlanUpdate(state, updates)); err != nil {
		t.Fatalf("shrink: %v", err)
	}
	state.Commit(updates)
	list = ns.MustRun(t, "nft", "list", "table", "ip", nftgen.TableName)
	if !strings.Contains(list, "numgen random mod 4 0 goto") || strings.Contains(list, "map "+nftgen.EndpointMapPrefix) {
		t.Errorf("after shrinking, want a cascade and no endpoint map:\n%s", list)
	}

	// Deleting a removes its chains.
	updates = map[string]*nftgen.Fragment{nftgen.ServiceKey(a.Name): nil}
	if err := dp.Apply(ctx, nftgen.PlanUpdate(state, updates)); err != nil {
		t.Fatalf("delete: %v", err)
	}
	state.Commit(updates)
	inv, err = dp.Inventory(ctx, nftgen.FamilyIPv4, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range inv.Chains {
		if strings.HasPrefix(c, "KUBE-SVC-") || strings.HasPrefix(c, "KUBE-SEP-") {
			t.Errorf("chain %s left after deleting the service", c)
		}
	}
	for _, name := range inv.Sets {
		if nftgen.IsEndpointMap(name) {
			t.Errorf("endpoint map %s left after deleting the service", name)
		}
	}
	if err := dp.DeleteTable(ctx, nftgen.FamilyIPv4); err != nil {
		t.Fatal(err)
	}
	if out, _ := ns.Run("nft", "list", "tables"); strings.Contains(out, nftgen.TableName) {
		t.Errorf("table left after DeleteTable: %s", out)
	}
}

// TestKernelAcceptsEveryFeature applies the ruleset with every feature
// through netlink, and its nft text through `nft -f`, in throwaway
// namespaces: both must be accepted, and a second full sync over the first
// must be too.
func TestKernelAcceptsEveryFeature(t *testing.T) {
	testns.RequireRoot(t)
	ctx := context.Background()
	rs := featureGenerator(t).Ruleset(nftgentest.FeaturePorts())

	ns, dp := kernelNetlink(t, "nfp-nl")
	if err := dp.Apply(ctx, nftgen.PlanFull(rs, nil)); err != nil {
		t.Fatalf("netlink full sync: %v", err)
	}
	inv, err := dp.Inventory(ctx, nftgen.FamilyIPv4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := dp.Apply(ctx, nftgen.PlanFull(rs, inv)); err != nil {
		t.Fatalf("netlink resync over existing table: %v", err)
	}
	// Looking the expected chains up by name finds what the whole listing
	// finds; a chain nobody expected falls back to the listing.
	byName, err := dp.Inventory(ctx, nftgen.FamilyIPv4, rs.ChainNames())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(byName.Chains)
	slices.Sort(inv.Chains)
	if !slices.Equal(byName.Chains, inv.Chains) || len(inv.Chains) != len(rs.ChainNames()) {
		t.Errorf("inventory by name: %d chains, by listing %d, desired %d", len(byName.Chains), len(inv.Chains), len(rs.ChainNames()))
	}
	ns.MustRun(t, "nft", "add", "chain", "ip", nftgen.TableName, "stray")
	if withStray, err := dp.Inventory(ctx, nftgen.FamilyIPv4, rs.ChainNames()); err != nil || !slices.Contains(withStray.Chains, "stray") {
		t.Errorf("inventory after another process added a chain: %v, %v; want it listed", withStray, err)
	}
	list := ns.MustRun(t, "nft", "list", "table", "ip", nftgen.TableName)
	for _, want := range []string{"meta l4proto sctp dnat to 10.244.0.9:9000", "update @affinity-", "fib saddr type local", "timeout 1m"} {
		if !strings.Contains(list, want) {
			t.Errorf("kernel table lacks %q", want)
		}
	}

	other := testns.New(t, "nfp-nft")
	file := t.TempDir() + "/rules.nft"
	if err := os.WriteFile(file, []byte(rs.Text()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := other.Run("nft", "-f", file); err != nil {
		t.Errorf("nft -f rejects the rendered ruleset: %v\n%s", err, out)
	}
}

// TestReadBackEqualsApplied applies the all-features ruleset and reads the
// table back: the decoded state must equal the desired one.
func TestReadBackEqualsApplied(t *testing.T) {
	testns.RequireRoot(t)
	ctx := context.Background()
	for _, fam := range []nftgen.Family{nftgen.FamilyIPv4, nftgen.FamilyIPv6} {
		g := featureGenerator(t)
		if fam == nftgen.FamilyIPv6 {
			g = testGenerator6(t)
		}
		// With a ClientIP port above the cascade: its shared affinity set's
		// "client . endpoint" keys decode in both families.
		rs := g.Ruleset(append(nftgentest.FeaturePortsOf(fam == nftgen.FamilyIPv6), bigAffinityPort(fam == nftgen.FamilyIPv6)))
		_, dp := kernelNetlink(t, "nfp-rd")
		if err := dp.Apply(ctx, nftgen.PlanFull(rs, nil)); err != nil {
			t.Fatal(err)
		}
		got, err := dp.Read(ctx, fam)
		if err != nil {
			t.Fatal(err)
		}
		want := rs.State()
		if len(got.Unknown) > 0 {
			t.Errorf("%s: unknown objects: %v", fam, got.Unknown)
		}
		for _, wc := range want.Chains {
			gc := got.Chain(wc.Name)
			if gc == nil {
				t.Errorf("%s: chain %s not read back", fam, wc.Name)
				continue
			}
			if !gc.Equal(wc) {
				t.Errorf("%s: chain read back differs:\n%s\nwant:\n%s", fam, gc.Text(fam), wc.Text(fam))
			}
		}
		if len(got.Chains) != len(want.Chains) {
			t.Errorf("%s: %d chains read back, want %d", fam, len(got.Chains), len(want.Chains))
		}
		for _, wm := range want.Maps {
			gm := got.Map(wm.Spec.Name)
			if gm == nil || len(gm.Elements) != len(wm.Elements) || gm.Spec.Key != wm.Spec.Key {
				t.Errorf("%s: map %s read back as %+v, want %+v", fam, wm.Spec.Name, gm, wm)
				continue
			}
			have := map[nftgen.MapElement]bool{}
			for _, e := range gm.Elements {
				have[e] = true
			}
			for _, e := range wm.Elements {
				if !have[e] {
					t.Errorf("%s: map %s lacks %s", fam, wm.Spec.Name, e.Text())
				}
			}
		}
		if len(got.Sets) != len(want.Sets) {
			t.Errorf("%s: sets %v, want %v", fam, got.Sets, want.Sets)
		}
		// So a full sync of the untouched live table commits nothing but
		// what always changes (the chains that pick from an endpoint map).
		// The read table lists what Inventory lists.
		inv, err := dp.Inventory(ctx, fam, rs.ChainNames())
		if err != nil {
			t.Fatal(err)
		}
		fromRead := got.Inventory()
		for _, l := range [][]string{inv.Chains, inv.Sets, fromRead.Chains, fromRead.Sets} {
			slices.Sort(l)
		}
		if !slices.Equal(inv.Chains, fromRead.Chains) || !slices.Equal(inv.Sets, fromRead.Sets) {
			t.Errorf("%s: the read table lists %v, Inventory %v", fam, fromRead, inv)
		}
		tx := nftgen.PlanReconcile(rs, got)
		if tx == nil {
			t.Fatalf("%s: reconcile of the untouched table gave up", fam)
		}
		for _, op := range tx.Ops {
			if op.Kind == nftgen.OpFlushChain && len(rs.State().Chain(op.Name).EndpointMaps()) == 0 {
				t.Errorf("%s: reconcile of the untouched table rewrites %s", fam, op.Name)
			}
		}
	}
}

// TestReconcileRepairsTheKernelTable tampers with a live table through nft
// and reconciles it: the table read back must equal the desired one, and a
// second reconcile must find nothing to do.
func TestReconcileRepairsTheKernelTable(t *testing.T) {
	testns.RequireRoot(t)
	ctx := context.Background()
	g := testGenerator("10.244.0.0/16")
	ports := nftgentest.ManyPorts(20)
	rs := g.Ruleset(ports)
	ns, dp := kernelNetlink(t, "nfp-rc")
	if err := dp.Apply(ctx, nftgen.PlanFull(rs, nil)); err != nil {
		t.Fatal(err)
	}
	svcChain := rs.Services[nftgen.ServiceKey(ports[2].Name)].Chains[0].Name
	ns.MustRun(t, "nft", "flush", "chain", "ip", nftgen.TableName, svcChain)
	ns.MustRun(t, "nft", "delete", "element", "ip", nftgen.TableName, nftgen.MapServiceIPs, "{ 10.96.0.5 . tcp . 80 }")
	ns.MustRun(t, "nft", "add", "chain", "ip", nftgen.TableName, "stray")
	reconcile := func() *nftgen.Transaction {
		live, err := dp.Read(ctx, nftgen.FamilyIPv4)
		if err != nil {
			t.Fatal(err)
		}
		tx := nftgen.PlanReconcile(rs, live)
		if tx == nil {
			t.Fatal("reconcile gave up")
		}
		if err := dp.Apply(ctx, tx); err != nil {
			t.Fatalf("reconcile: %v\n%s", err, tx)
		}
		return tx
	}
	if tx := reconcile(); len(tx.Ops) == 0 || len(tx.Ops) > 20 {
		t.Errorf("repair sent %d operations, want a handful:\n%s", len(tx.Ops), tx)
	}
	if tx := reconcile(); !tx.Empty() {
		t.Errorf("second reconcile sent %d operations:\n%s", len(tx.Ops), tx)
	}
	list := ns.MustRun(t, "nft", "list", "table", "ip", nftgen.TableName)
	if strings.Contains(list, "chain stray") || !strings.Contains(list, "10.96.0.5 . tcp . 80") {
		t.Errorf("table not repaired:\n%s", list)
	}
}

// TestRejectedTransactionChangesNothing sends an update whose last
// operation the kernel rejects: the earlier operations of the same batch
// must not take effect either.
func TestRejectedTransactionChangesNothing(t *testing.T) {
	testns.RequireRoot(t)
	ctx := context.Background()
	ns, dp := kernelNetlink(t, "nfp-atomic")
	g := testGenerator("10.244.0.0/16")
	a := nftgentest.Port("ns1", "a", 80, "10.96.0.10", "10.244.0.2:8080")
	applied := g.Ruleset([]svcmodel.ServicePortState{a})
	if err := dp.Apply(ctx, nftgen.PlanFull(applied, nil)); err != nil {
		t.Fatal(err)
	}
	before := ns.MustRun(t, "nft", "list", "ruleset")
	b := nftgentest.Port("ns1", "b", 80, "10.96.0.11", "10.244.0.3:8080", "10.244.0.4:8080")
	tx := nftgen.PlanUpdate(nftgen.AppliedFrom(applied), map[string]*nftgen.Fragment{nftgen.ServiceKey(b.Name): g.Service(&b), nftgen.ServiceKey(a.Name): nil})
	tx.Ops = append(tx.Ops, nftgen.Op{Kind: nftgen.OpDeleteChain, Name: "no-such-chain"})
	err := dp.Apply(ctx, tx)
	if err == nil || !nftgen.IsNotFound(err) {
		t.Fatalf("injected failure: %v, want ENOENT", err)
	}
	if after := ns.MustRun(t, "nft", "list", "ruleset"); after != before {
		t.Errorf("a rejected transaction changed the kernel (%d ops):\nbefore:\n%s\nafter:\n%s", len(tx.Ops), before, after)
	}
}

// TestWatchSurvivesLostNotifications gives the monitor a tiny receive
// buffer and lets another process commit a large table, so that the kernel
// drops notifications (ENOBUFS). Watch must report the loss and keep
// watching: a chain of nftproxy's flushed by another process afterwards is
// still reported.
func TestWatchSurvivesLostNotifications(t *testing.T) {
	testns.RequireRoot(t)
	ns, dp := kernelNetlink(t, "nfp-mon")
	dp.monitorReadBuffer = 4096
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes, err := dp.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ports := []svcmodel.ServicePortState{nftgentest.Port("ns1", "s0", 80, "10.96.0.1", "10.244.0.1:8080")}
	rs := testGenerator("10.244.0.0/16").Ruleset(ports)
	if err := dp.Apply(ctx, nftgen.PlanFull(rs, nil)); err != nil {
		t.Fatal(err)
	}
	next := nextChange(t, changes)
	var big strings.Builder
	big.WriteString("table ip other {\n\tchain c {\n")
	for i := range 3000 {
		fmt.Fprintf(&big, "\t\tip daddr 10.%d.%d.1 accept\n", i>>8, i&0xff)
	}
	big.WriteString("\t}\n}\n")
	file := filepath.Join(t.TempDir(), "big.nft")
	os.WriteFile(file, []byte(big.String()), 0o644)
	// Whether the kernel drops notifications depends on the monitor's
	// reader: when it is scheduled between each of the commit's messages
	// (about one commit in fifteen on a loaded two-core machine), it
	// keeps up, nothing is lost, and a table that is not nftproxy's is
	// not reported. So the commit is repeated, up to five times, until
	// the loss is reported.
	lost := false
	for try := 0; try < 5 && !lost; try++ {
		if try > 0 {
			ns.MustRun(t, "nft", "delete", "table", "ip", "other")
		}
		ns.MustRun(t, "nft", "-f", file)
		select {
		case ch := <-changes:
			if !ch.Lost {
				t.Fatalf("first change = %+v, want Lost", ch)
			}
			lost = true
		case <-time.After(2 * time.Second):
		}
	}
	if !lost {
		t.Fatal("five commits of 3,000 rules by another process: no loss reported")
	}
	// The overflow may go on being reported while the monitor catches up
	// (on a loaded machine for a while): wait until it is quiet, so that
	// the flush's notification is not folded into an earlier loss.
	for quiet := false; !quiet; {
		select {
		case <-changes:
		case <-time.After(time.Second):
			quiet = true
		}
	}
	chain := nftgen.ServiceChainName(ports[0].Name)
	ns.MustRun(t, "nft", "flush", "chain", "ip", nftgen.TableName, chain)
	ch := next("after another process flushed " + chain)
	for ch.Lost { // the same overflow may be reported more than once
		ch = next("after another process flushed " + chain)
	}
	if !ch.Ours || !strings.HasPrefix(ch.Process, "nft[") {
		t.Errorf("change = %+v, want one of nftproxy's chains changed by nft", ch)
	}
}

// nextChange returns a function that waits up to 5 s for the next Change.
func nextChange(t *testing.T, changes <-chan nftgen.Change) func(what string) nftgen.Change {
	return func(what string) nftgen.Change {
		t.Helper()
		select {
		case ch, ok := <-changes:
			if !ok {
				t.Fatalf("%s: the watch ended", what)
			}
			return ch
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: nothing within 5 s", what)
		}
		return nftgen.Change{}
	}
}

// TestOwnCommitsAreQuietAndUnseenCommitsReported: while the drift monitor
// runs, nftproxy's own large commit makes the kernel notify nobody (the
// monitor leaves the group for it), so nothing is reported; a commit by
// another process inside that window is not seen as such, but the
// generation id tells, and Watch reports it as Missed.
func TestOwnCommitsAreQuietAndUnseenCommitsReported(t *testing.T) {
	testns.RequireRoot(t)
	ns, dp := kernelNetlink(t, "nfp-quiet")
	dp.monitorReadBuffer = 4096 // a single notification of 300 Services' objects would overflow it
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes, err := dp.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ports []svcmodel.ServicePortState
	for i := range 300 {
		ports = append(ports, nftgentest.Port("ns1", fmt.Sprintf("s%d", i), 80, fmt.Sprintf("10.96.%d.%d", i>>8, i&0xff),
			fmt.Sprintf("10.244.%d.%d:8080", i>>8, i&0xff), fmt.Sprintf("10.245.%d.%d:8080", i>>8, i&0xff)))
	}
	rs := testGenerator("10.244.0.0/16").Ruleset(ports)
	if err := dp.Apply(ctx, nftgen.PlanFull(rs, nil)); err != nil {
		t.Fatal(err)
	}
	select {
	case ch := <-changes:
		t.Fatalf("nftproxy's own commit was reported: %+v", ch)
	case <-time.After(500 * time.Millisecond):
	}
	resume := dp.quiet()
	ns.MustRun(t, "nft", "add", "table", "ip", "someone-else")
	resume(false)
	if ch := nextChange(t, changes)("after a commit unseen by the monitor"); !ch.Missed || !ch.Lost {
		t.Errorf("change = %+v, want Missed", ch)
	}
}

// TestReadFindsChainsNothingJumpsTo: Read finds chains by following jumps
// from the layout's chains and the maps; a chain that another process
// added and nothing jumps to is still read (the table's use count tells
// that something is missing), and so is one that a foreign rule jumps to.
func TestReadFindsChainsNothingJumpsTo(t *testing.T) {
	testns.RequireRoot(t)
	ns, dp := kernelNetlink(t, "nfp-read")
	ctx := context.Background()
	a := nftgentest.Port("ns1", "a", 80, "10.96.0.10", "10.244.0.2:8080", "10.244.0.3:8080")
	rs := testGenerator("10.244.0.0/16").Ruleset([]svcmodel.ServicePortState{a})
	if err := dp.Apply(ctx, nftgen.PlanFull(rs, nil)); err != nil {
		t.Fatal(err)
	}
	has := func(name string) bool {
		st, err := dp.Read(ctx, nftgen.FamilyIPv4)
		if err != nil {
			t.Fatal(err)
		}
		return st.Chain(name) != nil
	}
	if !has(nftgen.ServiceChainName(a.Name)) || !has(nftgen.EndpointChainName(a.Name, "10.244.0.2:8080")) {
		t.Fatal("Read misses nftproxy's own chains")
	}
	// nftproxy's own table (its named counters included) is read by
	// following jumps alone: the whole-table listing is slow at scale.
	if n := dp.fullListings.Load(); n != 0 {
		t.Errorf("reading nftproxy's own table listed all of it %d times", n)
	}
	// Another program's table of the same family: the whole-table listing
	// answers with its chains too, which are not nftproxy's to read.
	ns.MustRun(t, "nft", "add", "table", "ip", "other")
	ns.MustRun(t, "nft", "add", "chain", "ip", "other", "theirs")
	ns.MustRun(t, "nft", "add", "chain", "ip", nftgen.TableName, "stray")
	if !has("stray") {
		t.Error("a chain nothing jumps to was not read")
	}
	if n := dp.fullListings.Load(); n != 1 {
		t.Errorf("a stray chain made Read list the whole table %d times, want once", n)
	}
	ns.MustRun(t, "nft", "add", "chain", "ip", nftgen.TableName, "hidden")
	ns.MustRun(t, "nft", "insert", "rule", "ip", nftgen.TableName, nftgen.ServiceChainName(a.Name), "jump", "hidden")
	if !has("hidden") {
		t.Error("a chain a foreign rule jumps to was not read")
	}
}

// TestLargeTableIsNotListed: in a table with more chains than a listing
// may walk (the limit lowered here), a chain nothing reaches is counted,
// not listed, by Read and left out by Inventory, and the table can still
// be patched: the kernel's chain listing is quadratic, minutes at 100,000
// Services.
func TestLargeTableIsNotListed(t *testing.T) {
	testns.RequireRoot(t)
	ns, dp := kernelNetlink(t, "nfp-unlisted")
	ctx := context.Background()
	a := nftgentest.Port("ns1", "a", 80, "10.96.0.10", "10.244.0.2:8080", "10.244.0.3:8080")
	rs := testGenerator("10.244.0.0/16").Ruleset([]svcmodel.ServicePortState{a})
	if err := dp.Apply(ctx, nftgen.PlanFull(rs, nil)); err != nil {
		t.Fatal(err)
	}
	dp.listingLimit = 3
	ns.MustRun(t, "nft", "add", "chain", "ip", nftgen.TableName, "stray")
	st, err := dp.Read(ctx, nftgen.FamilyIPv4)
	if err != nil {
		t.Fatal(err)
	}
	if st.Unreached != 1 || st.Chain("stray") != nil || st.Chain(nftgen.ServiceChainName(a.Name)) == nil {
		t.Errorf("Read: unreached %d, stray read %v, want 1 unreached and the stray chain not listed", st.Unreached, st.Chain("stray") != nil)
	}
	inv, err := dp.Inventory(ctx, nftgen.FamilyIPv4, rs.ChainNames())
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(inv.Chains, "stray") {
		t.Error("Inventory listed the chains of a table above the limit")
	}
	if n := dp.fullListings.Load(); n != 0 {
		t.Errorf("the table was listed %d times", n)
	}
	if tx := nftgen.PlanReconcile(rs, st); tx == nil || !tx.Empty() {
		t.Errorf("an unlisted stray chain made the table unpatchable or different: %+v", tx)
	}
}

// kernelNetlink returns a throwaway network namespace and a Netlink that
// programs it, both closed when the test ends.
func kernelNetlink(t *testing.T, prefix string) (*testns.NS, *Netlink) {
	t.Helper()
	ns := testns.New(t, prefix)
	dp, f, err := NewNetlinkInNamespace(ns.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close(); f.Close() })
	return ns, dp
}

// TestNetlinkHonoursContexts: with its context ended, no call reaches the
// kernel, and a stream stops between two transactions.
func TestNetlinkHonoursContexts(t *testing.T) {
	testns.RequireRoot(t)
	ns, dp := kernelNetlink(t, "nfp-ctx")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rs := testGenerator("10.244.0.0/16").Ruleset(nftgentest.ManyPorts(3))
	if err := dp.Apply(ctx, nftgen.PlanFull(rs, nil)); !errors.Is(err, context.Canceled) {
		t.Errorf("Apply with an ended context: %v, want context.Canceled", err)
	}
	if _, err := dp.Read(ctx, nftgen.FamilyIPv4); !errors.Is(err, context.Canceled) {
		t.Errorf("Read with an ended context: %v", err)
	}
	if out, _ := ns.Run("nft", "list", "tables"); strings.Contains(out, nftgen.TableName) {
		t.Fatalf("a table was made with an ended context:\n%s", out)
	}
	// The stream stops after the first transaction it was given.
	sctx, stop := context.WithCancel(context.Background())
	defer stop()
	txs := func(yield func(*nftgen.Transaction) bool) {
		for _, tx := range nftgentestChunks(rs) {
			if !yield(tx) {
				return
			}
		}
	}
	sent := 0
	err := dp.ApplyStream(sctx, txs, func(int) error { sent++; stop(); return nil })
	if !errors.Is(err, context.Canceled) || sent != 1 {
		t.Errorf("stream: %v after %d transactions, want context.Canceled after 1", err, sent)
	}
}

// nftgentestChunks cuts rs's cold sync into transactions of 50 operations.
func nftgentestChunks(rs *nftgen.Ruleset) []*nftgen.Transaction {
	b := nftgen.NewColdBuilder(rs.Family, rs.Maps, rs.Top, 50)
	var out []*nftgen.Transaction
	for _, f := range rs.Services {
		if tx := b.Add(f); tx != nil {
			out = append(out, tx)
		}
	}
	return append(out, b.Finish()...)
}

// TestReadCompactKeepsDigests reads a table that another program changed
// as a full sync of a live table does, keeping only digests of the
// chains outside the top level: the reconcile by digests must plan what
// the reconcile of the whole table read back plans, and refill the
// changed chain.
func TestReadCompactKeepsDigests(t *testing.T) {
	testns.RequireRoot(t)
	ctx := context.Background()
	g := featureGenerator(t)
	rs := g.Ruleset(nftgentest.FeaturePortsOf(false))
	ns, dp := kernelNetlink(t, "nfp-ra")
	if err := dp.Apply(ctx, nftgen.PlanFull(rs, nil)); err != nil {
		t.Fatal(err)
	}
	var tampered string
	for _, c := range rs.State().Chains {
		if c.Base == nil && len(c.Rules) > 0 && len(c.EndpointMaps()) == 0 && !slices.Contains(rs.Top.Chains, c) {
			tampered = c.Name
			break
		}
	}
	ns.MustRun(t, "nft", "add", "rule", "ip", nftgen.TableName, tampered, "counter")

	applied := nftgen.NewApplied(rs.Family, rs.Maps, rs.Top)
	digests := applied.LiveDigests((&nftgen.Ruleset{Top: rs.Top}).ChainNames())
	got, err := dp.ReadCompact(ctx, nftgen.FamilyIPv4, digests.Finish)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range got.Chains {
		var top *nftgen.Chain
		if i := slices.IndexFunc(rs.Top.Chains, func(tc *nftgen.Chain) bool { return tc.Name == c.Name }); i >= 0 {
			top = rs.Top.Chains[i]
		}
		switch {
		case top == nil:
			t.Errorf("chain %s was listed; the read keeps it as a digest only", c.Name)
		case top != nil && len(c.Rules) != len(top.Rules):
			t.Errorf("top-level chain %s was read with %d rules, want %d", c.Name, len(c.Rules), len(top.Rules))
		}
	}
	r := nftgen.NewReconciler(got, digests, rs.Top, rs.Maps)
	for _, f := range rs.Services {
		r.Add(f, applied.Summarize(f))
	}
	byDigest := r.Transaction()
	if byDigest == nil {
		t.Fatal("the reconcile by digests gave up")
	}
	whole, err := dp.Read(ctx, nftgen.FamilyIPv4)
	if err != nil {
		t.Fatal(err)
	}
	byRules := nftgen.PlanReconcile(rs, whole)
	ops := func(tx *nftgen.Transaction) []string {
		out := strings.Split(strings.TrimSpace(tx.String()), "\n")
		slices.Sort(out)
		return out
	}
	if !slices.Equal(ops(byDigest), ops(byRules)) {
		t.Errorf("the reconcile by digests plans\n%s\nthe one by rules\n%s", byDigest, byRules)
	}
	if !slices.ContainsFunc(byDigest.Ops, func(op nftgen.Op) bool { return op.Kind == nftgen.OpFlushChain && op.Name == tampered }) {
		t.Errorf("the reconcile by digests does not refill the changed chain %s:\n%s", tampered, byDigest)
	}
}
