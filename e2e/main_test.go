//go:build linux

package e2e

import (
	"context"
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/kernel"
	"github.com/nftproxy/nftproxy/proxier"
	"github.com/nftproxy/nftproxy/proxier/healthcheck"
	"github.com/nftproxy/nftproxy/proxier/host/conntrack"
	pnetns "github.com/nftproxy/nftproxy/proxier/host/netns"
	"github.com/nftproxy/nftproxy/proxier/model"
	"github.com/nftproxy/nftproxy/proxier/pipeline"
	"github.com/nftproxy/nftproxy/proxier/runner"
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
		if echoBinary, err = harness.BuildBinary(dir, "github.com/nftproxy/nftproxy/e2e/tools/echoserver"); err != nil {
			fmt.Println(err)
			return 1
		}
		if nftproxyBinary, err = harness.BuildBinary(dir, "github.com/nftproxy/nftproxy/cmd/nftproxy"); err != nil {
			fmt.Println(err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// cluster is a topology with an in-process nftproxy programming its node
// ("node-a" in zone "zone-a", dual-stack), including health check node
// ports and UDP conntrack cleanup.
type cluster struct {
	*harness.Topology
	store  *model.Store
	engine *proxier.Engine
	// conntrack is the engine's cleanup of stale UDP flows, which a test
	// may switch off.
	conntrack *switchedCleaner
	// dp is the netlink dataplane of the node namespace.
	dp *kernel.Netlink
	t  testing.TB
}

// clusterOption changes a generator configuration before it is built.
type clusterOption func(*nftgen.Config)

func newCluster(t testing.TB, opts ...clusterOption) *cluster {
	tp := harness.NewTopology(t, echoBinary)
	dp, f, err := kernel.NewNetlinkInNamespace(tp.Node.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close(); f.Close() })
	node := svcmodel.Node{Name: harness.LocalNode, Labels: map[string]string{v1.LabelTopologyZone: harness.LocalZone}}
	var families []nftgen.Config
	for _, fam := range []nftgen.Family{nftgen.FamilyIPv4, nftgen.FamilyIPv6} {
		cfg := nftgen.Config{Family: fam, Node: node}
		if fam == nftgen.FamilyIPv4 {
			cfg.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix(harness.ClusterCIDR)}
			cfg.NodeIPs = []netip.Addr{netip.MustParseAddr(harness.NodeIP)}
			cfg.LocalhostNodePorts = true
		} else {
			cfg.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix(harness.ClusterCIDR6)}
			cfg.NodeIPs = []netip.Addr{netip.MustParseAddr(harness.NodeIP6)}
		}
		for _, o := range opts {
			o(&cfg)
		}
		families = append(families, cfg)
	}
	if err := pnetns.Do(tp.Node.Path(), proxier.EnableRouteLocalnet); err != nil {
		t.Fatal(err)
	}
	health := healthcheck.NewServiceServer(func(addr string) (l net.Listener, err error) {
		err = tp.Node.Do(func() error { l, err = net.Listen("tcp", addr); return err })
		return l, err
	}, nil)
	t.Cleanup(func() { health.Close(context.Background()) })
	store, cleaner := model.NewStore(), &switchedCleaner{inner: conntrack.NewCleaner(int(f.Fd()))}
	engine, err := proxier.New(proxier.Config{Families: families, Node: node, Store: store, Health: health, Conntrack: cleaner,
		Engine: proxier.EngineConfig{OnProblem: func(p model.Problem) { t.Errorf("unexpected problem: %v", p) }}}, dp)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{Topology: tp, store: store, engine: engine, conntrack: cleaner, dp: dp, t: t}
}

// switchedCleaner is a conntrack cleaner a test can switch off.
type switchedCleaner struct {
	inner *conntrack.Cleaner
	off   bool
}

// Clean implements proxier.ConntrackCleaner: it deletes nothing while off.
func (c *switchedCleaner) Clean(services []conntrack.UDPService) (int, error) {
	if c.off {
		return 0, nil
	}
	return c.inner.Clean(services)
}

// sync programs the node and fails the test on error.
func (c *cluster) sync() pipeline.Result {
	c.t.Helper()
	res, err := c.engine.Sync(context.Background(), runner.Requested)
	if err != nil {
		c.t.Fatalf("sync: %v", err)
	}
	return res
}
