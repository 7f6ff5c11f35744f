package main

import (
	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/proxier/cleanup"
	"github.com/nftproxy/nftproxy/proxier/netns"
)

// removeLegacyRules deletes the iptables-mode and IPVS-mode rules of the
// kube-proxy this node ran before, in both iptables backends, kube-proxy's
// nftables mode tables and its IPVS state: they would shadow or
// double-handle nftproxy's rules.
func removeLegacyRules(nsPath string) {
	_ = netns.Do(nsPath, func() error {
		nft, err := cleanup.CleanupNFT()
		if err != nil {
			klog.ErrorS(err, "Could not remove kube-proxy's iptables-nft rules")
		}
		legacy, err := cleanup.CleanupLegacy()
		if err != nil {
			klog.ErrorS(err, "Could not remove kube-proxy's legacy iptables rules")
		}
		// After the chains: an ipset that a rule uses cannot be destroyed.
		ipvs, err := cleanup.CleanupIPVS()
		if err != nil {
			klog.ErrorS(err, "Could not remove all of kube-proxy's IPVS mode leftovers")
		}
		if nft.Chains+nft.Rules+legacy.Chains+legacy.Rules+ipvs.Sets+ipvs.Services > 0 || ipvs.Link {
			klog.InfoS("Removed the previous kube-proxy's rules", "nftChains", nft.Chains, "nftJumps", nft.Rules, "legacyChains", legacy.Chains, "legacyRules", legacy.Rules,
				"ipvsServices", ipvs.Services, "ipvsInterface", ipvs.Link, "ipsets", ipvs.Sets)
		}
		if kept := append(nft.Kept, legacy.Kept...); len(kept) > 0 {
			klog.InfoS("Left kube-proxy's chains that another program's rules jump to", "chains", kept)
		}
		return nil
	})
}
