//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier"
	"github.com/nftproxy/nftproxy/proxier/model"
)

// Binaries built once for all tests.
var (
	echoBinary     string
	nftproxyBinary string
)

func TestMain(m *testing.M) {
	code := func() int {
		if os.Geteuid() != 0 {
			fmt.Println("e2e: not root; every e2e test will be skipped (CI runs them as root)")
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "nftproxy-e2e-")
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer os.RemoveAll(dir)
		if echoBinary, err = BuildBinary(dir, "github.com/nftproxy/nftproxy/e2e/echoserver"); err != nil {
			fmt.Println(err)
			return 1
		}
		if nftproxyBinary, err = BuildBinary(dir, "github.com/nftproxy/nftproxy/cmd/nftproxy"); err != nil {
			fmt.Println(err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// cluster is a topology with an in-process nftproxy programming its node.
type cluster struct {
	*Topology
	store  *model.Store
	syncer *proxier.Syncer
	dp     *nftgen.Netlink
	t      testing.TB
}

func newCluster(t testing.TB) *cluster {
	tp := NewTopology(t, echoBinary)
	dp, f, err := nftgen.NewNetlinkInNamespace(tp.Node.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	gen, err := nftgen.NewGenerator(nftgen.Config{
		Family:        nftgen.FamilyIPv4,
		ClusterCIDRs:  []netip.Prefix{netip.MustParsePrefix(ClusterCIDR)},
		MasqueradeBit: nftgen.DefaultMasqueradeBit,
	})
	if err != nil {
		t.Fatal(err)
	}
	store := model.NewStore()
	s := proxier.NewSyncer(store, dp, gen)
	s.OnProblem = func(p model.Problem) { t.Errorf("unexpected problem: %v", p) }
	return &cluster{Topology: tp, store: store, syncer: s, dp: dp, t: t}
}

// sync programs the node and fails the test on error.
func (c *cluster) sync() proxier.SyncResult {
	c.t.Helper()
	res, err := c.syncer.Sync(context.Background())
	if err != nil {
		c.t.Fatalf("sync: %v", err)
	}
	return res
}
