//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// featureCluster is a cluster with local pods a1, a2 (on node-a), "remote"
// pods b1, b2 (endpoints on node-b) and a client pod, each echo server on
// TCP 8080, UDP 5353 and TCP 9000.
func featureCluster(t *testing.T, opts ...clusterOption) (*cluster, map[string]*harness.Pod) {
	c := newCluster(t, opts...)
	pods := map[string]*harness.Pod{}
	for i, name := range []string{"a1", "a2", "b1", "b2"} {
		pods[name] = c.AddPod(name, harness.PodIP(i+1), []int{8080, 9000}, []int{5353})
	}
	pods["client"] = c.AddPod("client", harness.PodIP(100), nil, nil)
	return c, pods
}

func ips(pods map[string]*harness.Pod, names ...string) []harness.EP {
	var out []harness.EP
	for _, n := range names {
		node := harness.LocalNode
		if strings.HasPrefix(n, "b") {
			node = harness.RemoteNode
		}
		out = append(out, harness.EP{IP: pods[n].IP.String(), Node: node})
	}
	return out
}

func ips6(pods map[string]*harness.Pod, names ...string) []harness.EP {
	out := ips(pods, names...)
	for i, n := range names {
		out[i].IP = pods[n].IP6.String()
	}
	return out
}

// TestMixedServicesFromEveryVantagePoint programs 15 Services that mix every
// feature of iptables mode and probes each from a pod, the node itself and
// an external host, checking which endpoints answer, which source address
// they see, and whether the client is refused or dropped otherwise.
func TestMixedServicesFromEveryVantagePoint(t *testing.T) {
	c, pods := featureCluster(t)
	http := []harness.PortSpec{httpPort}
	add := func(svc *v1.Service, eps ...harness.EP) {
		c.store.SetService(svc)
		if len(eps) > 0 {
			c.store.SetEndpointSlice(harness.SliceOf(svc.Namespace, svc.Name, svc.Name+"-v4", []harness.PortSpec{httpPort, dnsPort, {Name: "sctp", Protocol: v1.ProtocolSCTP, Port: 9000, Target: 9000}}, eps...))
		}
	}
	svc := func(name, ip string, mut ...func(*v1.Service)) *v1.Service {
		return harness.With(harness.ClusterIPService("mix", name, ip, http...), mut...)
	}
	add(svc("cluster-ip", "10.96.0.60"), ips(pods, "a1", "b1")...)
	add(svc("no-endpoints", "10.96.0.61", harness.NodePorts(30061), harness.ExternalIPs("198.51.100.61")))
	add(svc("nodeport", "10.96.0.62", harness.NodePorts(30062)), ips(pods, "a1", "b1")...)
	add(svc("nodeport-local", "10.96.0.63", harness.LoadBalancer(""), harness.NodePorts(30063), harness.ExternalLocal(32063)), ips(pods, "a1", "b1")...)
	add(svc("nodeport-local-none", "10.96.0.64", harness.LoadBalancer(""), harness.NodePorts(30064), harness.ExternalLocal(32064)), ips(pods, "b1")...)
	add(svc("external-ip", "10.96.0.65", harness.ExternalIPs("198.51.100.65")), ips(pods, "a1", "b1")...)
	add(svc("lb-ranges", "10.96.0.66", harness.LoadBalancer("203.0.113.66", "192.0.2.0/24"), harness.NodePorts(30066)), ips(pods, "a1")...)
	add(svc("internal-local", "10.96.0.67", harness.InternalLocal), ips(pods, "a1", "b1")...)
	add(svc("internal-local-none", "10.96.0.68", harness.InternalLocal), ips(pods, "b1")...)
	add(svc("affinity", "10.96.0.69", harness.Affinity(600)), ips(pods, "a1", "a2", "b1")...)
	term := ips(pods, "a2", "b2")
	term[0].NotReady, term[0].Terminating = true, true
	term[1].NotReady = true
	add(svc("terminating", "10.96.0.70"), term...)
	zoned := ips(pods, "a1", "b1")
	zoned[0].Zone, zoned[1].Zone = harness.LocalZone, "zone-b"
	add(svc("topology", "10.96.0.71"), zoned...)
	add(harness.With(harness.ClusterIPService("mix", "udp", "10.96.0.72", dnsPort)), ips(pods, "a1", "b1")...)
	dual := svc("dual-stack", "10.96.0.73", harness.DualStack("fd00:10:96::73"))
	add(dual, ips(pods, "a1", "b1")...)
	c.store.SetEndpointSlice(harness.SliceOf("mix", "dual-stack", "dual-stack-v6", http, ips6(pods, "a1", "b1")...))
	c.store.SetService(harness.With(harness.ClusterIPService("mix", "v6-empty", "fd00:10:96::74", httpPort), func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol} }))
	add(harness.With(harness.ClusterIPService("mix", "sctp", "10.96.0.75", harness.PortSpec{Name: "sctp", Protocol: v1.ProtocolSCTP, Port: 9000, Target: 9000})), ips(pods, "a1")...)
	c.sync()

	pod := vantage{"pod", pods["client"].NS, ""}
	node := vantage{"node", c.Node, ""}
	ext := vantage{"external host", c.External, ""}
	ext2 := vantage{"external host (other range)", c.External, harness.ExternalIP2}
	clientIP, clientIP6 := pods["client"].IP.String(), pods["client"].IP6.String()
	ok := func(source string, servers ...string) expect {
		return expect{outcome: answered, servers: servers, source: source}
	}
	refuse, drop := expect{outcome: refused}, expect{outcome: dropped}
	np := func(port int) string { return fmt.Sprintf("%s:%d", harness.NodeIP, port) }

	type probe struct {
		service string
		from    vantage
		addr    string
		want    expect
	}
	probes := []probe{
		{"cluster-ip", pod, "10.96.0.60:80", ok(clientIP, "a1", "b1")},
		{"cluster-ip", node, "10.96.0.60:80", ok(harness.NodePodSideIP, "a1", "b1")},
		{"cluster-ip", ext, "10.96.0.60:80", ok(harness.NodePodSideIP, "a1", "b1")},
		{"no-endpoints", pod, "10.96.0.61:80", refuse},
		{"no-endpoints", node, "10.96.0.61:80", refuse},
		{"no-endpoints", ext, "10.96.0.61:80", refuse},
		{"no-endpoints", ext, np(30061), refuse},
		{"no-endpoints", ext, "198.51.100.61:80", refuse},
		{"nodeport", pod, np(30062), ok(harness.NodePodSideIP, "a1", "b1")},
		{"nodeport", node, "127.0.0.1:30062", ok(harness.NodePodSideIP, "a1", "b1")},
		{"nodeport", ext, np(30062), ok(harness.NodePodSideIP, "a1", "b1")},
		{"nodeport-local", pod, np(30063), ok(clientIP, "a1", "b1")},
		{"nodeport-local", node, np(30063), ok(harness.NodePodSideIP, "a1", "b1")},
		{"nodeport-local", ext, np(30063), ok(harness.ExternalIP, "a1")},
		{"nodeport-local-none", pod, np(30064), ok(clientIP, "b1")},
		{"nodeport-local-none", node, np(30064), ok(harness.NodePodSideIP, "b1")},
		{"nodeport-local-none", ext, np(30064), drop},
		{"external-ip", pod, "198.51.100.65:80", ok(harness.NodePodSideIP, "a1", "b1")},
		{"external-ip", node, "198.51.100.65:80", ok(harness.NodePodSideIP, "a1", "b1")},
		{"external-ip", ext, "198.51.100.65:80", ok(harness.NodePodSideIP, "a1", "b1")},
		{"lb-ranges", pod, "203.0.113.66:80", drop},
		{"lb-ranges", node, "203.0.113.66:80", ok(harness.NodePodSideIP, "a1")},
		{"lb-ranges", ext, "203.0.113.66:80", ok(harness.NodePodSideIP, "a1")},
		{"lb-ranges", ext2, "203.0.113.66:80", drop},
		{"lb-ranges", ext2, np(30066), ok(harness.NodePodSideIP, "a1")}, // node ports ignore source ranges
		{"internal-local", pod, "10.96.0.67:80", ok(clientIP, "a1")},
		{"internal-local", node, "10.96.0.67:80", ok(harness.NodePodSideIP, "a1")},
		{"internal-local", ext, "10.96.0.67:80", ok(harness.NodePodSideIP, "a1")},
		{"internal-local-none", pod, "10.96.0.68:80", drop},
		{"internal-local-none", node, "10.96.0.68:80", drop},
		{"internal-local-none", ext, "10.96.0.68:80", drop},
		{"affinity", pod, "10.96.0.69:80", expect{outcome: answered, servers: []string{"a1", "a2", "b1"}, source: clientIP, sticky: true}},
		{"affinity", node, "10.96.0.69:80", expect{outcome: answered, servers: []string{"a1", "a2", "b1"}, sticky: true}},
		{"affinity", ext, "10.96.0.69:80", expect{outcome: answered, servers: []string{"a1", "a2", "b1"}, sticky: true}},
		{"terminating", pod, "10.96.0.70:80", ok(clientIP, "a2")},
		{"terminating", node, "10.96.0.70:80", ok(harness.NodePodSideIP, "a2")},
		{"terminating", ext, "10.96.0.70:80", ok(harness.NodePodSideIP, "a2")},
		{"topology", pod, "10.96.0.71:80", ok(clientIP, "a1")},
		{"topology", node, "10.96.0.71:80", ok(harness.NodePodSideIP, "a1")},
		{"topology", ext, "10.96.0.71:80", ok(harness.NodePodSideIP, "a1")},
		{"dual-stack", pod, "[fd00:10:96::73]:80", ok(clientIP6, "a1", "b1")},
		{"dual-stack", node, "[fd00:10:96::73]:80", ok(harness.NodePodSideIP6, "a1", "b1")},
		{"dual-stack", ext, "[fd00:10:96::73]:80", ok(harness.NodePodSideIP6, "a1", "b1")},
		{"dual-stack", pod, "10.96.0.73:80", ok(clientIP, "a1", "b1")},
		{"v6-empty", pod, "[fd00:10:96::74]:80", refuse},
		{"v6-empty", node, "[fd00:10:96::74]:80", refuse},
		{"v6-empty", ext, "[fd00:10:96::74]:80", refuse},
	}
	// After each probe, `nftproxy explain` must predict what its packets
	// did and walk the chains as the kernel's trace shows.
	x := newExplainChecker(t, c, pods)
	for _, p := range probes {
		probeTCP(t, p.service, p.from, p.addr, 20, p.want)
		x.check(t, p.service, p.from, "tcp", p.addr, p.want)
	}
	for _, v := range []vantage{pod, node, ext} {
		want := ok(harness.NodePodSideIP, "a1", "b1")
		if v == pod {
			want = ok(clientIP, "a1", "b1")
		}
		probeUDP(t, "udp", v, "10.96.0.72:53", 20, want)
		x.check(t, "udp", v, "udp", "10.96.0.72:53", want)
	}

	// Health check node ports answer like kube-proxy's, from every vantage.
	for _, v := range []vantage{pod, node, ext} {
		checkHealth(t, v, np(32063), 200, 1, "nodeport-local")
		checkHealth(t, v, np(32064), 503, 0, "nodeport-local-none")
		// The node itself answers them: no DNAT.
		x.check(t, "health check of nodeport-local", v, "tcp", np(32063), expect{outcome: deliveredLocally})
		x.check(t, "health check of nodeport-local-none", v, "tcp", np(32064), expect{outcome: deliveredLocally})
	}
	// SCTP: this kernel has no SCTP sockets, but conntrack and NAT know
	// the protocol; explain's walk is checked against the trace of a raw
	// INIT from every vantage (the DNAT rule is in the trace).
	for _, v := range []vantage{pod, node, ext} {
		x.check(t, "sctp", v, "sctp", "10.96.0.75:9000", expect{outcome: answered, servers: []string{"a1"}})
	}
	if x.traced != len(probes)+3+6+3 {
		t.Errorf("traced %d of %d probes", x.traced, len(probes)+3+6+3)
	}

	// SCTP: no SCTP sockets on this kernel, so check that the kernel holds
	// the right rules.
	table := c.Node.MustRun(t, "nft", "list", "table", "ip", "kube-proxy")
	for _, want := range []string{"10.96.0.75 . sctp . 9000", "meta l4proto sctp dnat to " + pods["a1"].IP.String() + ":9000"} {
		if !strings.Contains(table, want) {
			t.Errorf("kernel table lacks SCTP rule %q", want)
		}
	}
	table6 := c.Node.MustRun(t, "nft", "list", "table", "ip6", "kube-proxy")
	if !strings.Contains(table6, "fd00:10:96::73 . tcp . 80") || !strings.Contains(table6, "fd00:10:96::74 . tcp . 80") {
		t.Errorf("ip6 table lacks the dual-stack or IPv6 Service:\n%s", table6)
	}
}

// checkHealth fetches a health check node port from v.
func checkHealth(t *testing.T, v vantage, addr string, wantCode, wantEndpoints int, service string) {
	t.Helper()
	var conn net.Conn
	conn, err := harness.DialTCP(v.ns, addr, 2*time.Second)
	if err != nil {
		t.Errorf("health check %s from %s: %v", addr, v.name, err)
		return
	}
	client := &http.Client{Transport: &http.Transport{DialContext: oneConn(conn)}, Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + addr + "/")
	if err != nil {
		t.Errorf("health check %s from %s: %v", addr, v.name, err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var got struct {
		Service        struct{ Namespace, Name string }
		LocalEndpoints int
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Errorf("health check %s: body %q: %v", addr, body, err)
		return
	}
	if resp.StatusCode != wantCode || got.LocalEndpoints != wantEndpoints || got.Service.Name != service {
		t.Errorf("health check %s from %s: %d %s, want %d with %d local endpoints of %s", addr, v.name, resp.StatusCode, body, wantCode, wantEndpoints, service)
	}
}
