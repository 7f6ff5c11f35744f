//go:build linux

package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// ipvsModeRules is what kube-proxy's IPVS mode writes for one ClusterIP
// Service (its chains, jumps and ipset matches), beside another tool's rule
// that uses a set of its own.
const ipvsModeRules = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-LOAD-BALANCER - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-SERVICES - [0:0]
:OTHER-TOOL - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A POSTROUTING -j OTHER-TOOL
-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-POSTROUTING -m comment --comment "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose" -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-SERVICES ! -s 10.244.0.0/16 -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT
-A OTHER-TOOL -m set --match-set OTHER-SET src -j RETURN
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-IPVS-FILTER - [0:0]
:KUBE-IPVS-OUT-FILTER - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-SOURCE-RANGES-FIREWALL - [0:0]
-A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER
-A INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A OUTPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-OUT-FILTER
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-IPVS-FILTER -m set --match-set KUBE-CLUSTER-IP dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT --reject-with icmp-port-unreachable
-A KUBE-PROXY-FIREWALL -j KUBE-SOURCE-RANGES-FIREWALL
-A KUBE-SOURCE-RANGES-FIREWALL -j DROP
COMMIT
`

// TestCleanupRemovesIPVSModeLeftovers: nftproxy (at start and with
// --cleanup) removes what kube-proxy's IPVS mode leaves on a node: its
// iptables chains and their jumps in both backends, the kube-ipvs0
// interface and its ipsets of both families, and nothing of other tools.
// (This kernel has no IPVS, so the flush of virtual servers is skipped, as
// kube-proxy skips it.)
func TestCleanupRemovesIPVSModeLeftovers(t *testing.T) {
	if _, err := exec.LookPath("ipset"); err != nil {
		t.Fatalf("ipset is not installed (bash .ci/deps): %v", err)
	}
	ns := nodeNamespace(t, "nfp-ipvs")
	for _, set := range [][]string{
		{"KUBE-CLUSTER-IP", "hash:ip,port"}, {"KUBE-LOOP-BACK", "hash:ip,port,ip"}, {"KUBE-IPVS-IPS", "hash:ip"},
		{"KUBE-6-CLUSTER-IP", "hash:ip,port", "family", "inet6"}, {"OTHER-SET", "hash:ip"},
	} {
		ns.MustRun(t, "ipset", append([]string{"create"}, set...)...)
	}
	for _, restore := range []string{"iptables-legacy-restore", "iptables-nft-restore"} {
		cmd := ns.Command(restore)
		cmd.Stdin = strings.NewReader(ipvsModeRules)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", restore, err, out)
		}
	}
	ns.MustRun(t, "ip", "link", "add", "kube-ipvs0", "type", "veth", "peer", "name", "kipvs-peer")
	ns.MustRun(t, "ip", "addr", "add", "10.96.0.10/32", "dev", "kube-ipvs0")

	out, err := exec.Command(nftproxyBinary, "--cleanup", "--netns", ns.Path()).CombinedOutput()
	if err != nil {
		t.Fatalf("--cleanup: %v\n%s", err, out)
	}
	// It says what it removed: the four sets of kube-proxy's created above.
	if !strings.Contains(string(out), "ipvsInterface=true ipsets=4") {
		t.Errorf("--cleanup does not report the interface and the 4 ipsets it removed:\n%s", out)
	}
	for _, save := range []string{"iptables-legacy-save", "iptables-nft-save"} {
		after := ns.MustRun(t, save)
		for _, gone := range []string{"KUBE-SERVICES", "KUBE-NODE-PORT", "KUBE-LOAD-BALANCER", "KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER", "KUBE-SOURCE-RANGES-FIREWALL", "KUBE-CLUSTER-IP"} {
			if strings.Contains(after, gone) {
				t.Errorf("%s still shows %s:\n%s", save, gone, after)
			}
		}
		if !strings.Contains(after, "-A OTHER-TOOL -m set --match-set OTHER-SET src -j RETURN") {
			t.Errorf("%s lost another tool's rule:\n%s", save, after)
		}
	}
	sets := ns.MustRun(t, "ipset", "list", "-n")
	if strings.Contains(sets, "KUBE-") || !strings.Contains(sets, "OTHER-SET") {
		t.Errorf("ipsets after --cleanup (want only OTHER-SET):\n%s", sets)
	}
	if out, err := ns.Run("ip", "link", "show", "kube-ipvs0"); err == nil {
		t.Errorf("kube-ipvs0 is still there:\n%s", out)
	}
}
