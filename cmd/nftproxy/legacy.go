package main

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/proxier/host/cleanup"
	"github.com/nftproxy/nftproxy/proxier/host/forward"
	"github.com/nftproxy/nftproxy/proxier/host/netns"
)

// removeLegacyRules deletes the iptables-mode and IPVS-mode rules of the
// kube-proxy this node ran before, in both iptables backends, kube-proxy's
// nftables mode tables and its IPVS state: they would shadow or
// double-handle nftproxy's rules.
func removeLegacyRules(ctx context.Context, nsPath string) {
	nft, err := cleanup.CleanupNFT(ctx, nsPath)
	if err != nil {
		klog.ErrorS(err, "Could not remove kube-proxy's iptables-nft rules")
	}
	_ = netns.Do(nsPath, func() error {
		legacy, err := cleanup.CleanupLegacy()
		if err != nil {
			klog.ErrorS(err, "Could not remove kube-proxy's legacy iptables rules")
		}
		// After the chains: an ipset that a rule uses cannot be destroyed.
		ipvs, err := cleanup.CleanupIPVS()
		if err != nil {
			klog.ErrorS(err, "Could not remove all of kube-proxy's IPVS mode leftovers")
		}
		if nft.Chains+nft.Rules+nft.Tables+legacy.Chains+legacy.Rules+ipvs.Sets+ipvs.Services > 0 || ipvs.Link {
			klog.InfoS("Removed the previous kube-proxy's rules", "nftChains", nft.Chains, "nftJumps", nft.Rules, "nftTables", nft.Tables, "legacyChains", legacy.Chains, "legacyRules", legacy.Rules,
				"ipvsServices", ipvs.Services, "ipvsInterface", ipvs.Link, "ipsets", ipvs.Sets)
		}
		if kept := append(nft.Kept, legacy.Kept...); len(kept) > 0 {
			klog.InfoS("Left kube-proxy's chains that another program's rules jump to", "chains", kept)
		}
		return nil
	})
}

// keepForwardRules writes kube-proxy's KUBE-FORWARD accepts into the
// filter table of each iptables backend whose FORWARD chain can drop
// (Docker's policy DROP, say), now and every period, until ctx ends; a
// check finds them in place and writes nothing.
func keepForwardRules(ctx context.Context, nsPath string, markBit uint32, period time.Duration) {
	for {
		_ = netns.Do(nsPath, func() error {
			for _, ensure := range []func(uint32) (forward.Result, error){forward.EnsureNFT, forward.EnsureLegacy} {
				res, err := ensure(markBit)
				if err != nil {
					klog.ErrorS(err, "Could not write the forwarding rules; forwarded Service traffic may be dropped by the host's FORWARD chain")
				}
				if len(res.Written) > 0 {
					klog.InfoS("Wrote kube-proxy's forwarding rules: the host's iptables FORWARD chain would drop forwarded Service traffic", "where", res.Written)
				}
			}
			return nil
		})
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
	}
}
