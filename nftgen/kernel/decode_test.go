package kernel

import (
	"fmt"
	"net/netip"
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

// TestEveryStmtKindRoundTrips: each kind of nftgen.StmtKinds, alone in a
// rule, in both families, is encoded and decoded back to itself; Unknown,
// which nftproxy never writes, is refused by the encoder.
func TestEveryStmtKindRoundTrips(t *testing.T) {
	for _, fam := range []nftgen.Family{nftgen.FamilyIPv4, nftgen.FamilyIPv6} {
		anon := map[string]anonVmap{}
		b := &exprBuilder{family: fam, addAnon: func(m anonVmap) (string, uint32) {
			name := m.Map // an endpoint map keeps its name, as the dataplane names it
			if name == "" {
				name = fmt.Sprintf("__map%d", len(anon)+1)
			}
			anon[name] = m
			return name, uint32(len(anon))
		}}
		d := &exprDecoder{family: fam, anon: func(name string) ([]string, []string, bool) {
			m, ok := anon[name]
			return m.Targets, m.Comments, ok
		}}
		for _, s := range nftgen.StmtKinds() {
			s = forFamily(s, fam)
			r := nftgen.Rule{Stmts: []nftgen.Stmt{s}}
			es, err := b.ruleExprs(&r)
			if _, unknown := s.(nftgen.Unknown); unknown {
				if err == nil {
					t.Errorf("%s: the encoder took %T", fam, s)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: encode %T: %v", fam, s, err)
				continue
			}
			back := nftgen.Rule{Stmts: d.decode(es)}
			if !back.Equal(&r) {
				t.Errorf("%s %T:\n got %s\nwant %s", fam, s, back.Text(fam), r.Text(fam))
			}
		}
	}
}

// forFamily returns s with its addresses in family fam.
func forFamily(s nftgen.Stmt, fam nftgen.Family) nftgen.Stmt {
	if fam == nftgen.FamilyIPv4 {
		return s
	}
	switch s := s.(type) {
	case nftgen.MatchAddr:
		s.Prefix = netip.MustParsePrefix("fd00:10:244::/64")
		return s
	case nftgen.AffinityUpdate:
		s.Endpoint = netip.MustParseAddrPort("[fd00:10:244::2]:8080")
		return s
	case nftgen.DNAT:
		s.Addr = netip.MustParseAddr("fd00:10:244::2")
		return s
	}
	return s
}
