//go:build linux

package e2e

import (
	"github.com/nftproxy/nftproxy/e2e/harness"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

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
	// An administrator's allow-list, named like kube-proxy's firewall
	// chains, in both backends (nft commands for the nftables one).
	ns.MustRun(t, "iptables-legacy", "-N", "KUBE-FW-ALLOWLIST")
	ns.MustRun(t, "iptables-legacy", "-A", "KUBE-FW-ALLOWLIST", "-s", "192.0.2.0/24", "-j", "ACCEPT")
	ns.MustRun(t, "iptables-legacy", "-A", "INPUT", "-p", "tcp", "--dport", "22", "-j", "KUBE-FW-ALLOWLIST")
	ns.MustRun(t, "nft", "add", "chain", "ip", "filter", "KUBE-FW-ALLOWLIST")
	ns.MustRun(t, "nft", "add", "rule", "ip", "filter", "KUBE-FW-ALLOWLIST", "ip", "saddr", "192.0.2.0/24", "accept")
	ns.MustRun(t, "nft", "add", "rule", "ip", "filter", "INPUT", "tcp", "dport", "22", "jump", "KUBE-FW-ALLOWLIST")
	before := ns.MustRun(t, "iptables-legacy-save")
	if !strings.Contains(before, "KUBE-SVC-") || !strings.Contains(ns.MustRun(t, "iptables-nft-save"), "KUBE-SVC-") {
		t.Fatal("the legacy ruleset did not load")
	}

	objects := writeObjects(t, t.TempDir(), harness.ClusterIPService("demo", "web", "10.96.0.50", httpPort))
	startNftproxy(t, "", "--objects", objects, "--netns", ns.Path(), "--metrics-bind-address", "0", "--healthz-bind-address", "0")
	eventually(t, "nftproxy programs its table", 10*time.Second, func() error {
		if out, _ := ns.Run("nft", "list", "table", "ip", "kube-proxy"); !strings.Contains(out, "10.96.0.50") {
			return errorf("no 10.96.0.50 in the table")
		}
		return nil
	})
	// The removal follows the first sync (make before break): wait for it
	// to end, then check everything.
	eventually(t, "the previous kube-proxy's rules removed", 10*time.Second, func() error {
		for _, saveCmd := range []string{"iptables-legacy-save", "iptables-nft-save"} {
			if strings.Contains(ns.MustRun(t, saveCmd), "KUBE-SVC-") {
				return errorf("%s still shows KUBE-SVC-", saveCmd)
			}
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
			"-A CNI-FORWARD -s 10.244.0.0/16 -j ACCEPT", ":KUBE-FIREWALL", "-A INPUT -j KUBE-FIREWALL",
			":KUBE-FW-ALLOWLIST", "-A INPUT -p tcp -m tcp --dport 22 -j KUBE-FW-ALLOWLIST", "-A KUBE-FW-ALLOWLIST -s 192.0.2.0/24 -j ACCEPT"} {
			if !strings.Contains(after, kept) {
				t.Errorf("%s lost %q:\n%s", saveCmd, kept, after)
			}
		}
	}
}

// TestCleanupRemovesKubeProxysRulesToo: a sync replaces kube-proxy's
// nftables-mode table (nftproxy's table has its name); `nftproxy
// --cleanup`, like kube-proxy's, removes kube-proxy's rules of every
// backend (iptables legacy and nft) besides nftproxy's tables, and nothing
// else.
func TestCleanupRemovesKubeProxysRulesToo(t *testing.T) {
	ns := nodeNamespace(t, "nfp-cleanall")
	loadKubeProxyRules(t, ns)
	ns.MustRun(t, "nft", "add", "table", "ip", "kube-proxy")
	ns.MustRun(t, "nft", "add", "chain", "ip", "kube-proxy", "services")
	objects := writeObjects(t, t.TempDir(), harness.ClusterIPService("demo", "web", "10.96.0.51", httpPort))
	if out, err := exec.Command(nftproxyBinary, "sync", "--objects", objects, "--netns", ns.Path()).CombinedOutput(); err != nil {
		t.Fatalf("sync: %v\n%s", err, out)
	}
	// kube-proxy's nftables-mode table has nftproxy's table's name: the
	// sync replaced it whole.
	if table := ns.MustRun(t, "nft", "list", "table", "ip", "kube-proxy"); strings.Contains(table, "chain services") || !strings.Contains(table, "chain KUBE-MARK-MASQ") {
		t.Errorf("the sync did not replace kube-proxy's nftables-mode table with nftproxy's:\n%s", table)
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
		if strings.Contains(after, "KUBE-SVC-") || strings.Contains(after, ":KUBE-SERVICES") || strings.Contains(after, ":KUBE-PROXY-CANARY") {
			t.Errorf("%s still shows kube-proxy's rules (its canary chains included, in mangle too):\n%s", saveCmd, after)
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

// TestDaemonSetCapabilitiesSufficeForCleanup runs `--cleanup` with exactly
// the capabilities deploy/base's DaemonSet grants (its bounding set cut to
// them, as a container runtime does) and checks that kube-proxy's rules
// are gone from both iptables backends: the legacy backend needs a raw
// socket, which NET_ADMIN alone does not allow.
func TestDaemonSetCapabilitiesSufficeForCleanup(t *testing.T) {
	raw, err := os.ReadFile("../deploy/base/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.Unmarshal(raw, &ds); err != nil {
		t.Fatal(err)
	}
	sc := ds.Spec.Template.Spec.Containers[0].SecurityContext
	if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Fatalf("the DaemonSet does not drop every capability: %+v", sc)
	}
	caps := []string{"-all"}
	for _, c := range sc.Capabilities.Add {
		caps = append(caps, "+"+strings.ToLower(string(c)))
	}
	ns := nodeNamespace(t, "nfp-caps")
	loadKubeProxyRules(t, ns)
	out, err := ns.Command("setpriv", "--bounding-set", strings.Join(caps, ","), "--inh-caps", "-all", nftproxyBinary, "--cleanup").CombinedOutput()
	if err != nil {
		t.Fatalf("--cleanup with capabilities %v: %v\n%s", sc.Capabilities.Add, err, out)
	}
	for _, saveCmd := range []string{"iptables-legacy-save", "iptables-nft-save"} {
		if after := ns.MustRun(t, saveCmd); strings.Contains(after, "KUBE-SVC-") {
			t.Errorf("with capabilities %v, %s still shows kube-proxy's rules (cleanup said: %s)", sc.Capabilities.Add, saveCmd, out)
		}
	}
}

// TestInitOnlySetsUpAndExits: `--init-only` (kube-proxy's init container
// flag) sets the conntrack sysctls and route_localnet in the node's
// namespace, programs no rule and exits 0 at once, with no API server.
func TestInitOnlySetsUpAndExits(t *testing.T) {
	ns := nodeNamespace(t, "nfp-init")
	start := time.Now()
	out, err := exec.Command(nftproxyBinary, "--init-only", "--netns", ns.Path(), "--conntrack-max-per-core", "0",
		"--conntrack-tcp-timeout-established", "4321s").CombinedOutput()
	if err != nil {
		t.Fatalf("--init-only: %v\n%s", err, out)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("--init-only took %v", d)
	}
	if got := strings.TrimSpace(ns.MustRun(t, "cat", "/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established")); got != "4321" {
		t.Errorf("nf_conntrack_tcp_timeout_established = %s, want 4321", got)
	}
	if got := strings.TrimSpace(ns.MustRun(t, "cat", "/proc/sys/net/ipv4/conf/all/route_localnet")); got != "1" {
		t.Errorf("route_localnet = %s, want 1", got)
	}
	if tables := ns.MustRun(t, "nft", "list", "tables"); strings.Contains(tables, "kube-proxy") {
		t.Errorf("--init-only programmed rules:\n%s", tables)
	}
}

// TestHostTCPBeLiberalDropsNoInvalidPackets: with the node's
// nf_conntrack_tcp_be_liberal set (by its administrator, not by the flag),
// nftproxy installs no drop of INVALID packets, as kube-proxy reads the
// sysctl too.
func TestHostTCPBeLiberalDropsNoInvalidPackets(t *testing.T) {
	ns := nodeNamespace(t, "nfp-liberal")
	objects := writeObjects(t, t.TempDir(), harness.ClusterIPService("demo", "web", "10.96.0.52", httpPort))
	sync := func() string {
		if out, err := exec.Command(nftproxyBinary, "sync", "--objects", objects, "--netns", ns.Path()).CombinedOutput(); err != nil {
			t.Fatalf("sync: %v\n%s", err, out)
		}
		return ns.MustRun(t, "nft", "list", "table", "ip", "kube-proxy")
	}
	ns.MustRun(t, "sh", "-c", "echo 0 > /proc/sys/net/netfilter/nf_conntrack_tcp_be_liberal")
	if table := sync(); !strings.Contains(table, "ct state invalid") {
		t.Fatalf("without the sysctl the INVALID drop is missing:\n%s", table)
	}
	ns.MustRun(t, "sh", "-c", "echo 1 > /proc/sys/net/netfilter/nf_conntrack_tcp_be_liberal")
	ns.MustRun(t, "nft", "delete", "table", "ip", "kube-proxy")
	if table := sync(); strings.Contains(table, "ct state invalid") {
		t.Errorf("with nf_conntrack_tcp_be_liberal=1 the INVALID drop is still there:\n%s", table)
	}
}

// TestCleanupKeepsWhatAnotherProgramJumpsTo: another program's rule (no
// kube-proxy comment) jumps to one of kube-proxy's Service chains in both
// backends. --cleanup keeps that chain and every chain it reaches (its
// endpoint chains, KUBE-MARK-MASQ), so the other program's rule stays
// valid, and removes the rest of kube-proxy's rules.
func TestCleanupKeepsWhatAnotherProgramJumpsTo(t *testing.T) {
	ns := nodeNamespace(t, "nfp-kept")
	loadKubeProxyRules(t, ns)
	const svc = "KUBE-SVC-HMALVVKA6APKJPPY"
	ns.MustRun(t, "iptables-legacy", "-t", "nat", "-A", "OUTPUT", "-d", "192.0.2.99", "-j", svc)
	ns.MustRun(t, "nft", "add", "rule", "ip", "nat", "OUTPUT", "ip", "daddr", "192.0.2.99", "jump", svc)
	if out, err := ns.Command(nftproxyBinary, "--cleanup").CombinedOutput(); err != nil {
		t.Fatalf("--cleanup: %v\n%s", err, out)
	}
	for _, saveCmd := range []string{"iptables-legacy-save", "iptables-nft-save"} {
		after := ns.MustRun(t, saveCmd, "-t", "nat")
		for _, kept := range []string{":" + svc, ":KUBE-SEP-7GEXUWOTTXYR5Q3W", ":KUBE-MARK-MASQ", "-j " + svc} {
			if !strings.Contains(after, kept) {
				t.Errorf("%s lost %q, which another program's rule reaches:\n%s", saveCmd, kept, after)
			}
		}
		for _, gone := range []string{":KUBE-SERVICES", ":KUBE-EXT-HMALVVKA6APKJPPY", ":KUBE-POSTROUTING"} {
			if strings.Contains(after, gone) {
				t.Errorf("%s still shows %q:\n%s", saveCmd, gone, after)
			}
		}
	}
}
