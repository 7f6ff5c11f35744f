//go:build linux

package kernel

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	"github.com/nftproxy/nftproxy/e2e/testns"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// TestReconcileOfAnUnchangedTableSendsNothing: a table with a ClientIP
// affinity Service of 500 endpoints (endpoint map, one affinity set per
// endpoint) and a plain one of 300 reconciles with no operation at all
// (its numgen chains used to be rewritten at every reconcile: 8 s of
// kernel time at 8,000 endpoints). An endpoint map tampered with is
// repaired by rewriting that chain alone, and no endpoint map is left
// behind.
func TestReconcileOfAnUnchangedTableSendsNothing(t *testing.T) {
	testns.RequireRoot(t)
	ns, dp := kernelNetlink(t, "nfp-aff")
	ctx := context.Background()
	eps := func(n, third int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("10.%d.%d.%d:8080", third, i/250, i%250+1))
		}
		return out
	}
	aff := nftgentest.Port("ns1", "aff", 80, "10.96.0.10", eps(500, 100)...)
	aff.AffinityTimeoutSeconds = 10800
	plain := nftgentest.Port("ns1", "plain", 80, "10.96.0.11", eps(300, 101)...)
	rs := testGenerator("10.244.0.0/16").Ruleset([]svcmodel.ServicePortState{aff, plain})
	if err := dp.Apply(ctx, nftgen.PlanFull(rs, nil)); err != nil {
		t.Fatal(err)
	}
	reconcile := func(what string) *nftgen.Transaction {
		t.Helper()
		live, err := dp.Read(ctx, nftgen.FamilyIPv4)
		if err != nil {
			t.Fatal(err)
		}
		var maps []string
		for _, name := range live.SetNames {
			if nftgen.IsEndpointMap(name) {
				maps = append(maps, name)
			}
		}
		if len(maps) != 2 {
			t.Fatalf("%s: the live table holds %d endpoint maps, want 2: %v", what, len(maps), maps)
		}
		tx := nftgen.PlanReconcile(rs, live)
		if tx == nil {
			t.Fatalf("%s: reconcile gave up", what)
		}
		if err := dp.Apply(ctx, tx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return tx
	}
	if tx := reconcile("unchanged"); !tx.Empty() {
		t.Errorf("reconcile of an unchanged table sent %d operations (%d rules)", len(tx.Ops), tx.Count(nftgen.OpAddRule))
	}
	live, _ := dp.Read(ctx, nftgen.FamilyIPv4)
	ep := endpointMapsRead(live)[nftgen.ServiceChainName(plain.Name)]
	if want := nftgen.EndpointMapName(nftgen.ServiceChainName(plain.Name)); ep != want {
		t.Errorf("the service chain reads endpoint map %q, want %q", ep, want)
	}
	listing := ns.MustRun(t, "nft", "list", "map", "ip", nftgen.TableName, ep)
	first := strings.Fields(strings.SplitN(listing, "elements = {", 2)[1])[0]
	ns.MustRun(t, "nft", "delete", "element", "ip", nftgen.TableName, ep, "{ "+first+" }")
	if tx := reconcile("tampered"); tx.Count(nftgen.OpFlushChain) != 1 || tx.Count(nftgen.OpAddRule) > 5 {
		t.Errorf("repair of one endpoint map: %d flushes, %d rules, want that chain alone", tx.Count(nftgen.OpFlushChain), tx.Count(nftgen.OpAddRule))
	}
	svcChain := nftgen.ServiceChainName(aff.Name)
	ns.MustRun(t, "nft", "flush", "chain", "ip", nftgen.TableName, svcChain)
	if tx := reconcile("flushed"); tx.Count(nftgen.OpFlushChain) != 1 || tx.Count(nftgen.OpDeleteSet) != 1 {
		t.Errorf("repair of a flushed chain: %d flushes, %d set deletions (its old endpoint map), want 1 and 1", tx.Count(nftgen.OpFlushChain), tx.Count(nftgen.OpDeleteSet))
	}
	if tx := reconcile("repaired"); !tx.Empty() {
		t.Errorf("reconcile after the repair sent %d operations", len(tx.Ops))
	}
	if n := strings.Count(ns.MustRun(t, "nft", "list", "maps", "ip"), "map "+nftgen.EndpointMapPrefix); n != 2 {
		t.Errorf("%d endpoint maps in the kernel, want 2", n)
	}
}

// endpointMapsRead maps each chain of st to the endpoint map its rules read.
func endpointMapsRead(st *nftgen.TableState) map[string]string {
	out := map[string]string{}
	for _, c := range st.Chains {
		for _, m := range c.EndpointMaps() {
			out[c.Name] = m
		}
	}
	return out
}

// bigAffinityPort is a ClientIP port with more endpoints than the cascade.
func bigAffinityPort(ipv6 bool) svcmodel.ServicePortState {
	vip, eps := "10.96.9.1", []string{}
	if ipv6 {
		vip = "fd00:96::9:1"
	}
	for i := range nftgen.CascadeMaxEndpoints + 5 {
		if ipv6 {
			eps = append(eps, fmt.Sprintf("[fd00:10:244::%x]:8080", i+1))
		} else {
			eps = append(eps, fmt.Sprintf("10.244.9.%d:8080", i+1))
		}
	}
	sp := nftgentest.Port("ns1", "bigaff", 80, vip, eps...)
	sp.AffinityTimeoutSeconds = 600
	return sp
}
