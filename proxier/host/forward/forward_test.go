package forward

import (
	"bytes"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen"
)

// TestRulesOfTranslatesTheGeneratorsAccepts: the generator's KUBE-FORWARD
// accepts become a mark match with the masquerade bit and a conntrack
// match of RELATED,ESTABLISHED (xt state bits 2|4, as iptables writes
// them), in order and with their comments; a rule with a statement
// iptables' writers cannot express is refused, not written in part.
func TestRulesOfTranslatesTheGeneratorsAccepts(t *testing.T) {
	got, err := rulesOf(nftgen.ForwardRules(1 << 14))
	if err != nil {
		t.Fatal(err)
	}
	want := []rule{{comment: "kubernetes forwarding rules", mark: 1 << 14}, {comment: "kubernetes forwarding conntrack rule", ctState: 2 | 4}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("rulesOf = %+v, want %+v", got, want)
	}
	info := conntrackInfo(got[1].ctState)
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
		if _, err := rulesOf([]nftgen.Rule{bad}); err == nil {
			t.Errorf("rulesOf accepted %v", bad.Stmts)
		}
	}
}
