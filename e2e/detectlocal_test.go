//go:build linux

package e2e

import (
	"github.com/nftproxy/nftproxy/e2e/harness"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen"
)

// TestDetectLocalByInterfacePrefix: with --detect-local-mode
// InterfaceNamePrefix (pods' interfaces on the node are vp*, and no
// cluster CIDR), a pod's connection to a cluster IP keeps its source, and
// the node's and an outside host's are masqueraded, as with ClusterCIDR;
// the hairpin pod sees the node, as always.
func TestDetectLocalByInterfacePrefix(t *testing.T) {
	c := newCluster(t, func(cfg *nftgen.Config) {
		cfg.ClusterCIDRs, cfg.PodInterface, cfg.PodInterfacePrefix = nil, "vp", true
	})
	a := c.AddPod("a", harness.PodIP(1), []int{8080}, nil)
	b := c.AddPod("b", harness.PodIP(2), []int{8080}, nil)
	c.store.SetService(harness.ClusterIPService("demo", "only-a", "10.96.0.11", httpPort))
	c.store.SetEndpointSlice(harness.Slice("demo", "only-a", "only-a-1", []harness.PortSpec{httpPort}, a.IP.String()))
	c.sync()
	checkSources(t, "10.96.0.11:80", "a", []sourceCase{
		{"hairpin pod", a.NS, harness.NodePodSideIP},
		{"other pod (in on vp*)", b.NS, b.IP.String()},
		{"node", c.Node, harness.NodePodSideIP},
		{"external host (not in on vp*)", c.External, harness.NodePodSideIP},
	})
}
