package main

import (
	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/proxier/cleanup"
	"github.com/nftproxy/nftproxy/proxier/netns"
)

// removeLegacyRules deletes the iptables-mode rules of the kube-proxy this
// node ran before, in both iptables backends, and kube-proxy's nftables
// mode tables: they would shadow or double-handle nftproxy's rules.
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
		if nft.Chains+nft.Rules+legacy.Chains+legacy.Rules > 0 {
			klog.InfoS("Removed the previous kube-proxy's rules", "nftChains", nft.Chains, "nftJumps", nft.Rules, "legacyChains", legacy.Chains, "legacyRules", legacy.Rules)
		}
		return nil
	})
}
