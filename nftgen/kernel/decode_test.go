package kernel

import (
	"fmt"
	"testing"

	"github.com/google/nftables/expr"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// TestDecodeInvertsEncode encodes every rule of the all-features ruleset
// (both families) and decodes it again.
func TestDecodeInvertsEncode(t *testing.T) {
	for _, fam := range []nftgen.Family{nftgen.FamilyIPv4, nftgen.FamilyIPv6} {
		g := featureGenerator(t)
		if fam == nftgen.FamilyIPv6 {
			g = testGenerator6(t)
		}
		rs := g.Ruleset(nftgentest.FeaturePortsOf(fam == nftgen.FamilyIPv6))
		anon := map[string]anonVmap{}
		n := 0
		b := &exprBuilder{family: fam, addAnon: func(m anonVmap) (string, uint32) {
			n++
			name := fmt.Sprintf("__map%d", n)
			anon[name] = m
			return name, uint32(n)
		}}
		d := &exprDecoder{family: fam, anon: func(name string) ([]string, []string, bool) {
			m, ok := anon[name]
			return m.Targets, m.Comments, ok
		}}
		for _, c := range rs.Chains() {
			for i := range c.Rules {
				es, err := b.ruleExprs(&c.Rules[i])
				if err != nil {
					t.Fatalf("%s: %v", c.Name, err)
				}
				back := nftgen.Rule{Stmts: d.decode(es), Comment: c.Rules[i].Comment}
				if !back.Equal(&c.Rules[i]) {
					t.Errorf("%s %s rule %d:\n got %s\nwant %s", fam, c.Name, i, back.Text(fam), c.Rules[i].Text(fam))
				}
			}
		}
	}
}

func TestDecodeKeepsUnknownExpressions(t *testing.T) {
	d := &exprDecoder{family: nftgen.FamilyIPv4}
	got := d.decode([]expr.Any{&expr.Log{}, &expr.Verdict{Kind: expr.VerdictAccept}})
	if len(got) != 2 {
		t.Fatalf("got %v", got)
	}
	if _, ok := got[0].(nftgen.Unknown); !ok {
		t.Errorf("log expression decoded as %T, want Unknown", got[0])
	}
}
