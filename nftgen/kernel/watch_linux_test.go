//go:build linux

package kernel

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/e2e/testns"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// TestWatchIgnoresOtherTables: 100 element commits to another program's
// inet set (fail2ban's shape) and a rule in its own table are not reported
// at all (they used to be, and each made the engine dump all its maps); an
// element added to nftproxy's service map by another process is reported,
// as elements only, with the map's name.
func TestWatchIgnoresOtherTables(t *testing.T) {
	testns.RequireRoot(t)
	ns, dp := kernelNetlink(t, "nfp-watchf")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes, err := dp.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rs := testGenerator("10.244.0.0/16").Ruleset(nftgentest.ManyPorts(3))
	if err := dp.Apply(ctx, nftgen.PlanFull(rs, nil)); err != nil {
		t.Fatal(err)
	}
	ns.MustRun(t, "nft", "add table inet f2b; add set inet f2b banned { type ipv4_addr; }; add chain inet f2b input; add rule inet f2b input ip saddr @banned drop")
	var batch strings.Builder
	for i := range 100 {
		fmt.Fprintf(&batch, "add element inet f2b banned { 198.51.100.%d }\n", i+1)
	}
	for _, line := range strings.Split(strings.TrimSpace(batch.String()), "\n") {
		ns.MustRun(t, "nft", line)
	}
	ns.MustRun(t, "nft", "add", "element", "ip", nftgen.TableName, nftgen.MapServiceIPs, "{ 10.96.99.1 . tcp . 80 : goto reject-chain }")
	select {
	case ch := <-changes:
		if ch.Ours || ch.Lost || !strings.Contains(ch.What, nftgen.MapServiceIPs) || !strings.HasPrefix(ch.Process, "nft[") {
			t.Errorf("first change reported = %+v, want the elements of %s changed by nft (the other table's 101 commits unreported)", ch, nftgen.MapServiceIPs)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the element added to nftproxy's map was not reported")
	}
}
