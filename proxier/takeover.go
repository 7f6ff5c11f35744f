package proxier

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/host/cleanup"
	"github.com/nftproxy/nftproxy/proxier/host/forward"
	"github.com/nftproxy/nftproxy/proxier/host/netns"
)

// HostTakeOver takes the node over from the proxy that ran before. The
// engine calls it once, after its first successful sync, so that the
// previous proxy's rules go only once nftproxy's own are in place (make
// before break): until then both exist, nftproxy's base chains run first at
// the same priority, and NAT keeps the first binding a packet gets.
type HostTakeOver interface {
	// TakeOver runs once; what it starts may last until ctx ends.
	TakeOver(ctx context.Context)
}

// KubeProxyTakeOver is the daemon's HostTakeOver. It removes the iptables,
// IPVS and nftables rules of the kube-proxy the node ran before, in both
// iptables backends, which would shadow or double-handle nftproxy's; then,
// every Period until ctx ends, it keeps kube-proxy's KUBE-FORWARD accepts
// in the filter table of each backend whose FORWARD chain can drop
// (Docker's policy DROP, say), writing nothing when they are in place.
type KubeProxyTakeOver struct {
	// NetNS is the node's network namespace ("": this process's).
	NetNS string
	// MasqueradeMark is the mark of KUBE-MARK-MASQ (1 << the masquerade bit).
	MasqueradeMark uint32
	// Period is how often the forwarding accepts are checked.
	Period time.Duration
}

// TakeOver implements HostTakeOver.
func (t KubeProxyTakeOver) TakeOver(ctx context.Context) {
	RemoveKubeProxyRules(ctx, t.NetNS)
	go t.keepForwardRules(ctx)
}

// RemoveKubeProxyRules deletes, in the network namespace at nsPath ("":
// this process's), what each of kube-proxy's modes writes: its iptables
// rules in both backends, its nftables mode's tables and its IPVS state,
// keeping a chain another program's rules jump to. It logs what it removed
// and what it could not.
func RemoveKubeProxyRules(ctx context.Context, nsPath string) {
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

// keepForwardRules writes the forwarding rules where they are missing,
// now and every Period, until ctx ends.
func (t KubeProxyTakeOver) keepForwardRules(ctx context.Context) {
	// The generator's rules, so that the mark bit reaches the kernel by
	// one road, whichever table holds the rules.
	rules := nftgen.NewHostForward(t.MasqueradeMark)
	for {
		_ = netns.Do(t.NetNS, func() error {
			for _, ensure := range []func(nftgen.HostForward) (forward.Result, error){forward.EnsureNFT, forward.EnsureLegacy} {
				res, err := ensure(rules)
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
		case <-time.After(t.Period):
		}
	}
}
