//go:build linux

package kernel

import (
	"context"
	"strings"
	"testing"

	"github.com/google/nftables"

	"github.com/nftproxy/nftproxy/e2e/testns"
)

// TestForeignTableFollowsJumps: iptables-nft's nat table, as kube-proxy's
// iptables mode writes it, is read from its built-in chains by following
// jumps, with each rule's jump and comment, and without a chain dump
// (which would walk every other table of the family too); a chain that
// nothing jumps to makes it fall back to the dump once, and is read.
func TestForeignTableFollowsJumps(t *testing.T) {
	testns.RequireRoot(t)
	ns, dp := kernelNetlink(t, "nfp-foreign")
	rules := strings.Join([]string{
		"*nat",
		":KUBE-SERVICES - [0:0]",
		":KUBE-SVC-AAAAAAAAAAAAAAAA - [0:0]",
		":KUBE-SEP-BBBBBBBBBBBBBBBB - [0:0]",
		":KUBE-PROXY-CANARY - [0:0]",
		`-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
		`-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -m comment --comment "ns1/a cluster IP" -j KUBE-SVC-AAAAAAAAAAAAAAAA`,
		"-A KUBE-SVC-AAAAAAAAAAAAAAAA -j KUBE-SEP-BBBBBBBBBBBBBBBB",
		"-A KUBE-SEP-BBBBBBBBBBBBBBBB -p tcp -m tcp -j DNAT --to-destination 10.244.0.2:8080",
		"COMMIT", "",
	}, "\n")
	cmd := ns.Command("iptables-nft-restore")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("iptables-nft-restore: %v\n%s", err, out)
	}
	read := func() map[string]ForeignChain {
		t.Helper()
		chains, err := dp.ForeignTable(context.Background(), nftables.TableFamilyIPv4, "nat", []string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING", "KUBE-PROXY-CANARY"})
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]ForeignChain{}
		for _, ch := range chains {
			byName[ch.Name] = ch
		}
		return byName
	}
	got := read()
	if n := dp.fullListings.Load(); n != 0 {
		t.Errorf("a table whose chains are all reachable was listed whole %d times", n)
	}
	pre, ok := got["PREROUTING"]
	if !ok || !pre.Base || len(pre.Rules) != 1 || pre.Rules[0].Jump != "KUBE-SERVICES" || pre.Rules[0].Comment != "kubernetes service portals" || pre.Rules[0].Handle == 0 {
		t.Errorf("PREROUTING read as %+v (present %v)", pre, ok)
	}
	if svc := got["KUBE-SERVICES"]; svc.Base || len(svc.Rules) != 1 || svc.Rules[0].Comment != "ns1/a cluster IP" {
		t.Errorf("KUBE-SERVICES read as %+v", svc)
	}
	for _, name := range []string{"KUBE-SVC-AAAAAAAAAAAAAAAA", "KUBE-SEP-BBBBBBBBBBBBBBBB", "KUBE-PROXY-CANARY"} {
		if _, ok := got[name]; !ok {
			t.Errorf("%s was not read", name)
		}
	}
	ns.MustRun(t, "nft", "add", "chain", "ip", "nat", "stray")
	if _, ok := read()["stray"]; !ok {
		t.Error("a chain nothing jumps to was not read")
	}
	if n := dp.fullListings.Load(); n != 1 {
		t.Errorf("a stray chain made the read list the table %d times, want once", n)
	}
	if got, err := dp.ForeignTable(context.Background(), nftables.TableFamilyIPv6, "nat", []string{"PREROUTING"}); err != nil || got != nil {
		t.Errorf("a missing table read as %v, %v; want nothing", got, err)
	}
}
