package explain

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen"
)

// TestEveryStmtKindIsWalked: each kind of nftgen.StmtKinds, in a rule put
// first in KUBE-SERVICES, is walked by its own case, never by the walker's
// fallback for a statement it does not know; Unknown stops the walk as a
// foreign expression.
func TestEveryStmtKindIsWalked(t *testing.T) {
	for _, s := range nftgen.StmtKinds() {
		st := table(t)
		c := st.Chain(nftgen.ChainServices)
		if c == nil {
			t.Fatal("no KUBE-SERVICES")
		}
		c.Rules = slices.Insert(c.Rules, 0, nftgen.NewRule("", s))
		out, err := json.Marshal(explain(st, FromPod, "10.244.0.9", "10.96.0.10:80"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "statement nftgen.") {
			t.Errorf("%T reached the walker's fallback: %s", s, out)
		}
		if _, unknown := s.(nftgen.Unknown); unknown != strings.Contains(string(out), "did not write") {
			t.Errorf("%T: %s", s, out)
		}
	}
}
