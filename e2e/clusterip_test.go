//go:build linux

package e2e

import (
	"errors"
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"maps"
	"slices"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/e2e/testns"
)

const timeout = 3 * time.Second

var (
	httpPort = harness.PortSpec{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, Target: 8080}
	dnsPort  = harness.PortSpec{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, Target: 5353}
	both     = []harness.PortSpec{httpPort, dnsPort}
)

// chiSquareUniform returns the chi-square statistic of counts against a
// uniform distribution over want categories.
func chiSquareUniform(counts map[string]int, want int, total int) float64 {
	exp := float64(total) / float64(want)
	var chi float64
	for _, c := range counts {
		d := float64(c) - exp
		chi += d * d / exp
	}
	// Categories that never answered count too.
	chi += float64(want-len(counts)) * exp
	return chi
}

func TestClusterIPSpreadsOverAllEndpoints(t *testing.T) {
	c := newCluster(t)
	var ips []string
	for i := 1; i <= 3; i++ {
		c.AddPod(fmt.Sprintf("ep%d", i), harness.PodIP(i), []int{8080}, []int{5353})
		ips = append(ips, harness.PodIP(i))
	}
	client := c.AddPod("client", harness.PodIP(100), nil, nil)
	c.store.SetService(harness.ClusterIPService("demo", "echo", "10.96.0.10", both...))
	c.store.SetEndpointSlice(harness.Slice("demo", "echo", "echo-1", both, ips...))
	c.sync()

	// 600 draws show a cascade that picks 1/3, 2/9, 4/9 instead of thirds
	// (chi-square about 44 against a critical value of 30).
	const n = 600
	crit := chiSquareCritical(2)
	for _, proto := range []string{"tcp", "udp"} {
		counts := map[string]int{}
		for i := 0; i < n; i++ {
			var r harness.Reply
			var err error
			if proto == "tcp" {
				r, err = harness.TCPRequest(client.NS, "10.96.0.10:80", timeout)
			} else {
				r, err = harness.UDPRequest(client.NS, "10.96.0.10:53", timeout)
			}
			if err != nil {
				t.Fatalf("%s request %d: %v", proto, i, err)
			}
			counts[r.Server]++
		}
		chi := chiSquareUniform(counts, 3, n)
		t.Logf("%s: %d connections split %v, chi-square %.2f (p > 1e-6 below %.2f)", proto, n, counts, chi, crit)
		if len(counts) != 3 {
			t.Errorf("%s: answered by %v, want all 3 endpoints", proto, slices.Sorted(maps.Keys(counts)))
		}
		if chi > crit {
			t.Errorf("%s: split %v is not uniform: chi-square %.2f > %.2f", proto, counts, chi, crit)
		}
	}
}

func TestClusterIPSourceAddresses(t *testing.T) {
	c := newCluster(t)
	a := c.AddPod("a", harness.PodIP(1), []int{8080}, nil)
	b := c.AddPod("b", harness.PodIP(2), []int{8080}, nil)
	c.store.SetService(harness.ClusterIPService("demo", "only-a", "10.96.0.11", httpPort))
	c.store.SetEndpointSlice(harness.Slice("demo", "only-a", "only-a-1", []harness.PortSpec{httpPort}, a.IP.String()))
	c.sync()

	checkSources(t, "10.96.0.11:80", "a", []sourceCase{
		// Hairpin: a pod that reaches itself through its Service sees the node.
		{"hairpin pod", a.NS, harness.NodePodSideIP},
		// Inside the cluster CIDR the pod's own address is kept.
		{"other pod", b.NS, b.IP.String()},
		// The node's own traffic and traffic from outside the cluster CIDR
		// are masqueraded.
		{"node", c.Node, harness.NodePodSideIP},
		{"external host", c.External, harness.NodePodSideIP},
	})
}

// sourceCase is a client of a Service and the source its server should
// see.
type sourceCase struct {
	name       string
	from       *testns.NS
	wantSource string
}

// checkSources connects from each case's client to addr and checks that
// server answers and sees the case's source.
func checkSources(t *testing.T, addr, server string, cases []sourceCase) {
	t.Helper()
	for _, tc := range cases {
		r, err := harness.TCPRequest(tc.from, addr, timeout)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := r.Source.Addr().String(); r.Server != server || got != tc.wantSource {
			t.Errorf("%s: answered by %s, source %s; want %s and %s", tc.name, r.Server, got, server, tc.wantSource)
		}
	}
}

func TestClusterIPWithoutEndpointsIsRefused(t *testing.T) {
	c := newCluster(t)
	client := c.AddPod("client", harness.PodIP(100), nil, nil)
	c.store.SetService(harness.ClusterIPService("demo", "empty", "10.96.0.12", both...))
	c.sync()

	vantage := []struct {
		name string
		tcp  func() error
		udp  func() error
	}{
		{"pod", func() error { _, err := harness.DialTCP(client.NS, "10.96.0.12:80", timeout); return err },
			func() error { _, err := harness.UDPRequest(client.NS, "10.96.0.12:53", timeout); return err }},
		{"node", func() error { _, err := harness.DialTCP(c.Node, "10.96.0.12:80", timeout); return err },
			func() error { _, err := harness.UDPRequest(c.Node, "10.96.0.12:53", timeout); return err }},
		{"external host", func() error { _, err := harness.DialTCP(c.External, "10.96.0.12:80", timeout); return err },
			func() error { _, err := harness.UDPRequest(c.External, "10.96.0.12:53", timeout); return err }},
	}
	for _, v := range vantage {
		start := time.Now()
		err := v.tcp()
		elapsed := time.Since(start)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s: TCP connect to a Service without endpoints: %v, want connection refused", v.name, err)
		}
		if elapsed > time.Second {
			t.Errorf("%s: refusal took %v, want it at once", v.name, elapsed)
		}
		// For the node's own UDP the rejected packet never leaves the
		// output hook, so the send fails with EPERM, exactly as under
		// iptables' REJECT; elsewhere the ICMP error arrives as ECONNREFUSED.
		if err := v.udp(); !errors.Is(err, syscall.ECONNREFUSED) && !(v.name == "node" && errors.Is(err, syscall.EPERM)) {
			t.Errorf("%s: UDP to a Service without endpoints: %v, want port unreachable (connection refused)", v.name, err)
		}
	}
}

func TestClusterIPScalingKeepsEstablishedConnections(t *testing.T) {
	c := newCluster(t)
	pods := map[string]string{}
	for i := 1; i <= 5; i++ {
		name := fmt.Sprintf("ep%d", i)
		c.AddPod(name, harness.PodIP(i), []int{8080}, nil)
		pods[name] = harness.PodIP(i)
	}
	client := c.AddPod("client", harness.PodIP(100), nil, nil)
	svc := harness.ClusterIPService("demo", "scale", "10.96.0.13", httpPort)
	c.store.SetService(svc)
	setEndpoints := func(names ...string) {
		var ips []string
		for _, n := range names {
			ips = append(ips, pods[n])
		}
		c.store.SetEndpointSlice(harness.Slice("demo", "scale", "scale-1", []harness.PortSpec{httpPort}, ips...))
	}
	setEndpoints("ep1", "ep2", "ep3")
	if res := c.sync(); !res.Full {
		t.Fatalf("first sync was not a full sync")
	}

	held, err := harness.DialTCP(client.NS, "10.96.0.13:80", timeout)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	first, err := harness.Exchange(held, "held", timeout)
	if err != nil {
		t.Fatal(err)
	}
	keep := first.Server
	others := []string{}
	for _, n := range []string{"ep1", "ep2", "ep3", "ep4", "ep5"} {
		if n != keep {
			others = append(others, n)
		}
	}
	stages := [][]string{
		{"ep1", "ep2", "ep3", "ep4", "ep5"},
		{keep},
		{keep, others[0], others[1]},
	}
	for i, stage := range stages {
		setEndpoints(stage...)
		res := c.sync()
		if res.Full {
			t.Errorf("stage %d: sync rewrote the whole table, want an incremental sync", i)
		}
		r, err := harness.Exchange(held, fmt.Sprintf("held-%d", i), timeout)
		if err != nil {
			t.Fatalf("stage %d (%v): held connection broke: %v", i, stage, err)
		}
		if r.Server != keep {
			t.Errorf("stage %d: held connection answered by %s, want %s", i, r.Server, keep)
		}
		seen := map[string]int{}
		for j := 0; j < 20*len(stage); j++ {
			r, err := harness.TCPRequest(client.NS, "10.96.0.13:80", timeout)
			if err != nil {
				t.Fatalf("stage %d: new connection %d: %v", i, j, err)
			}
			seen[r.Server]++
		}
		got := slices.Sorted(maps.Keys(seen))
		want := slices.Sorted(slices.Values(stage))
		if !slices.Equal(got, want) {
			t.Errorf("stage %d: new connections went to %v, want exactly %v", i, got, want)
		}
		t.Logf("stage %d: %d endpoints, split %v, %d operations", i, len(stage), seen, res.Ops)
	}
}

func TestDeletingServiceRemovesOnlyItsRules(t *testing.T) {
	c := newCluster(t)
	c.AddPod("ep1", harness.PodIP(1), []int{8080}, nil)
	c.store.SetService(harness.ClusterIPService("demo", "stays", "10.96.0.14", httpPort))
	c.store.SetEndpointSlice(harness.Slice("demo", "stays", "stays-1", []harness.PortSpec{httpPort}, harness.PodIP(1)))
	c.store.SetService(harness.ClusterIPService("demo", "empty", "10.96.0.15", httpPort))
	c.sync()
	before := c.Node.MustRun(t, "nft", "list", "table", "ip", "kube-proxy")

	c.store.SetService(harness.ClusterIPService("demo", "goes", "10.96.0.16", both...))
	c.store.SetEndpointSlice(harness.Slice("demo", "goes", "goes-1", both, harness.PodIP(1)))
	c.sync()
	during := c.Node.MustRun(t, "nft", "list", "table", "ip", "kube-proxy")
	if during == before {
		t.Fatal("adding a Service did not change the table")
	}

	c.store.DeleteService(types.NamespacedName{Namespace: "demo", Name: "goes"})
	c.store.DeleteEndpointSlice("demo", "goes-1")
	c.sync()
	after := c.Node.MustRun(t, "nft", "list", "table", "ip", "kube-proxy")
	if after != before {
		t.Errorf("table after deleting the Service differs from before adding it.\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if _, err := harness.TCPRequest(c.Node, "10.96.0.14:80", timeout); err != nil {
		t.Errorf("the remaining Service stopped working: %v", err)
	}
}
