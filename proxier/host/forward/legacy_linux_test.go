//go:build linux

package forward

import (
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/e2e/testns"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/host/netns"
)

// TestEnsureLegacyWritesKubeProxysForwardRules: on a legacy FORWARD chain
// whose policy is DROP, with another program's rule in it, EnsureLegacy
// writes kube-proxy's forwarding rules (the jump first) in both families,
// keeps the other rule, and a second call changes nothing visible.
func TestEnsureLegacyWritesKubeProxysForwardRules(t *testing.T) {
	testns.RequireRoot(t)
	ns := testns.New(t, "nfp-fwdl")
	for _, cmd := range []string{"iptables-legacy", "ip6tables-legacy"} {
		ns.MustRun(t, cmd, "-P", "FORWARD", "DROP")
		ns.MustRun(t, cmd, "-A", "FORWARD", "-i", "docker0", "-j", "ACCEPT")
		ns.MustRun(t, cmd, "-N", "DOCKER-USER")
		ns.MustRun(t, cmd, "-A", "DOCKER-USER", "-j", "RETURN")
	}
	for i, want := range []string{"legacy ip,legacy ip6", ""} {
		var res Result
		err := netns.Do(ns.Path(), func() (err error) { res, err = EnsureLegacy(nftgen.NewHostForward(1 << 14)); return err })
		if err != nil || strings.Join(res.Written, ",") != want {
			t.Fatalf("call %d wrote %v, %v; want %q (the second finds them in place)", i+1, res.Written, err, want)
		}
	}
	want := []string{kubeProxyLines[0], "-A FORWARD -i docker0 -j ACCEPT", "-A DOCKER-USER -j RETURN", kubeProxyLines[1], kubeProxyLines[2]}
	for _, save := range []string{"iptables-legacy-save", "ip6tables-legacy-save"} {
		var got []string
		for _, l := range strings.Split(ns.MustRun(t, save, "-t", "filter"), "\n") {
			if strings.HasPrefix(l, "-A ") {
				got = append(got, l)
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n%s\nwant:\n%s", save, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}
