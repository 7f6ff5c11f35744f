package forward

import (
	"bytes"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen"
)

// TestRulesOfTranslatesTheGeneratorsAccepts: the generator's forwarding
// rules become FORWARD's jump with its comment and KUBE-FORWARD's accepts,
// a mark match with the masquerade bit and a conntrack match of
// RELATED,ESTABLISHED (xt state bits 2|4, as iptables writes them), in
// order and with their comments; a rule with a statement iptables'
// writers cannot express, or a jump elsewhere, is refused, not written in
// part.
func TestRulesOfTranslatesTheGeneratorsAccepts(t *testing.T) {
	hf := nftgen.NewHostForward(1 << 14)
	got, err := rulesOf(hf)
	if err != nil {
		t.Fatal(err)
	}
	want := []rule{{comment: "kubernetes forwarding rules", mark: 1 << 14}, {comment: "kubernetes forwarding conntrack rule", ctState: 2 | 4}}
	if got.jumpComment != "kubernetes forwarding rules" || len(got.accepts) != len(want) || got.accepts[0] != want[0] || got.accepts[1] != want[1] {
		t.Fatalf("rulesOf = %+v, want the jump's comment and %+v", got, want)
	}
	info := conntrackInfo(got.accepts[1].ctState)
	if !bytes.Equal(info[150:152], []byte{6, 0}) && !bytes.Equal(info[150:152], []byte{0, 6}) {
		t.Errorf("conntrack state mask bytes %v, want RELATED|ESTABLISHED (6)", info[150:152])
	}
	for _, bad := range []nftgen.Rule{
		nftgen.NewRule("x", nftgen.MatchDport{Port: 80}, nftgen.Verdict{Kind: nftgen.VerdictAccept}),
		nftgen.NewRule("x", nftgen.MatchMark{Mask: 1, Zero: true}, nftgen.Verdict{Kind: nftgen.VerdictAccept}),
		nftgen.NewRule("x", nftgen.MatchMark{Mask: 1}, nftgen.Verdict{Kind: nftgen.VerdictDrop}),
		nftgen.NewRule("x", nftgen.MatchMark{Mask: 1}, nftgen.MatchCtState{Mask: 2}, nftgen.Verdict{Kind: nftgen.VerdictAccept}),
		nftgen.NewRule("x"),
	} {
		if _, err := rulesOf(nftgen.HostForward{Jump: hf.Jump, Accepts: []nftgen.Rule{bad}}); err == nil {
			t.Errorf("rulesOf accepted %v", bad.Stmts)
		}
	}
	for _, jump := range []nftgen.Rule{nftgen.ForwardJump("OTHER"), nftgen.NewRule("x"), hf.Accepts[0]} {
		if _, err := rulesOf(nftgen.HostForward{Jump: jump, Accepts: hf.Accepts}); err == nil {
			t.Errorf("rulesOf accepted the jump %v", jump.Stmts)
		}
	}
}
