//go:build linux

package nftgen

import (
	"reflect"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// encodedRules encodes every rule of the feature rulesets of both families
// as nftproxy sends them, without a kernel.
func encodedRules(t *testing.T) map[Family][]netlink.Message {
	t.Helper()
	out := map[Family][]netlink.Message{}
	for _, fam := range []Family{FamilyIPv4, FamilyIPv6} {
		g := featureGenerator(t)
		if fam == FamilyIPv6 {
			g = testGenerator6(t)
		}
		p, err := NewNetlink().prepare(PlanFull(g.Ruleset(featurePorts6(fam)), nil))
		if err != nil {
			t.Fatal(err)
		}
		sent := p.batch
		for _, m := range sent {
			if m.Header.Type == netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWRULE) {
				out[fam] = append(out[fam], m)
			}
		}
		if len(out[fam]) < 50 {
			t.Fatalf("%s: only %d rule messages encoded", fam, len(out[fam]))
		}
	}
	return out
}

// TestRuleDecoderMatchesTheLibrary: for every rule nftproxy writes (every
// feature, both families), the own decoder gives the expressions, chain
// and comment google/nftables gives.
func TestRuleDecoderMatchesTheLibrary(t *testing.T) {
	for fam, msgs := range encodedRules(t) {
		dec, err := decoder(msgs)
		if err != nil {
			t.Fatal(err)
		}
		table := &nftables.Table{Name: TableName, Family: tableFamily(fam)}
		want, err := dec.GetRules(table, &nftables.Chain{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		if len(want) != len(msgs) {
			t.Fatalf("%s: library decoded %d of %d rules", fam, len(want), len(msgs))
		}
		kinds := map[string]bool{}
		for i, m := range msgs {
			got, err := parseRuleMsg(m.Data)
			if err != nil {
				t.Fatalf("%s rule %d: %v", fam, i, err)
			}
			var exprs []expr.Any
			for _, x := range got.exprs {
				if x.e == nil {
					t.Errorf("%s rule %d: expression %q not decoded", fam, i, x.unknown)
					continue
				}
				exprs = append(exprs, x.e)
				kinds[reflect.TypeOf(x.e).Elem().Name()] = true
			}
			if got.chain != want[i].Chain.Name || string(got.userData) != string(want[i].UserData) {
				t.Errorf("%s rule %d: chain %q userdata %q, library %q %q", fam, i, got.chain, got.userData, want[i].Chain.Name, want[i].UserData)
			}
			if (len(exprs) > 0 || len(want[i].Exprs) > 0) && !reflect.DeepEqual(exprs, want[i].Exprs) {
				t.Errorf("%s rule %d in %s:\n own     %#v\n library %#v", fam, i, got.chain, exprs, want[i].Exprs)
			}
		}
		t.Logf("%s: %d rules, expression kinds %v", fam, len(msgs), kinds)
	}
}

// TestRuleDecoderKeepsForeignExpressions: an expression kind nftproxy does
// not write is kept by name (google/nftables drops kinds it does not know),
// so the rule reads as foreign.
func TestRuleDecoderKeepsForeignExpressions(t *testing.T) {
	elem := func(name string, data []byte) netlink.Attribute {
		b, _ := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NFTA_EXPR_NAME, Data: []byte(name + "\x00")}, {Type: unix.NLA_F_NESTED | unix.NFTA_EXPR_DATA, Data: data}})
		return netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: b}
	}
	list, _ := netlink.MarshalAttributes([]netlink.Attribute{elem("counter", nil), elem("frobnicate", nil), elem("log", nil)})
	body, _ := netlink.MarshalAttributes([]netlink.Attribute{
		{Type: unix.NFTA_RULE_CHAIN, Data: []byte("KUBE-SERVICES\x00")},
		{Type: unix.NLA_F_NESTED | unix.NFTA_RULE_EXPRESSIONS, Data: list},
	})
	r, err := parseRuleMsg(append([]byte{2, 0, 0, 0}, body...))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.exprs) != 3 || r.exprs[0].e == nil || r.exprs[1].unknown != "frobnicate" || r.exprs[2].unknown != "log" {
		t.Errorf("expressions %+v, want counter, then frobnicate and log by name", r.exprs)
	}
	if _, err := parseRuleMsg([]byte{2, 0, 0, 0, 200, 0, 1, 0}); err == nil {
		t.Error("a truncated attribute decoded without an error")
	}
}
