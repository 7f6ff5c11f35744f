package proxier

import (
	"net/netip"
	"os"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// NodeWatch makes the engine end the process, as kube-proxy's node
// manager does, when this node's Node changes what kube-proxy reads only
// at start: its node IPs, or (PodCIDRs, --detect-local-mode NodeCIDR) its
// pod CIDRs, or when the Node is deleted. The DaemonSet then starts a new
// process with the new values.
type NodeWatch struct {
	// PodCIDRs also watches spec.podCIDRs.
	PodCIDRs bool
	// Exit ends the process; os.Exit when nil.
	Exit func(code int)
}

// nodeStart is what the engine started with, for NodeWatch.
type nodeStart struct {
	ips      []netip.Addr
	podCIDRs []string
}

func startOf(node *v1.Node) nodeStart {
	if node == nil {
		return nodeStart{}
	}
	return nodeStart{ips: PrimaryNodeIPs(node, netip.Addr{}), podCIDRs: node.Spec.PodCIDRs}
}

// watchNode ends the process when node (nil: deleted) differs from the
// start in what w watches.
func (e *Engine) watchNode(node *v1.Node) {
	w := e.cfg.NodeWatch
	if w == nil {
		return
	}
	exit := w.Exit
	if exit == nil {
		exit = os.Exit
	}
	now := startOf(node)
	switch {
	case node == nil:
		klog.InfoS("Node is being deleted", "node", e.after.node.Name)
	case w.PodCIDRs && !slices.Equal(now.podCIDRs, e.start.podCIDRs):
		klog.InfoS("PodCIDRs changed for the node", "node", klog.KObj(node), "newPodCIDRs", now.podCIDRs, "oldPodCIDRs", e.start.podCIDRs)
	case !slices.Equal(now.ips, e.start.ips):
		klog.InfoS("NodeIPs changed for the node", "node", klog.KObj(node), "newNodeIPs", now.ips, "oldNodeIPs", e.start.ips)
	default:
		return
	}
	klog.Flush()
	exit(1)
}
