//go:build linux

package forward

import (
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/e2e/testns"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/host/netns"
)

// kubeProxyLines are kube-proxy's forwarding rules as iptables-save
// prints them (mark bit 14).
var kubeProxyLines = []string{
	`-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD`,
	`-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT`,
	`-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
}

// TestEnsureNFTWritesKubeProxysForwardRules: on a FORWARD chain whose
// policy is DROP (iptables-nft, both families) EnsureNFT writes exactly
// the rules kube-proxy's iptables mode writes, once (a second call adds
// no second jump); where iptables-nft has no FORWARD chain, nothing.
func TestEnsureNFTWritesKubeProxysForwardRules(t *testing.T) {
	testns.RequireRoot(t)
	ns := testns.New(t, "nfp-fwd")
	if res, err := inNS(ns, 1<<14); err != nil || len(res.Written) != 0 {
		t.Fatalf("without iptables-nft tables: wrote %v, %v", res.Written, err)
	}
	ns.MustRun(t, "iptables-nft", "-P", "FORWARD", "DROP")
	ns.MustRun(t, "ip6tables-nft", "-P", "FORWARD", "DROP")
	for i, want := range []string{"nft ip,nft ip6", ""} {
		res, err := inNS(ns, 1<<14)
		if err != nil || strings.Join(res.Written, ",") != want {
			t.Fatalf("call %d wrote %v, %v; want %q (the second finds them in place)", i+1, res.Written, err, want)
		}
	}
	for _, save := range []string{"iptables-nft-save", "ip6tables-nft-save"} {
		out := ns.MustRun(t, save, "-t", "filter")
		if strings.Contains(out, "incompatible") {
			t.Fatalf("%s cannot read the table:\n%s", save, out)
		}
		var got []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "-A ") {
				got = append(got, l)
			}
		}
		if strings.Join(got, "\n") != strings.Join(kubeProxyLines, "\n") {
			t.Errorf("%s:\n%s\nwant:\n%s", save, strings.Join(got, "\n"), strings.Join(kubeProxyLines, "\n"))
		}
	}
}

func inNS(ns *testns.NS, bit uint32) (res Result, err error) {
	err = netns.Do(ns.Path(), func() error { res, err = EnsureNFT(nftgen.NewHostForward(bit)); return err })
	return res, err
}

// TestEnsureNFTOnlyWhereForwardDrops: a FORWARD chain that accepts and
// only jumps to another program's chain (a CNI's) gets nothing; one whose
// own rule rejects gets the rules, policy ACCEPT or not.
func TestEnsureNFTOnlyWhereForwardDrops(t *testing.T) {
	testns.RequireRoot(t)
	ns := testns.New(t, "nfp-fwdr")
	ns.MustRun(t, "iptables-nft", "-N", "CNI-FORWARD")
	ns.MustRun(t, "iptables-nft", "-A", "FORWARD", "-j", "CNI-FORWARD")
	if res, err := inNS(ns, 1<<14); err != nil || len(res.Written) != 0 {
		t.Fatalf("FORWARD that only jumps to a CNI chain: wrote %v, %v", res.Written, err)
	}
	ns.MustRun(t, "iptables-nft", "-A", "FORWARD", "-j", "REJECT")
	if res, err := inNS(ns, 1<<14); err != nil || strings.Join(res.Written, ",") != "nft ip" {
		t.Fatalf("FORWARD with a REJECT rule: wrote %v, %v; want nft ip", res.Written, err)
	}
}
