package compat

import (
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen"
)

// TestEveryStmtKindRenders: each kind of nftgen.StmtKinds, in a rule of a
// Service chain, is rendered by its own case, never by the view's
// fallback for a statement it does not know; Unknown is reported as a
// foreign expression.
func TestEveryStmtKindRenders(t *testing.T) {
	for _, s := range nftgen.StmtKinds() {
		chain := &nftgen.Chain{Name: "KUBE-SVC-AAAAAAAAAAAAAAAA", Rules: []nftgen.Rule{nftgen.NewRule("ns/a:p", s)}}
		st := &nftgen.TableState{Family: nftgen.FamilyIPv4, Chains: []*nftgen.Chain{chain},
			Sets: []nftgen.SetSpec{{Name: nftgen.PrefixAffinity + "KUBE-SEP-AAAAAAAAAAAAAAAA", TimeoutSeconds: 10800}}}
		var notes []string
		lines := 0
		for _, tbl := range Build(st) {
			notes = append(notes, tbl.Notes...)
			lines += tbl.RuleCount()
		}
		all := strings.Join(notes, "\n")
		if strings.Contains(all, "with statement") {
			t.Errorf("%T reached the fallback: %s", s, all)
		}
		_, unknown := s.(nftgen.Unknown)
		if unknown != strings.Contains(all, "did not write") {
			t.Errorf("%T: notes %q", s, all)
		}
		t.Logf("%T: %d lines", s, lines)
	}
}
