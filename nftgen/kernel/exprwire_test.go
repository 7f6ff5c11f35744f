package kernel

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// libraryExpr is one expression as google/nftables marshals it, wrapped as
// an element of a rule's expression list.
func libraryExpr(t *testing.T, fam byte, e expr.Any) []byte {
	t.Helper()
	data, err := expr.Marshal(fam, e)
	if err != nil {
		t.Fatalf("library marshal %T: %v", e, err)
	}
	return wire(nil).attr(unix.NLA_F_NESTED|unix.NFTA_LIST_ELEM, data)
}

func checkExpr(t *testing.T, what string, fam byte, e expr.Any) {
	t.Helper()
	got, err := appendExpr([]byte{0xaa, 0xbb, 0xcc, 0xdd}, fam, e)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if want := append([]byte{0xaa, 0xbb, 0xcc, 0xdd}, libraryExpr(t, fam, e)...); !bytes.Equal(got, want) {
		t.Errorf("%s %T %+v:\n got %x\nwant %x", what, e, e, got, want)
	}
}

// TestAppendExprMatchesLibrary: nftproxy's expression encoder writes the
// bytes google/nftables writes, for every variant of every kind it
// encodes itself, and for every rule of the all-features ruleset of both
// families.
func TestAppendExprMatchesLibrary(t *testing.T) {
	variants := []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Payload{OperationType: expr.PayloadWrite, SourceRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2, CsumType: expr.CsumTypeInet, CsumOffset: 16},
		&expr.Payload{OperationType: expr.PayloadWrite, SourceRegister: 1, Base: expr.PayloadBaseTransportHeader, Len: 2, CsumType: expr.CsumTypeInet, CsumOffset: 6, CsumFlags: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{10, 96, 0, 1}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte("eth0\x00")},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
		&expr.Ct{Key: expr.CtKeySTATE, Register: 1},
		&expr.Ct{Key: expr.CtKeyMARK, SourceRegister: true, Register: 1},
		&expr.Ct{Key: expr.CtKeySRCIP, Register: 1, Direction: 1},
		&expr.Ct{Key: expr.CtKeyPROTOCOL, Register: 1, OptDirection: true},
		&expr.Immediate{Register: 1, Data: []byte{0, 0, 0x40, 0}},
		&expr.Verdict{Kind: expr.VerdictAccept},
		&expr.Verdict{Kind: expr.VerdictJump, Chain: "KUBE-SVC-ABCDEFGHIJKLMNOP"},
		&expr.Verdict{Kind: expr.VerdictGoto, Chain: "odd"},
		&expr.Lookup{SourceRegister: 1, SetName: "service-ips", SetID: 7},
		&expr.Lookup{SourceRegister: 1, DestRegister: 0, IsDestRegSet: true, SetName: "m", SetID: 1},
		&expr.Lookup{SourceRegister: 1, Invert: true, SetName: "no-endpoints", SetID: 2},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV6, RegAddrMin: 1, RegAddrMax: 2, RegProtoMin: 3, RegProtoMax: 4, Specified: true, Random: true},
		&expr.NAT{Type: expr.NATTypeSourceNAT, Family: unix.NFPROTO_IPV4, FullyRandom: true, Persistent: true, Prefix: true},
		&expr.Masq{},
		&expr.Masq{FullyRandom: true},
		&expr.Masq{Random: true, Persistent: true},
		&expr.Masq{ToPorts: true, RegProtoMin: 1},
		&expr.Masq{ToPorts: true, RegProtoMin: 1, RegProtoMax: 2},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{0xff, 0xff, 0xbf, 0xff}, Xor: []byte{0, 0, 0, 0}},
		&expr.Numgen{Register: 1, Modulus: 3, Type: unix.NFT_NG_RANDOM},
		&expr.Numgen{Register: 1, Modulus: 16, Type: unix.NFT_NG_INCREMENTAL, Offset: 1},
		&expr.Objref{Type: 1, Name: "KUBE-SVC-COUNTER"},
		&expr.Counter{},
		&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_PORT_UNREACH},
	}
	for i, e := range variants {
		checkExpr(t, fmt.Sprint("variant ", i), unix.NFPROTO_IPV4, e)
	}
	for _, fam := range []nftgen.Family{nftgen.FamilyIPv4, nftgen.FamilyIPv6} {
		g := featureGenerator(t)
		if fam == nftgen.FamilyIPv6 {
			g = testGenerator6(t)
		}
		rs := g.Ruleset(nftgentest.FeaturePortsOf(fam == nftgen.FamilyIPv6))
		b := &exprBuilder{family: fam, addAnon: func(anonVmap) (string, uint32) { return "__map1", 1 }}
		proto := byte(unix.NFPROTO_IPV4)
		if fam == nftgen.FamilyIPv6 {
			proto = unix.NFPROTO_IPV6
		}
		n := 0
		for _, c := range rs.Chains() {
			for i := range c.Rules {
				es, err := b.ruleExprs(&c.Rules[i])
				if err != nil {
					t.Fatalf("%s: %v", c.Name, err)
				}
				for _, e := range es {
					checkExpr(t, fmt.Sprintf("%s %s rule %d", fam, c.Name, i), proto, e)
					n++
				}
			}
		}
		if n < 100 {
			t.Errorf("%s: only %d expressions compared", fam, n)
		}
	}
}
