//go:build linux

package e2e

import (
	"github.com/nftproxy/nftproxy/e2e/harness"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNodePortAddressesFollowTheInterfaces: with --nodeport-addresses, a
// node address that appears after start-up serves node ports from the next
// sync on, and one that goes away stops, as kube-proxy re-reads the
// interfaces on every sync.
func TestNodePortAddressesFollowTheInterfaces(t *testing.T) {
	ns := nodeNamespace(t, "nfp-npa")
	dir := t.TempDir()
	objects := writeObjects(t, dir, testNode(), harness.With(harness.ClusterIPService("ns", "np", "10.96.0.80", httpPort), harness.NodePorts(30080)))
	startNftproxy(t, filepath.Join(dir, "nftproxy.log"), "--objects", objects, "--netns", ns.Path(), "--hostname-override", harness.LocalNode,
		"--nodeport-addresses", "192.0.2.0/24", "--iptables-sync-period", "200ms", "--iptables-min-sync-period", "10ms",
		"--metrics-bind-address", "0", "--healthz-bind-address", "0")
	table := func() string {
		out, _ := ns.Run("nft", "list", "table", "ip", "kube-proxy")
		return out
	}
	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		eventually(t, what, 10*time.Second, func() error {
			if tb := table(); !ok(tb) {
				return errorf("table:\n%s", tb)
			}
			return nil
		})
	}
	waitFor("node ports on 192.0.2.1", func(s string) bool { return strings.Contains(s, "192.0.2.1") })
	if strings.Contains(table(), "192.0.2.77") {
		t.Fatal("192.0.2.77 is not an address of the node yet")
	}
	ns.MustRun(t, "ip", "addr", "add", "192.0.2.77/32", "dev", "lo")
	waitFor("node ports on the new address 192.0.2.77", func(s string) bool { return strings.Contains(s, "192.0.2.77") })
	ns.MustRun(t, "ip", "addr", "del", "192.0.2.77/32", "dev", "lo")
	waitFor("node ports off the removed address", func(s string) bool { return !strings.Contains(s, "192.0.2.77") })
}
