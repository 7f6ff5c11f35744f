package nftgen

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// TestAffinityRecordIsNeverPartOfTheDNAT: in both families and both
// affinity layouts (a set per endpoint, one per Service port above the
// cascade), the rule that records a client is its own rule, right before
// the DNAT: an update of a full set fails its rule, and the DNAT must not
// fail with it. It stands for no rule of the compat view.
func TestAffinityRecordIsNeverPartOfTheDNAT(t *testing.T) {
	for _, fam := range []Family{FamilyIPv4, FamilyIPv6} {
		g, err := NewGenerator(Config{Family: fam})
		if err != nil {
			t.Fatal(err)
		}
		vip, ep := "10.96.0.1", "10.244.0.%d:80"
		if fam == FamilyIPv6 {
			vip, ep = "fd00::1", "[fd00::a:%d]:80"
		}
		for _, n := range []int{2, CascadeMaxEndpoints + 1} {
			var eps []string
			for i := range n {
				eps = append(eps, fmt.Sprintf(ep, i+1))
			}
			sp := nftgentest.Port("ns", "aff", 80, vip, eps...)
			sp.AffinityTimeoutSeconds = 60
			f := g.Service(&sp)
			records, seps := 0, 0
			for _, ch := range f.Chains {
				for i, r := range ch.Rules {
					_, record := AffinityRecord(r)
					for _, s := range r.Stmts {
						if _, ok := s.(AffinityUpdate); ok && !record {
							t.Fatalf("%s, %d endpoints: chain %s rule %d updates a set and does more: %s", fam, n, ch.Name, i, r.Text(fam))
						}
					}
					if !record {
						continue
					}
					records++
					if i+1 >= len(ch.Rules) || !hasDNAT(ch.Rules[i+1]) {
						t.Fatalf("%s: chain %s: the record rule is not followed by the DNAT", fam, ch.Name)
					}
					if ruleCount(r) != 0 {
						t.Errorf("a record rule counts %d compat rules, want 0", ruleCount(r))
					}
				}
				if strings.HasPrefix(ch.Name, "KUBE-SEP-") {
					seps++
				}
			}
			if records != n || seps != n {
				t.Errorf("%s, %d endpoints: %d record rules in %d endpoint chains", fam, n, records, seps)
			}
		}
	}
}

func hasDNAT(r Rule) bool {
	for _, s := range r.Stmts {
		if _, ok := s.(DNAT); ok {
			return true
		}
	}
	return false
}
