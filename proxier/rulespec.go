package proxier

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"

	"github.com/nftproxy/nftproxy/nftgen"
)

// RuleSpec is what the operator's configuration says about the rules,
// whatever the node: from it, the Node object and the node's local
// addresses, Build makes one generator per family. The daemon fills it
// from kube-proxy's flags once; the engine builds again from it when the
// node's zone or node port addresses change.
type RuleSpec struct {
	// NodeName is this node's name (--hostname-override or the host's).
	NodeName string
	// ClusterCIDRs are --cluster-cidr's prefixes, by family.
	ClusterCIDRs map[nftgen.Family][]netip.Prefix
	// NodeCIDRs is --detect-local-mode NodeCIDR: the Node's pod CIDRs
	// replace ClusterCIDRs.
	NodeCIDRs bool
	// PodInterface tells pod traffic by interface instead of by address
	// (BridgeInterface; a prefix with PodInterfacePrefix).
	PodInterface       string
	PodInterfacePrefix bool
	MasqueradeAll      bool
	MasqueradeBit      int
	LocalhostNodePorts bool
	// ConntrackTCPLiberal: the host accepts out-of-window TCP packets, so
	// invalid ones are not dropped.
	ConntrackTCPLiberal bool
	// NodePortAddresses is --nodeport-addresses as given.
	NodePortAddresses []string
	// BindAddress is --bind-address (a primary node IP when the Node
	// object has none).
	BindAddress netip.Addr
	// IPv6 programs the IPv6 table even without an IPv6 cluster CIDR or
	// node IP (an IPv6 Service was seen, or every family is wanted).
	IPv6 bool
}

// NodeRules is what RuleSpec.Build made for one node.
type NodeRules struct {
	Generators []*nftgen.Generator
	// Node is the node as the model sees it: name and labels.
	Node svcmodel.Node
	// NodeAddrs are the node's addresses: its Node object's and its
	// primary IPs (for the external IP check).
	NodeAddrs []netip.Addr
	// RouteLocalnet is true when localhost node ports need route_localnet.
	RouteLocalnet bool
}

// Families are the generators' configurations (Config.Families).
func (r *NodeRules) Families() []nftgen.Config {
	out := make([]nftgen.Config, len(r.Generators))
	for i, g := range r.Generators {
		out[i] = g.Config()
	}
	return out
}

// HealthCheckAddresses are the addresses the health check node ports
// listen on: the node port addresses when --nodeport-addresses restricts
// them (as kube-proxy), otherwise every address (nil).
func (r *NodeRules) HealthCheckAddresses() []netip.Addr {
	if !slices.ContainsFunc(r.Generators, func(g *nftgen.Generator) bool { return g.Config().RestrictNodePorts }) {
		return nil
	}
	return nodePortAddresses(r.Generators)
}

// FollowsAddresses reports whether --nodeport-addresses limits node ports
// to some of the node's addresses, which are then looked up again before
// every sync, as kube-proxy does.
func (s *RuleSpec) FollowsAddresses() bool {
	for _, a := range s.NodePortAddresses {
		if a != "" && a != "all" && a != "0.0.0.0/0" && a != "::/0" {
			return true
		}
	}
	return false
}

// Build makes the generators for the node whose Node object is node (nil
// if unknown) and whose local addresses are local.
func (s *RuleSpec) Build(node *v1.Node, local []netip.Addr) (*NodeRules, error) {
	r := &NodeRules{Node: svcmodel.Node{Name: s.NodeName}}
	byFamily := s.ClusterCIDRs
	primary := PrimaryNodeIPs(node, s.BindAddress)
	if node != nil {
		r.Node.Labels = node.Labels
		r.NodeAddrs = NodeIPs(node)
		if s.NodeCIDRs {
			byFamily = map[nftgen.Family][]netip.Prefix{}
			for _, c := range node.Spec.PodCIDRs {
				if p, err := netip.ParsePrefix(c); err == nil {
					f := familyOf(p.Addr())
					byFamily[f] = append(byFamily[f], p.Masked())
				}
			}
		}
	}
	if s.PodInterface != "" {
		byFamily = nil
	}
	r.NodeAddrs = append(r.NodeAddrs, primary...)
	families := []nftgen.Family{nftgen.FamilyIPv4}
	if len(byFamily[nftgen.FamilyIPv6]) > 0 || s.IPv6 || slices.ContainsFunc(primary, func(a netip.Addr) bool { return familyOf(a) == nftgen.FamilyIPv6 }) {
		families = append(families, nftgen.FamilyIPv6)
	}
	for _, f := range families {
		is4 := f == nftgen.FamilyIPv4
		np, err := ResolveNodePortAddresses(s.NodePortAddresses, local, primary, is4)
		if err != nil {
			return nil, err
		}
		bit := s.MasqueradeBit
		cfg := nftgen.Config{
			Family: f, ClusterCIDRs: byFamily[f], MasqueradeAll: s.MasqueradeAll, MasqueradeBit: &bit,
			Node: r.Node, LocalhostNodePorts: s.LocalhostNodePorts && is4, ConntrackTCPLiberal: s.ConntrackTCPLiberal,
			RestrictNodePorts: !np.All, NodePortAddresses: np.Addrs, PodInterface: s.PodInterface, PodInterfacePrefix: s.PodInterfacePrefix,
		}
		for _, a := range primary {
			if a.Is4() == is4 {
				cfg.NodeIP = a
			}
		}
		for _, a := range r.NodeAddrs {
			if a.Is4() == is4 && !slices.Contains(cfg.NodeIPs, a) {
				cfg.NodeIPs = append(cfg.NodeIPs, a)
			}
		}
		g, err := nftgen.NewGenerator(cfg)
		if err != nil {
			return nil, fmt.Errorf("%s rules: %w", f, err)
		}
		r.RouteLocalnet = r.RouteLocalnet || g.Config().LocalhostNodePorts
		r.Generators = append(r.Generators, g)
	}
	return r, nil
}

// familyOf is the family of a.
func familyOf(a netip.Addr) nftgen.Family {
	if a.Is6() && !a.Is4In6() {
		return nftgen.FamilyIPv6
	}
	return nftgen.FamilyIPv4
}
