package nftgen

import (
	"context"
	"net/netip"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// TestAppliedSummaryNoticesEveryChange: the summary Applied keeps of a
// fragment matches that fragment, and no longer matches once any rule,
// numgen target or comment, set or element of it changes; PlanUpdate from
// the summary then rewrites just the changed chain and gives the table a
// full sync would give.
func TestAppliedSummaryNoticesEveryChange(t *testing.T) {
	g := testGenerator("10.244.0.0/16")
	ports := append(nftgentest.FeaturePorts(), nftgentest.ManyPorts(3)...)
	rs := g.Ruleset(ports)
	a := AppliedFrom(rs)
	for key, f := range rs.Services {
		if !a.Matches(a.Services[key], f) {
			t.Fatalf("%s: the summary does not match its own fragment", key)
		}
	}
	key := ServiceKey(ports[len(ports)-1].Name)
	mutations := map[string]func(f *Fragment){
		"a DNAT port": func(f *Fragment) {
			c := f.Chains[len(f.Chains)-1]
			r := &c.Rules[len(c.Rules)-1]
			d := r.Stmts[len(r.Stmts)-1].(DNAT)
			d.Port++
			r.Stmts[len(r.Stmts)-1] = d
		},
		"a rule comment": func(f *Fragment) { f.Chains[0].Rules[0].Comment += "x" },
		"a rule removed": func(f *Fragment) { f.Chains[0].Rules = f.Chains[0].Rules[1:] },
		"an element's verdict": func(f *Fragment) {
			for m, els := range f.Elements {
				els[0].Verdict.Chain = ChainReject
				f.Elements[m] = els
				return
			}
		},
		"a set": func(f *Fragment) { f.Sets = append(f.Sets, SetSpec{Name: "affinity-x", TimeoutSeconds: 10}) },
	}
	for what, mutate := range mutations {
		t.Run(what, func(t *testing.T) {
			changed := cloneFragment(rs.Services[key])
			mutate(changed)
			if a.Matches(a.Services[key], changed) {
				t.Fatal("the summary still matches the changed fragment")
			}
			fake := applyFull(t, rs)
			if err := fake.Apply(context.Background(), PlanUpdate(a, map[string]*Fragment{key: changed})); err != nil {
				t.Fatal(err)
			}
			want := &Ruleset{Family: rs.Family, Maps: rs.Maps, Top: rs.Top, Services: map[string]*Fragment{}}
			for k, f := range rs.Services {
				want.Services[k] = f
			}
			want.Services[key] = changed
			if got, exp := fake.Dump(FamilyIPv4), applyFull(t, want).Dump(FamilyIPv4); got != exp {
				t.Errorf("patched table differs from a full sync:\n%s\nwant:\n%s", got, exp)
			}
		})
	}
	// A numgen map's targets and comments are digested too.
	vm := &Chain{Name: "KUBE-SVC-X", Rules: []Rule{NewRule("", NumgenVmap{Targets: []string{"A", "B"}, Comments: []string{"a", "b"}})}}
	for _, other := range []NumgenVmap{
		{Targets: []string{"A", "C"}, Comments: []string{"a", "b"}},
		{Targets: []string{"A", "B"}, Comments: []string{"a", "c"}},
		{Targets: []string{"AB"}, Comments: []string{"ab"}},
	} {
		o := &Chain{Name: "KUBE-SVC-X", Rules: []Rule{NewRule("", other)}}
		if a.digest(vm) == a.digest(o) {
			t.Errorf("%+v and %+v have one digest", vm.Rules[0].Stmts[0], other)
		}
	}
	// The same statement values in another order differ.
	x := &Chain{Name: "c", Rules: []Rule{NewRule("", MatchDport{Port: 80}, DNAT{Addr: netip.MustParseAddr("10.0.0.1"), Port: 80})}}
	y := &Chain{Name: "c", Rules: []Rule{NewRule("", DNAT{Addr: netip.MustParseAddr("10.0.0.1"), Port: 80}, MatchDport{Port: 80})}}
	if a.digest(x) == a.digest(y) {
		t.Error("reordered statements have one digest")
	}
}

// cloneFragment copies f deeply enough that mutating its rules, elements
// and sets leaves f as it is.
func cloneFragment(f *Fragment) *Fragment {
	out := &Fragment{Sets: append([]SetSpec(nil), f.Sets...), Elements: map[string][]MapElement{}}
	for _, c := range f.Chains {
		cc := &Chain{Name: c.Name, Base: c.Base}
		for _, r := range c.Rules {
			cc.Rules = append(cc.Rules, Rule{Stmts: append([]Stmt(nil), r.Stmts...), Comment: r.Comment})
		}
		out.Chains = append(out.Chains, cc)
	}
	for m, els := range f.Elements {
		out.Elements[m] = append([]MapElement(nil), els...)
	}
	return out
}
