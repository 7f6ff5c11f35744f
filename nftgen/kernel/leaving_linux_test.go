//go:build linux

package kernel

import (
	"context"
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/compat"
	"github.com/nftproxy/nftproxy/e2e/testns"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// TestLeavingReadStreamsTheWholeView: a leaving read of the single table
// and of eight shard tables, in both families, holds no Service chain's
// rules, names each Service chain with its table, and the view streamed
// from it is the text the whole read renders. A Service deleted between
// the read and the stream leaves its chains without rules, not an error.
func TestLeavingReadStreamsTheWholeView(t *testing.T) {
	testns.RequireRoot(t)
	ctx := context.Background()
	for _, fam := range []nftgen.Family{nftgen.FamilyIPv4, nftgen.FamilyIPv6} {
		g, ports := shardedGenerator(t, fam)
		rs := g.Ruleset(ports)
		for _, shards := range []int{1, 8} {
			_, dp := kernelNetlink(t, "nfp-lv")
			holding := map[string]bool{nftgen.TableName: true} // the tables that hold Service chains
			if shards == 1 {
				if err := dp.Apply(ctx, nftgen.PlanFull(rs, nil)); err != nil {
					t.Fatal(err)
				}
			} else {
				layout := nftgen.TableLayout{Shards: shards, Named: 2}
				parts := nftgen.SplitRuleset(rs, layout, g.ShardTops(layout), g.ShardMaps())
				if err := dp.Apply(ctx, nftgen.PlanFullSharded(parts, nil, nil)); err != nil {
					t.Fatal(err)
				}
				holding = map[string]bool{}
				for i := 1; i < len(parts); i++ {
					for _, f := range parts[i].Services {
						holding[nftgen.ShardTable(i)] = holding[nftgen.ShardTable(i)] || len(f.Chains) > 0
					}
				}
			}
			want := compatText(t, dp, fam)
			st, rest, err := dp.ReadLeaving(ctx, fam)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range st.Chains {
				if nftgen.IsServiceChain(c.Name) {
					t.Errorf("%s, %d tables: Service chain %s was kept with its rules", fam, shards, c.Name)
				}
			}
			// The single table holds every Service chain; the shard
			// tables that got Services hold them all otherwise.
			tables := map[string]bool{}
			for _, ref := range st.Unread {
				tables[ref.Table] = true
				if (shards == 1) != (ref.Table == nftgen.TableName) {
					t.Errorf("%s, %d tables: unread chain %s is named in table %s", fam, shards, ref.Chain, ref.Table)
				}
			}
			for table, held := range holding {
				if held != tables[table] {
					t.Errorf("%s, %d tables: the unread chains name the tables %v, want those that hold Service chains %v", fam, shards, tables, holding)
				}
			}
			var got strings.Builder
			if err := compat.Stream(ctx, &got, st, rest, compat.Options{}); err != nil {
				t.Fatal(err)
			}
			if got.String() != want {
				t.Errorf("%s, %d tables: the streamed view differs from the whole read's:\n%s", fam, shards, nftgentest.LineDiff(want, got.String()))
			}

			// One Service deleted after the read.
			applied := nftgen.AppliedFrom(rs)
			if shards > 1 {
				applied.Layout = nftgen.TableLayout{Shards: shards}
			}
			gone := nftgen.ServiceKey(ports[len(ports)-1].Name)
			u := applied.PlanUpdate(map[string]*nftgen.Fragment{gone: nil})
			if err := dp.Apply(ctx, u.Tx); err != nil {
				t.Fatal(err)
			}
			rules, err := rest(ctx, st.Unread)
			if err != nil {
				t.Fatalf("%s, %d tables: reading the unread chains after a deletion: %v", fam, shards, err)
			}
			empty := 0
			for i := range rules {
				if len(rules[i]) == 0 {
					empty++
				}
			}
			if empty == 0 || empty == len(rules) {
				t.Errorf("%s, %d tables: %d of %d unread chains have no rules after one Service was deleted", fam, shards, empty, len(rules))
			}
		}
	}
}
