package kernel

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	ct "github.com/ti-mo/conntrack"

	"github.com/nftproxy/nftproxy/e2e/testns"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
	"github.com/nftproxy/nftproxy/nftgen/svcmodel"
)

// TestShardGuardAloneServesClusterIPs: with every table's unguarded
// service IP stage emptied (only the main table and the shard that takes
// the Services placed by name have one), a connection to each cluster IP is still
// DNATed to one of its endpoints, in both families: the guard of each
// shard, as the kernel evaluates it on the packet (byte order, IPv6's last
// 32 bits), lets in its own cluster IPs. Without it a wrong guard would
// go unseen, since the unguarded stage serves every service IP too.
func TestShardGuardAloneServesClusterIPs(t *testing.T) {
	testns.RequireRoot(t)
	ctx := context.Background()
	layout := nftgen.TableLayout{Shards: 4, Named: 1}
	for _, fam := range []nftgen.Family{nftgen.FamilyIPv4, nftgen.FamilyIPv6} {
		g, ports := testGenerator("10.244.0.0/16"), guardPorts(false)
		if fam == nftgen.FamilyIPv6 {
			g, ports = testGenerator6(t), guardPorts(true)
		}
		ns, dp := kernelNetlink(t, "nfp-grd")
		rs := g.Ruleset(ports)
		if err := dp.Apply(ctx, nftgen.PlanFullSharded(nftgen.SplitRuleset(rs, layout, g.ShardTops(layout), g.ShardMaps()), nil, nil)); err != nil {
			t.Fatalf("%s: %v", fam, err)
		}
		ns.MustRun(t, "nft", "flush", "chain", string(fam), nftgen.TableName, nftgen.ChainNATOutput)
		for i := 1; i <= layout.Named; i++ {
			ns.MustRun(t, "nft", "flush", "chain", string(fam), nftgen.ShardTable(i), nftgen.ChainNATOutput)
		}
		routeOut(t, ns)
		for _, p := range ports {
			vip := p.ClusterIPs[0]
			if err := ns.Do(func() error { return sendSYN(netip.AddrPortFrom(vip, p.Port)) }); err != nil {
				t.Fatal(err)
			}
		}
		dnat := dnatOf(t, ns)
		for _, p := range ports {
			vip := p.ClusterIPs[0]
			got, ok := dnat[vip]
			if !ok {
				t.Errorf("%s: the connection to %s (shard %d) was not DNATed", fam, vip, layout.ShardOf(nftgen.ClusterIPPlace(vip)))
				continue
			}
			if got != p.Endpoints[0].Addr {
				t.Errorf("%s: the connection to %s went to %s, want %s", fam, vip, got, p.Endpoints[0].Addr)
			}
		}
	}
}

// guardPorts returns 12 one-endpoint service ports whose cluster IPs fall in
// every shard of four, three times over.
func guardPorts(v6 bool) []svcmodel.ServicePortState {
	var out []svcmodel.ServicePortState
	for i := range 12 {
		vip, ep := fmt.Sprintf("10.96.7.%d", 20+i), fmt.Sprintf("10.244.7.%d:8080", 20+i)
		if v6 {
			vip, ep = fmt.Sprintf("fd00:10:96::7:%x", 0x20+i), fmt.Sprintf("[fd00:10:244::7:%x]:8080", 0x20+i)
		}
		out = append(out, nftgentest.Port("guard", fmt.Sprintf("s%d", i), 80, vip, ep))
	}
	return out
}

// routeOut gives the namespace a way out for both families: a veth whose
// peer stays in the namespace and a default route through a neighbour
// that does not exist, so that a SYN leaves through the nat output hook
// and goes nowhere.
func routeOut(t *testing.T, ns *testns.NS) {
	t.Helper()
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "va", "type", "veth", "peer", "name", "vb"},
		{"link", "set", "va", "up"},
		{"link", "set", "vb", "up"},
		{"addr", "add", "10.98.0.1/24", "dev", "va"},
		{"addr", "add", "fd98::1/64", "dev", "va", "nodad"},
		{"neigh", "add", "10.98.0.2", "lladdr", "02:00:00:00:00:09", "dev", "va", "nud", "permanent"},
		{"neigh", "add", "fd98::2", "lladdr", "02:00:00:00:00:09", "dev", "va", "nud", "permanent"},
		{"route", "add", "default", "via", "10.98.0.2", "dev", "va"},
		{"-6", "route", "add", "default", "via", "fd98::2", "dev", "va"},
	} {
		ns.MustRun(t, "ip", args...)
	}
}

// sendSYN starts a TCP connection to dst and gives up at once: its SYN has
// gone through the nat output hook.
func sendSYN(dst netip.AddrPort) error {
	c, err := net.DialTimeout("tcp", dst.String(), 20*time.Millisecond)
	if err == nil {
		c.Close()
		return fmt.Errorf("%s answered; nothing should", dst)
	}
	return nil
}

// dnatOf returns, for each connection conntrack holds in ns, the address
// its original destination was translated to.
func dnatOf(t *testing.T, ns *testns.NS) map[netip.Addr]netip.Addr {
	t.Helper()
	f, err := os.Open(ns.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	conn, err := ct.Dial(&netlink.Config{NetNS: int(f.Fd())})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	flows, err := conn.Dump(nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[netip.Addr]netip.Addr{}
	for _, fl := range flows {
		orig, reply := fl.TupleOrig.IP.DestinationAddress.Unmap(), fl.TupleReply.IP.SourceAddress.Unmap()
		if orig != reply {
			out[orig] = reply
		}
	}
	return out
}
