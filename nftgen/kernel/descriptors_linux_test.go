//go:build linux

package kernel

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/e2e/testns"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// TestNetlinkAtAnyDescriptorNumber holds 2,000 descriptors open, as a node
// with many health check listeners or a pod's keep-alive connections
// would, and then uses every call of the dataplane several times, its
// sockets closed in between so that each is dialled again. Without the
// reserve of low descriptors, the library's pselect on a socket numbered
// above 1,023 panics the process.
func TestNetlinkAtAnyDescriptorNumber(t *testing.T) {
	testns.RequireRoot(t)
	ns, dp := kernelNetlink(t, "nfp-fds")
	var held []int
	t.Cleanup(func() {
		for _, fd := range held {
			unix.Close(fd)
		}
	})
	for range 2000 {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("open descriptor %d: %v", len(held), err)
		}
		held = append(held, fd)
	}
	if top := held[len(held)-1]; top < 2000 {
		t.Fatalf("the highest descriptor held is %d, want at least 2000", top)
	}
	ctx := context.Background()
	rs := testGenerator("10.244.0.0/16").Ruleset(nftgentest.ManyPorts(3))
	changes, err := dp.Watch(ctx)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	for round := range 12 {
		if err := dp.Apply(ctx, nftgen.PlanFull(rs, nil)); err != nil {
			t.Fatalf("round %d: Apply: %v", round, err)
		}
		st, err := dp.Read(ctx, nftgen.FamilyIPv4)
		if err != nil || st == nil || len(st.Chains) == 0 {
			t.Fatalf("round %d: Read: %v, %v", round, st, err)
		}
		if _, err := dp.Inventory(ctx, nftgen.FamilyIPv4, nil); err != nil {
			t.Fatalf("round %d: Inventory: %v", round, err)
		}
		if _, err := dp.ElementCounts(ctx, nftgen.FamilyIPv4); err != nil {
			t.Fatalf("round %d: ElementCounts: %v", round, err)
		}
		if _, err := dp.Counters(ctx, nftgen.FamilyIPv4); err != nil {
			t.Fatalf("round %d: Counters: %v", round, err)
		}
		if err := dp.DeleteTable(ctx, nftgen.FamilyIPv4); err != nil {
			t.Fatalf("round %d: DeleteTable: %v", round, err)
		}
		dp.Close() // the next round dials every socket again
	}
	if err := dp.Apply(ctx, nftgen.PlanFull(rs, nil)); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	ns.MustRun(t, "nft", "add", "chain", "ip", nftgen.TableName, "foreign")
	select {
	case <-changes: // the watch's socket, dialled with 2,000 descriptors open, reports
	case <-time.After(5 * time.Second):
		t.Error("the watch reported none of the commits")
	}
}
