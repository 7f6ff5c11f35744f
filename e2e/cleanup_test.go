//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/e2e/testns"
)

// TestStartupRemovesLegacyKubeProxyRules loads a real kube-proxy iptables
// ruleset (captured from kube-proxy v1.37.2) into both iptables backends,
// with foreign chains beside it, starts the nftproxy daemon and checks that
// kube-proxy's chains and jumps are gone from both backends and everything
// else is still there.
func TestStartupRemovesLegacyKubeProxyRules(t *testing.T) {
	ns := nodeNamespace(t, "nfp-cleanup")
	loadKubeProxyRules(t, ns)
	before := ns.MustRun(t, "iptables-legacy-save")
	if !strings.Contains(before, "KUBE-SVC-") || !strings.Contains(ns.MustRun(t, "iptables-nft-save"), "KUBE-SVC-") {
		t.Fatal("the legacy ruleset did not load")
	}

	objects := writeObjects(t, t.TempDir(), ClusterIPService("demo", "web", "10.96.0.50", httpPort))
	startNftproxy(t, "", "--objects", objects, "--netns", ns.Path(), "--metrics-bind-address", "0", "--healthz-bind-address", "0")
	eventually(t, "nftproxy programs its table", 10*time.Second, func() error {
		if out, _ := ns.Run("nft", "list", "table", "ip", "nftproxy"); !strings.Contains(out, "10.96.0.50") {
			return errorf("no 10.96.0.50 in the table")
		}
		return nil
	})

	for _, saveCmd := range []string{"iptables-legacy-save", "iptables-nft-save"} {
		after := ns.MustRun(t, saveCmd)
		for _, gone := range []string{"KUBE-SVC-", "KUBE-SEP-", "KUBE-EXT-", ":KUBE-SERVICES", "-j KUBE-SERVICES", ":KUBE-NODEPORTS", "-j KUBE-POSTROUTING", ":KUBE-FORWARD", "-j KUBE-PROXY-FIREWALL", "-j KUBE-EXTERNAL-SERVICES"} {
			if strings.Contains(after, gone) {
				t.Errorf("%s still shows %q:\n%s", saveCmd, gone, after)
			}
		}
		for _, kept := range []string{"-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER", "-A DOCKER -i docker0 -j RETURN", "-A FORWARD -j CNI-FORWARD",
			"-A CNI-FORWARD -s 10.244.0.0/16 -j ACCEPT", ":KUBE-FIREWALL", "-A INPUT -j KUBE-FIREWALL"} {
			if !strings.Contains(after, kept) {
				t.Errorf("%s lost %q:\n%s", saveCmd, kept, after)
			}
		}
	}
}

// TestCleanupRemovesKubeProxysRulesToo: `nftproxy --cleanup`, like
// kube-proxy's, removes kube-proxy's rules of every backend (iptables
// legacy and nft, the nftables mode's table) besides nftproxy's tables,
// and nothing else.
func TestCleanupRemovesKubeProxysRulesToo(t *testing.T) {
	ns := nodeNamespace(t, "nfp-cleanall")
	loadKubeProxyRules(t, ns)
	ns.MustRun(t, "nft", "add", "table", "ip", "kube-proxy")
	ns.MustRun(t, "nft", "add", "chain", "ip", "kube-proxy", "services")
	objects := writeObjects(t, t.TempDir(), ClusterIPService("demo", "web", "10.96.0.51", httpPort))
	if out, err := exec.Command(nftproxyBinary, "sync", "--objects", objects, "--netns", ns.Path()).CombinedOutput(); err != nil {
		t.Fatalf("sync: %v\n%s", err, out)
	}
	if out, err := exec.Command(nftproxyBinary, "--cleanup", "--netns", ns.Path()).CombinedOutput(); err != nil {
		t.Fatalf("--cleanup: %v\n%s", err, out)
	}
	tables := ns.MustRun(t, "nft", "list", "tables")
	if strings.Contains(tables, "nftproxy") || strings.Contains(tables, "kube-proxy") {
		t.Errorf("tables left after --cleanup:\n%s", tables)
	}
	for _, saveCmd := range []string{"iptables-legacy-save", "iptables-nft-save"} {
		after := ns.MustRun(t, saveCmd)
		if strings.Contains(after, "KUBE-SVC-") || strings.Contains(after, ":KUBE-SERVICES") {
			t.Errorf("%s still shows kube-proxy's rules:\n%s", saveCmd, after)
		}
		if !strings.Contains(after, "-A FORWARD -j CNI-FORWARD") {
			t.Errorf("%s lost another tool's rule:\n%s", saveCmd, after)
		}
	}
}

// loadKubeProxyRules loads a real kube-proxy iptables ruleset (captured
// from kube-proxy v1.37.2, with foreign chains beside it) into both
// iptables backends of ns.
func loadKubeProxyRules(t *testing.T, ns *testns.NS) {
	t.Helper()
	save, err := os.ReadFile("testdata/kube-proxy-legacy.save")
	if err != nil {
		t.Fatal(err)
	}
	for _, restore := range []string{"iptables-legacy-restore", "iptables-nft-restore"} {
		cmd := ns.Command(restore)
		cmd.Stdin = strings.NewReader(string(save))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", restore, err, out)
		}
	}
}
