//go:build linux

package e2e

import (
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
)

// TestSessionAffinityStickUntilTimeout checks ClientIP affinity: a client
// sticks to one endpoint while it keeps coming back within the timeout, and
// picks again once the timeout has passed.
func TestSessionAffinityStickUntilTimeout(t *testing.T) {
	c, pods := featureCluster(t)
	c.store.SetService(harness.With(harness.ClusterIPService("aff", "web", "10.96.0.80", httpPort), harness.Affinity(1)))
	c.store.SetEndpointSlice(harness.SliceOf("aff", "web", "web-1", []harness.PortSpec{httpPort}, ips(pods, "a1", "a2", "b1")...))
	c.sync()
	client := pods["client"].NS
	picks := map[string]bool{}
	for round := 0; round < 10; round++ {
		first := ""
		for i := 0; i < 5; i++ {
			r, err := harness.TCPRequest(client, "10.96.0.80:80", timeout)
			if err != nil {
				t.Fatal(err)
			}
			if first == "" {
				first = r.Server
			} else if r.Server != first {
				t.Fatalf("round %d: connection %d went to %s, want %s (within the affinity timeout)", round, i, r.Server, first)
			}
		}
		picks[first] = true
		time.Sleep(1300 * time.Millisecond) // let the 1 s affinity expire
	}
	if len(picks) < 2 {
		t.Errorf("after 10 expiries the client always went to %v; the choice should be made again", picks)
	}
	t.Logf("endpoints chosen after expiries: %v", picks)
}

// TestUDPConntrackCleanup shows a UDP client that keeps its source port
// staying stuck on a deleted endpoint without the cleanup, and reaching the
// new endpoint with it; and a client that started before the Service had
// endpoints reaching the first one.
func TestUDPConntrackCleanup(t *testing.T) {
	c, pods := featureCluster(t)
	svc := harness.ClusterIPService("udp", "dns", "10.96.0.81", dnsPort)
	c.store.SetService(svc)
	c.store.SetEndpointSlice(harness.SliceOf("udp", "dns", "dns-1", []harness.PortSpec{dnsPort}, ips(pods, "a1")...))
	c.sync()

	// Three clients (three source ports, three conntrack entries with the
	// same destination and reply source): the cleanup must delete all.
	var clients []net.Conn
	for range 3 {
		var conn net.Conn
		if err := pods["client"].NS.Do(func() (err error) { conn, err = net.Dial("udp", "10.96.0.81:53"); return err }); err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		clients = append(clients, conn)
	}
	askOn := func(conn net.Conn) (string, error) {
		_ = conn.SetDeadline(time.Now().Add(time.Second))
		if _, err := conn.Write([]byte("q")); err != nil {
			return "", err
		}
		buf := make([]byte, 256)
		n, err := conn.Read(buf)
		if err != nil {
			return "", err
		}
		r, err := harness.ParseReply(string(buf[:n]))
		return r.Server, err
	}
	ask := func() (string, error) { return askOn(clients[0]) }
	for i, conn := range clients {
		if got, err := askOn(conn); err != nil || got != "a1" {
			t.Fatalf("client %d: first answer from %q (%v), want a1", i, got, err)
		}
	}

	// Move the Service to a2 with the cleanup switched off: the clients'
	// flows still point at a1, which still answers.
	c.conntrack.off = true
	c.store.SetEndpointSlice(harness.SliceOf("udp", "dns", "dns-1", []harness.PortSpec{dnsPort}, ips(pods, "a2")...))
	c.sync()
	if got, _ := ask(); got != "a1" {
		t.Fatalf("without cleanup the client reached %q; the control expects it stuck on a1", got)
	}
	// With the cleanup, the next sync deletes every stale entry.
	c.conntrack.off = false
	c.store.SetService(svc) // mark the Service changed so that it is looked at again
	c.sync()
	for i, conn := range clients {
		if got, err := askOn(conn); err != nil || got != "a2" {
			t.Errorf("after cleanup client %d reached %q (%v), want a2", i, got, err)
		}
	}

	// A flow that started while the Service had no endpoints.
	c.store.DeleteEndpointSlice("udp", "dns-1")
	c.sync()
	if _, err := ask(); err == nil {
		t.Fatal("a Service without endpoints answered")
	}
	c.store.SetEndpointSlice(harness.SliceOf("udp", "dns", "dns-1", []harness.PortSpec{dnsPort}, ips(pods, "b1")...))
	c.sync()
	var got string
	var err error
	for i := 0; i < 3 && got == ""; i++ { // a pending ICMP error may fail one read
		got, err = ask()
	}
	if got != "b1" {
		t.Errorf("after the Service gained an endpoint the client reached %q (%v), want b1", got, err)
	}
}

// TestNodePortAddressesAndLocalhost checks --nodeport-addresses and
// --iptables-localhost-nodeports.
func TestNodePortAddressesAndLocalhost(t *testing.T) {
	run := func(t *testing.T, opt clusterOption, want map[string]bool) {
		c, pods := featureCluster(t, opt)
		c.store.SetService(harness.With(harness.ClusterIPService("np", "web", "10.96.0.82", httpPort), harness.NodePorts(30082)))
		c.store.SetEndpointSlice(harness.SliceOf("np", "web", "web-1", []harness.PortSpec{httpPort}, ips(pods, "a1")...))
		c.sync()
		for addr, served := range want {
			_, err := harness.TCPRequest(c.Node, addr, timeout)
			if served && err != nil {
				t.Errorf("%s: %v, want it served", addr, err)
			}
			if !served && err == nil {
				t.Errorf("%s answered, want it not served", addr)
			}
		}
	}
	t.Run("all addresses", func(t *testing.T) {
		run(t, func(*nftgen.Config) {}, map[string]bool{harness.NodeIP + ":30082": true, harness.NodePodSideIP + ":30082": true, "127.0.0.1:30082": true})
	})
	t.Run("only the node IP", func(t *testing.T) {
		run(t, func(c *nftgen.Config) {
			c.RestrictNodePorts = true
			if c.Family == nftgen.FamilyIPv4 {
				c.NodePortAddresses = []netip.Addr{netip.MustParseAddr(harness.NodeIP)}
			}
		}, map[string]bool{harness.NodeIP + ":30082": true, harness.NodePodSideIP + ":30082": false, "127.0.0.1:30082": false})
	})
	t.Run("no localhost node ports", func(t *testing.T) {
		run(t, func(c *nftgen.Config) { c.LocalhostNodePorts = false },
			map[string]bool{harness.NodeIP + ":30082": true, "127.0.0.1:30082": false})
	})
}

// TestForwardAndFirewallChains checks the filter-side rules that are not
// tied to one Service: the conntrack INVALID drop (absent with
// --conntrack-tcp-be-liberal), KUBE-FORWARD's accepts and the localnet guard.
func TestForwardAndFirewallChains(t *testing.T) {
	for _, liberal := range []bool{false, true} {
		c := newCluster(t, func(cfg *nftgen.Config) { cfg.ConntrackTCPLiberal = liberal })
		c.sync()
		fwd := c.Node.MustRun(t, "nft", "list", "chain", "ip", "kube-proxy", "filter-KUBE-FORWARD")
		if got := strings.Contains(fwd, `ct state invalid counter name "ct_state_invalid_dropped_pkts" drop`); got == liberal {
			t.Errorf("liberal=%v: invalid drop present=%v:\n%s", liberal, got, fwd)
		}
		for _, want := range []string{"meta mark & 0x00004000 != 0x00000000 accept", "ct state established,related accept"} {
			if !strings.Contains(fwd, want) {
				t.Errorf("KUBE-FORWARD lacks %q:\n%s", want, fwd)
			}
		}
		guard := c.Node.MustRun(t, "nft", "list", "chain", "ip", "kube-proxy", "filter-KUBE-FIREWALL")
		if !strings.Contains(guard, "ip daddr 127.0.0.0/8 ip saddr != 127.0.0.0/8") || !strings.Contains(guard, "drop") {
			t.Errorf("localnet guard missing:\n%s", guard)
		}
	}
}

// TestSessionAffinityAboveTheCascade: a ClientIP Service with more
// endpoints than CascadeMaxEndpoints keeps its affinity entries in one set
// keyed "client . endpoint" (not a set per endpoint, which made its cold
// sync quadratic); a client still sticks to the endpoint it first reached,
// and the set holds that one entry.
func TestSessionAffinityAboveTheCascade(t *testing.T) {
	c := newCluster(t)
	n := nftgen.CascadeMaxEndpoints + 20
	wideAffinityService(c, n, 600)
	client := c.AddPod("client", harness.PodIP(100), nil, nil)
	c.sync()
	sets := c.Node.MustRun(t, "nft", "list", "sets", "ip")
	if got := strings.Count(sets, "set "+nftgen.PrefixAffinity); got != 1 {
		t.Fatalf("%d affinity sets for one Service port of %d endpoints, want 1:\n%s", got, n, sets)
	}
	first := ""
	for i := range 20 {
		r, err := harness.TCPRequest(client.NS, "10.96.0.90:80", timeout)
		if err != nil {
			t.Fatal(err)
		}
		if first == "" {
			first = r.Server
		} else if r.Server != first {
			t.Fatalf("connection %d went to %s, want %s (affinity)", i, r.Server, first)
		}
	}
	port := strings.TrimPrefix(first, "wide:")
	set := c.Node.MustRun(t, "nft", "list", "set", "ip", nftgen.TableName, nftgen.PrefixAffinity+nftgen.ServiceChainName(svcmodel.ServicePortName{
		NamespacedName: types.NamespacedName{Namespace: "aff", Name: "wide"}, Port: "http", Protocol: v1.ProtocolTCP}))
	if !strings.Contains(set, harness.PodIP(100)+" . "+harness.PodIP(1)+" . "+port) {
		t.Errorf("the affinity set lacks %s . %s . %s:\n%s", harness.PodIP(100), harness.PodIP(1), port, set)
	}
	t.Logf("20 connections stuck to %s", first)
}

// wideAffinityService adds pod "wide" (PodIP(1)) listening on ports 9000
// and up, and the ClientIP Service aff/wide (10.96.0.90:80) with an
// endpoint on each of n of them: more than CascadeMaxEndpoints keeps its
// affinity entries in one set for the port.
func wideAffinityService(c *cluster, n int, affinitySeconds int32) {
	var ports []int
	for i := range n {
		ports = append(ports, 9000+i)
	}
	c.AddPod("wide", harness.PodIP(1), ports, nil, "-port-in-name")
	svcPort := harness.PortSpec{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, Target: 9000}
	c.store.SetService(harness.With(harness.ClusterIPService("aff", "wide", "10.96.0.90", svcPort), harness.Affinity(affinitySeconds)))
	for i := range n {
		p := svcPort
		p.Target = int32(9000 + i)
		c.store.SetEndpointSlice(harness.Slice("aff", "wide", fmt.Sprintf("wide-%d", i), []harness.PortSpec{p}, harness.PodIP(1)))
	}
}
