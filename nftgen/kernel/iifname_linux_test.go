//go:build linux

package kernel

import (
	"context"
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	"github.com/nftproxy/nftproxy/e2e/testns"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// TestPodInterfaceReadsBack: the detect-local interface matches
// (BridgeInterface: a whole name; InterfaceNamePrefix: a prefix) are what
// nft shows and what Read decodes, so the compat view and reconcile see
// the rules the generator wrote.
func TestPodInterfaceReadsBack(t *testing.T) {
	testns.RequireRoot(t)
	ctx := context.Background()
	for _, tt := range []struct {
		prefix bool
		nft    string
	}{{false, `iifname != "cbr0"`}, {true, `iifname != "veth*"`}} {
		name := map[bool]string{false: "cbr0", true: "veth"}[tt.prefix]
		g := mustGenerator(t, nftgen.Config{Family: nftgen.FamilyIPv4, Node: svcmodel.Node{Name: "node-a"}, PodInterface: name, PodInterfacePrefix: tt.prefix})
		sp := nftgentest.Port("ns", "web", 80, "10.96.0.7", "10.244.0.3:8080")
		rs := g.Ruleset([]svcmodel.ServicePortState{sp})
		ns, dp := kernelNetlink(t, "nfp-iif")
		if err := dp.Apply(ctx, nftgen.PlanFull(rs, nil)); err != nil {
			t.Fatal(err)
		}
		if out := ns.MustRun(t, "nft", "list", "table", "ip", nftgen.TableName); !strings.Contains(out, tt.nft) {
			t.Errorf("nft does not show %s:\n%s", tt.nft, out)
		}
		got, err := dp.Read(ctx, nftgen.FamilyIPv4)
		if err != nil {
			t.Fatal(err)
		}
		svc := nftgen.ServiceChainName(sp.Name)
		if gc, wc := got.Chain(svc), rs.State().Chain(svc); gc == nil || !gc.Equal(wc) {
			t.Errorf("%s read back as:\n%v\nwant:\n%s", svc, gc, wc.Text(nftgen.FamilyIPv4))
		}
	}
}
