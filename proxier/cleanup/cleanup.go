// Package cleanup removes what the previous kube-proxy image left behind
// when nftproxy takes a node over: kube-proxy's iptables-mode and IPVS-mode
// chains in the nat and filter tables and the jumps to them from the
// built-in chains, in both iptables backends (legacy x_tables and
// iptables-nft), the tables of kube-proxy's nftables mode, and the IPVS
// mode's virtual servers, dummy interface and ipsets. Everything else is
// left alone, including kubelet's KUBE-FIREWALL. No external binary is run.
package cleanup

import (
	"slices"

	"github.com/nftproxy/nftproxy/nftgen"
)

// ipvsChains are the chains only kube-proxy's IPVS mode writes (it shares
// the others with iptables mode).
var ipvsChains = []string{"KUBE-NODE-PORT", "KUBE-LOAD-BALANCER", "KUBE-SOURCE-RANGES-FIREWALL", "KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER"}

// owned reports whether chain is one kube-proxy's iptables or IPVS mode
// owns and cleans up itself.
func owned(chain string) bool {
	return (nftgen.IsKubeProxyChain(chain) || slices.Contains(ipvsChains, chain)) && chain != "KUBE-FIREWALL"
}

// Result counts what was removed.
type Result struct {
	Chains, Rules int
}

// Add adds o to r.
func (r *Result) Add(o Result) { r.Chains += o.Chains; r.Rules += o.Rules }
