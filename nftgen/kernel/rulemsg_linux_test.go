//go:build linux

package kernel

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// encodedRules encodes every rule of the feature rulesets of both families
// as nftproxy sends them, without a kernel.
func encodedRules(t *testing.T) map[nftgen.Family][]netlink.Message {
	t.Helper()
	out := map[nftgen.Family][]netlink.Message{}
	for _, fam := range []nftgen.Family{nftgen.FamilyIPv4, nftgen.FamilyIPv6} {
		g := featureGenerator(t)
		if fam == nftgen.FamilyIPv6 {
			g = testGenerator6(t)
		}
		p, err := NewNetlink().prepare(nftgen.PlanFull(g.Ruleset(nftgentest.FeaturePortsOf(fam == nftgen.FamilyIPv6)), nil))
		if err != nil {
			t.Fatal(err)
		}
		sent := batchMessages(t, p.batch)
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
		table := &nftables.Table{Name: nftgen.TableName, Family: tableFamily(fam)}
		want, err := dec.GetRules(table, &nftables.Chain{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		if len(want) != len(msgs) {
			t.Fatalf("%s: library decoded %d of %d rules", fam, len(want), len(msgs))
		}
		kinds := map[string]bool{}
		for i, m := range msgs {
			var got parsedRule
			if err := parseRuleMsg(m.Data, &got); err != nil {
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
			if string(got.chain) != want[i].Chain.Name || string(got.userData) != string(want[i].UserData) {
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
	var r parsedRule
	if err := parseRuleMsg(append([]byte{2, 0, 0, 0}, body...), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.exprs) != 3 || r.exprs[0].e == nil || r.exprs[1].unknown != "frobnicate" || r.exprs[2].unknown != "log" {
		t.Errorf("expressions %+v, want counter, then frobnicate and log by name", r.exprs)
	}
	// The parsedRule is reused: a second rule replaces what the first left.
	short, _ := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NFTA_RULE_HANDLE, Data: []byte{0, 0, 0, 0, 0, 0, 0, 7}}})
	if err := parseRuleMsg(append([]byte{2, 0, 0, 0}, short...), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.exprs) != 0 || r.chain != nil || r.handle != 7 {
		t.Errorf("second rule parsed into the first's parsedRule: %+v", r)
	}
	if err := parseRuleMsg([]byte{2, 0, 0, 0, 200, 0, 1, 0}, &r); err == nil {
		t.Error("a truncated attribute decoded without an error")
	}
}

// TestRuleMessageMatchesTheLibrary: for every rule of the feature
// rulesets, the rule message nftproxy writes itself carries the table,
// chain, expressions and comment byte for byte as google/nftables' AddRule
// writes them (which adds only a rule ID and asks for an echo).
func TestRuleMessageMatchesTheLibrary(t *testing.T) {
	for _, fam := range []nftgen.Family{nftgen.FamilyIPv4, nftgen.FamilyIPv6} {
		g := featureGenerator(t)
		if fam == nftgen.FamilyIPv6 {
			g = testGenerator6(t)
		}
		table := &nftables.Table{Name: nftgen.TableName, Family: tableFamily(fam)}
		var lib []netlink.Message
		c, err := nftables.New(nftables.WithTestDial(func(reqs []netlink.Message) ([]netlink.Message, error) {
			for _, m := range reqs {
				if m.Header.Type == netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWRULE) {
					lib = append(lib, m)
				}
			}
			return nil, nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		b := &exprBuilder{family: fam, addAnon: func(anonVmap) (string, uint32) { return "ep-test", 7 }}
		var own []netlink.Message
		for _, ch := range g.Ruleset(nftgentest.FeaturePortsOf(fam == nftgen.FamilyIPv6)).Chains() {
			for i := range ch.Rules {
				exprs, err := b.ruleExprs(&ch.Rules[i])
				if err != nil {
					t.Fatal(err)
				}
				var ud []byte
				if ch.Rules[i].Comment != "" {
					ud = appendComment(nil, ch.Rules[i].Comment)
				}
				m, err := ruleMessage(table.Family, nftgen.TableName, ch.Name, exprs, ud, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				own = append(own, m)
				c.AddRule(&nftables.Rule{Table: table, Chain: &nftables.Chain{Name: ch.Name, Table: table}, Exprs: exprs, UserData: ud})
			}
		}
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
		if len(own) != len(lib) || len(own) < 50 {
			t.Fatalf("%s: %d own rule messages, %d from the library", fam, len(own), len(lib))
		}
		attrsOf := func(m netlink.Message) map[uint16]string {
			out := map[uint16]string{}
			a := attrs{b: m.Data[4:]}
			for typ, v, ok := a.next(); ok; typ, v, ok = a.next() {
				out[typ] = string(v)
			}
			return out
		}
		for i := range own {
			o, l := attrsOf(own[i]), attrsOf(lib[i])
			if string(own[i].Data[:4]) != string(lib[i].Data[:4]) {
				t.Errorf("%s rule %d: header %x, library %x", fam, i, own[i].Data[:4], lib[i].Data[:4])
			}
			for _, typ := range []uint16{unix.NFTA_RULE_TABLE, unix.NFTA_RULE_CHAIN, unix.NFTA_RULE_EXPRESSIONS, unix.NFTA_RULE_USERDATA} {
				if o[typ] != l[typ] {
					t.Errorf("%s rule %d: attribute %d differs:\n own     %x\n library %x", fam, i, typ, o[typ], l[typ])
				}
			}
			delete(l, unix.NFTA_RULE_ID)
			if len(o) != len(l) {
				t.Errorf("%s rule %d: attributes %d, library %d (besides its rule ID)", fam, i, len(o), len(l))
			}
		}
	}
}

// TestChainMessageMatchesTheLibrary: the message of a regular chain that
// nftproxy writes itself is google/nftables' AddChain message byte for
// byte, header flags included.
func TestChainMessageMatchesTheLibrary(t *testing.T) {
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
		for _, name := range []string{"KUBE-SEP-ABCDEFGHIJKLMNOP", "odd", "abcd"} {
			table := &nftables.Table{Name: nftgen.TableName, Family: fam}
			var lib []netlink.Message
			c, err := nftables.New(nftables.WithTestDial(func(reqs []netlink.Message) ([]netlink.Message, error) {
				for _, m := range reqs {
					if m.Header.Type == netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWCHAIN) {
						lib = append(lib, m)
					}
				}
				return nil, nil
			}))
			if err != nil {
				t.Fatal(err)
			}
			c.AddChain(&nftables.Chain{Table: table, Name: name})
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
			enc := &objEncoder{family: fam, table: nftgen.TableName, batch: &wireBatch{pool: &blockPool{}}}
			own := enc.addRegularChain(name)
			if len(lib) != 1 {
				t.Fatalf("library wrote %d chain messages", len(lib))
			}
			// The library also asks for an acknowledgement when it flushes.
			if lf := lib[0].Header.Flags &^ netlink.Acknowledge; own.Header.Type != lib[0].Header.Type || own.Header.Flags != lf {
				t.Errorf("%s: header %+v, library %+v", name, own.Header, lib[0].Header)
			}
			if !bytes.Equal(own.Data, lib[0].Data) {
				t.Errorf("%s: data %x, library %x", name, own.Data, lib[0].Data)
			}
		}
	}
}
