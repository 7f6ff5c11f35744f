//go:build linux

package kernel

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	"github.com/nftproxy/nftproxy/e2e/testns"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// TestHandoverIPv6: the handover of an IPv6 table keys its DNAT map by
// "ip6 daddr . l4proto . dport . bucket" and maps to "address . port" (the
// registers of a 16-byte address differ from IPv4's); nft decodes the
// rules back to that, and `nft list ruleset` (which an operator runs) works.
func TestHandoverIPv6(t *testing.T) {
	testns.RequireRoot(t)
	ns, dp := kernelNetlink(t, "nfp-hand6")
	ctx := context.Background()
	g := testGenerator6(t)
	sp := nftgentest.Port("ns", "web", 80, "fd00:96::7", "[fd00:244::3]:8080", "[fd00:244::4]:8080")
	sp.NodePort = 30080
	if err := dp.Apply(ctx, nftgen.PlanFull(g.Ruleset([]svcmodel.ServicePortState{sp}), nil)); err != nil {
		t.Fatal(err)
	}
	spec := nftgen.NewHandoverSpec(g, time.Minute)
	spec.Add(g.Service(&sp))
	n, err := dp.WriteHandover(ctx, nftgen.FamilyIPv6, spec)
	if err != nil || n != 2 {
		t.Fatalf("WriteHandover: %d destinations, %v; want the cluster IP and the node port", n, err)
	}
	out := ns.MustRun(t, "nft", "list", "ruleset")
	for _, want := range []string{
		"dnat ip6 to ip6 daddr . meta l4proto . th dport . numgen random mod 16 map @dnat-ips",
		"dnat ip6 to meta l4proto . th dport . numgen random mod 16 map @dnat-nodeports",
		"fd00:96::7 . tcp . 80 . 0x0000000f expires",
		": fd00:244::4 . 8080",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the handover lacks %q:\n%s", want, out)
		}
	}
	if err := dp.DeleteHandover(ctx, nftgen.FamilyIPv6); err != nil {
		t.Fatal(err)
	}
	if out := ns.MustRun(t, "nft", "list", "tables"); strings.Contains(out, nftgen.HandoverTableName) {
		t.Errorf("the handover is still there: %s", out)
	}
}

// TestHandoverIsTheGeneratorsTable: the handover the kernel holds, read
// back and decoded, is the generator's table (nftgen.HandoverSpec.Table),
// rule for rule, in both families, with and without restricted node port
// addresses: the writer adds nothing of its own.
func TestHandoverIsTheGeneratorsTable(t *testing.T) {
	testns.RequireRoot(t)
	for _, fam := range []nftgen.Family{nftgen.FamilyIPv4, nftgen.FamilyIPv6} {
		_, dp := kernelNetlink(t, "nfp-hgen"+string(fam))
		ctx := context.Background()
		g := testGenerator6(t)
		sp := nftgentest.Port("ns", "web", 80, "fd00:96::7", "[fd00:244::3]:8080")
		if fam == nftgen.FamilyIPv4 {
			g = mustGenerator(t, nftgen.Config{Family: fam, NodePortAddresses: []netip.Addr{netip.MustParseAddr("192.0.2.1")}, RestrictNodePorts: true})
			sp = nftgentest.Port("ns", "web", 80, "10.96.0.7", "10.244.0.3:8080")
		}
		sp.NodePort = 30080
		if err := dp.Apply(ctx, nftgen.PlanFull(g.Ruleset([]svcmodel.ServicePortState{sp}), nil)); err != nil {
			t.Fatal(err)
		}
		spec := nftgen.NewHandoverSpec(g, time.Minute)
		spec.Add(g.Service(&sp))
		if _, err := dp.WriteHandover(ctx, fam, spec); err != nil {
			t.Fatal(err)
		}
		want := spec.Table(fam)
		var roots []string
		for _, c := range want.Chains {
			roots = append(roots, c.Name)
		}
		got, _, err := dp.readTable(fam, nftgen.HandoverTableName, roots, readOptions{})
		if err != nil || got == nil {
			t.Fatalf("%s: read the handover: %v", fam, err)
		}
		for _, c := range want.Chains {
			if g := got.Chain(c.Name); g == nil || !g.Equal(c) {
				t.Errorf("%s: chain %s in the kernel:\n%v\nwant:\n%s", fam, c.Name, g, c.Text(fam))
			}
		}
		if len(got.Chains) != len(want.Chains) {
			t.Errorf("%s: %d chains in the kernel, want %d", fam, len(got.Chains), len(want.Chains))
		}
	}
}
