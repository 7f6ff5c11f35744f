// Package cleanup removes what the previous kube-proxy image left behind
// when nftproxy takes a node over: kube-proxy's iptables-mode and IPVS-mode
// chains in the nat and filter tables and the jumps to them from the
// built-in chains, in both iptables backends (legacy x_tables and
// iptables-nft), the tables of kube-proxy's nftables mode, and the IPVS
// mode's virtual servers, dummy interface and ipsets.
//
// A chain or rule is kube-proxy's only by what kube-proxy writes: a chain
// by its exact fixed name or by a per-Service prefix followed by
// kube-proxy's 16-character hash, a jump to it only when it carries one of
// the comments kube-proxy gives its jumps. Everything else is left alone,
// including kubelet's KUBE-FIREWALL, an administrator's KUBE-FW-ALLOWLIST
// and any rule of another program that jumps to one of kube-proxy's
// chains (such a chain is then kept, with what it jumps to, and reported).
// No external binary is run.
package cleanup
