// Package cleanup removes what the previous kube-proxy image left behind
// when nftproxy takes a node over: kube-proxy's iptables-mode chains in the
// nat and filter tables and the jumps to them from the built-in chains, in
// both iptables backends (legacy x_tables and iptables-nft), and the tables
// of kube-proxy's nftables mode. Everything else is left alone, including
// kubelet's KUBE-FIREWALL. No external binary is run.
package cleanup

import "github.com/nftproxy/nftproxy/compat"

// owned reports whether chain is one kube-proxy's iptables mode owns and
// cleans up itself.
func owned(chain string) bool {
	return compat.IsKubeProxyChain(chain) && chain != "KUBE-FIREWALL"
}

// Result counts what was removed.
type Result struct {
	Chains, Rules int
}

// Add adds o to r.
func (r *Result) Add(o Result) { r.Chains += o.Chains; r.Rules += o.Rules }
