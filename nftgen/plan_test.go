package nftgen

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// applyFull installs rs on a new Fake.
func applyFull(t *testing.T, rs *Ruleset) *Fake {
	t.Helper()
	f := NewFake()
	if err := f.Apply(context.Background(), PlanFull(rs, nil)); err != nil {
		t.Fatalf("full sync: %v", err)
	}
	return f
}

// TestOneServiceChangeCostDoesNotDependOnOtherServices counts the operations
// that adding, changing and deleting one service sends, with 10 and with
// 1,000 other services, and checks that they are the same and touch only
// that service's chains and map elements.
func TestOneServiceChangeCostDoesNotDependOnOtherServices(t *testing.T) {
	g := testGenerator("10.244.0.0/16")
	type counts struct{ add, change, del int }
	measure := func(n int) counts {
		ports := nftgentest.ManyPorts(n)
		applied := g.Ruleset(ports)
		fake := applyFull(t, applied)
		state := AppliedFrom(applied)
		var c counts
		step := func(key string, frag *Fragment, chainPrefix string) int {
			updates := map[string]*Fragment{key: frag}
			tx := PlanUpdate(state, updates)
			for _, op := range tx.Ops {
				if strings.HasPrefix(op.Name, "KUBE-S") && !strings.HasPrefix(op.Name, chainPrefix) && op.Name != ChainServices {
					t.Errorf("n=%d: op touches another service: %s", n, op.Text(FamilyIPv4))
				}
			}
			if err := fake.Apply(context.Background(), tx); err != nil {
				t.Fatalf("n=%d: %v\n%s", n, err, tx)
			}
			state.Commit(updates)
			return len(tx.Ops)
		}
		added := nftgentest.Port("ns", "new", 80, "10.100.0.1", "10.244.200.1:80", "10.244.200.2:80")
		c.add = step(ServiceKey(added.Name), g.Service(&added), "KUBE-S")
		changed := ports[n/2]
		changed.Endpoints = append(changed.Endpoints, svcmodel.Endpoint{Addr: added.Endpoints[0].Addr, Port: 8080, Ready: true, Serving: true})
		c.change = step(ServiceKey(changed.Name), g.Service(&changed), "KUBE-S")
		c.del = step(ServiceKey(added.Name), nil, "KUBE-S")

		// The table now equals a fresh full sync of the same model.
		ports[n/2] = changed
		if got, want := fake.Dump(FamilyIPv4), applyFull(t, g.Ruleset(ports)).Dump(FamilyIPv4); got != want {
			t.Errorf("n=%d: incremental result differs from a full sync", n)
		}
		return c
	}
	small, large := measure(10), measure(1000)
	t.Logf("operations for one service: add %d, change %d, delete %d (same with 10 and 1000 services)", large.add, large.change, large.del)
	if small != large {
		t.Errorf("operations with 10 services %+v, with 1000 %+v: they must not depend on the other services", small, large)
	}
	if large.add == 0 || large.change == 0 || large.del == 0 {
		t.Errorf("a step sent nothing: %+v", large)
	}
}

func TestPlanUpdateSkipsUnchangedServices(t *testing.T) {
	g := testGenerator()
	ports := nftgentest.ManyPorts(3)
	applied := g.Ruleset(ports)
	tx := PlanUpdate(AppliedFrom(applied), map[string]*Fragment{ServiceKey(ports[1].Name): g.Service(&ports[1])})
	if !tx.Empty() {
		t.Errorf("an unchanged service produced:\n%s", tx)
	}
}

func TestPlanFullRemovesStrayObjects(t *testing.T) {
	ctx := context.Background()
	g := testGenerator()
	rs := g.Ruleset(nftgentest.ManyPorts(2))
	fake := applyFull(t, rs)
	want := fake.Dump(FamilyIPv4)
	// Leftovers, e.g. from a service deleted while nftproxy was down.
	stray := &Transaction{Family: FamilyIPv4, Ops: []Op{
		{Kind: OpAddChain, Name: "KUBE-SVC-STALE"},
		{Kind: OpAddChain, Name: "KUBE-SEP-STALE"},
		{Kind: OpAddRule, Name: "KUBE-SVC-STALE", Rule: &Rule{Stmts: []Stmt{Verdict{Kind: VerdictGoto, Chain: "KUBE-SEP-STALE"}}}},
		{Kind: OpAddMap, Name: "old-map", Map: &MapSpec{Name: "old-map"}},
	}}
	if err := fake.Apply(ctx, stray); err != nil {
		t.Fatal(err)
	}
	inv, _ := fake.Inventory(ctx, FamilyIPv4, nil)
	if err := fake.Apply(ctx, PlanFull(rs, inv)); err != nil {
		t.Fatalf("repair: %v", err)
	}
	if got := fake.Dump(FamilyIPv4); got != want {
		t.Errorf("after repair:\n%s\nwant:\n%s", got, want)
	}
}

func TestFakeChecksLikeTheKernel(t *testing.T) {
	ctx := context.Background()
	g := testGenerator()
	ports := nftgentest.ManyPorts(1)
	rs := g.Ruleset(ports)
	fake := applyFull(t, rs)
	before := fake.Dump(FamilyIPv4)
	svcChain := ServiceChainName(ports[0].Name)
	cases := map[string]Op{
		"delete a chain still referenced": {Kind: OpDeleteChain, Name: svcChain},
		"jump to a missing chain":         {Kind: OpAddRule, Name: ChainServices, Rule: &Rule{Stmts: []Stmt{Verdict{Kind: VerdictJump, Chain: "nope"}}}},
		"delete a missing element":        {Kind: OpDeleteElement, Name: MapServiceIPs, Element: &MapElement{}},
	}
	for name, op := range cases {
		// A valid op first, so that a partial apply would show.
		tx := &Transaction{Family: FamilyIPv4, Ops: []Op{{Kind: OpFlushChain, Name: ChainServices}, op}}
		if err := fake.Apply(ctx, tx); err == nil {
			t.Errorf("%s: no error", name)
		}
		if fake.Dump(FamilyIPv4) != before {
			t.Errorf("%s: failed transaction changed the table", name)
		}
	}
}

// TestPlannedUpdateCommitsWhatItPlanned checks that committing a planned
// update records its fragments' summaries and changes the same keys as
// committing the fragments, and that
// the next plan of the same fragments is then empty.
func TestPlannedUpdateCommitsWhatItPlanned(t *testing.T) {
	g := testGenerator("10.244.0.0/16")
	ports := nftgentest.ManyPorts(20)
	rs := g.Ruleset(ports)
	viaPlan, viaFragments := AppliedFrom(rs), AppliedFrom(rs)
	changed := ports[3]
	changed.Endpoints = append(changed.Endpoints, svcmodel.Endpoint{Addr: changed.Endpoints[0].Addr, Port: 9090, Ready: true, Serving: true})
	added := nftgentest.Port("ns", "new", 80, "10.100.0.1", "10.244.200.1:80")
	updates := map[string]*Fragment{
		ServiceKey(changed.Name):  g.Service(&changed),
		ServiceKey(added.Name):    g.Service(&added),
		ServiceKey(ports[5].Name): nil,
	}
	u := viaPlan.PlanUpdate(updates)
	if len(u.Tx.Ops) == 0 {
		t.Fatal("the update plans no operations")
	}
	got, want := u.Commit(), viaFragments.Commit(updates)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || len(got) != 3 {
		t.Errorf("changed keys: planned commit %v, fragment commit %v", got, want)
	}
	for key := range updates {
		if !viaPlan.Services[key].equal(viaPlan.Summarize(updates[key])) {
			t.Errorf("%s: the planned commit records another summary than the fragment's", key)
		}
	}
	if again := PlanUpdate(viaPlan, updates); len(again.Ops) != 0 {
		t.Errorf("after the commit the same update plans %d operations", len(again.Ops))
	}
}

// TestUpdateReplacesEndpointMaps: the endpoint map of a chain that is
// rewritten goes with its old rule and is made again under its name in the
// same transaction; on the Fake as in the kernel, an endpoint map is an
// object of the table that a flush leaves behind.
func TestUpdateReplacesEndpointMaps(t *testing.T) {
	g := testGenerator("10.244.0.0/16")
	port := func(n int) svcmodel.ServicePortState {
		var eps []string
		for i := range n {
			eps = append(eps, fmt.Sprintf("10.244.%d.%d:80", i/200, i%200+1))
		}
		return nftgentest.Port("ns", "big", 80, "10.96.0.1", eps...)
	}
	first := port(CascadeMaxEndpoints + 1)
	rs := g.Ruleset([]svcmodel.ServicePortState{first})
	fake := applyFull(t, rs)
	applied := AppliedFrom(rs)
	ctx := context.Background()
	endpointMaps := func() []string {
		inv, _ := fake.Inventory(ctx, FamilyIPv4, nil)
		return slices.DeleteFunc(inv.Sets, func(s string) bool { return !IsEndpointMap(s) })
	}
	want := []string{EndpointMapName(ServiceChainName(first.Name))}
	if got := endpointMaps(); !slices.Equal(got, want) {
		t.Fatalf("after the full sync: endpoint maps %v, want %v", got, want)
	}
	for _, n := range []int{CascadeMaxEndpoints + 2, 3} {
		sp := port(n)
		updates := map[string]*Fragment{ServiceKey(sp.Name): g.Service(&sp)}
		tx := PlanUpdate(applied, updates)
		if err := fake.Apply(ctx, tx); err != nil {
			t.Fatalf("%d endpoints: %v\n%s", n, err, tx)
		}
		applied.Commit(updates)
		if n == 3 {
			want = nil
		}
		if got := endpointMaps(); !slices.Equal(got, want) {
			t.Errorf("%d endpoints: endpoint maps %v, want %v", n, got, want)
		}
	}
}
