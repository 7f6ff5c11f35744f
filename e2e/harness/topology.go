//go:build linux

package harness

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/e2e/testns"
)

// Addresses of the topology. Every link is dual-stack.
const (
	NodePodSideIP = "10.244.0.1"
	ClusterCIDR   = "10.244.0.0/16"
	NodeIP        = "192.0.2.1"
	ExternalIP    = "192.0.2.2"
	// ExternalIP2 is a second address of the external host, outside
	// 192.0.2.0/24, for load balancer source range tests.
	ExternalIP2 = "198.18.0.2"
	ServiceCIDR = "10.96.0.0/12"
	// ExternalNet holds the external IPs and load balancer IPs that the
	// tests give Services; the external host routes it via the node.
	ExternalNet = "198.51.100.0/24"
	LBNet       = "203.0.113.0/24"

	NodePodSideIP6 = "fd00:10:244::1"
	ClusterCIDR6   = "fd00:10:244::/64"
	NodeIP6        = "2001:db8:2::1"
	ExternalIP6    = "2001:db8:2::2"
	ServiceCIDR6   = "fd00:10:96::/108"
)

// Topology is a node, its pods and an external host.
type Topology struct {
	Node     *testns.NS
	External *testns.NS
	Pods     map[string]*Pod
	echo     string
	t        testns.T
	nextVeth int
}

// Pod is a pod namespace running the echo server.
type Pod struct {
	Name string
	NS   *testns.NS
	IP   netip.Addr
	IP6  netip.Addr
}

// NewTopology creates the node and the external host. echoBinary is the
// path of the built echo server.
// A test that is not root is skipped.
func NewTopology(t testns.T, echoBinary string) *Topology {
	t.Helper()
	if tb, ok := t.(testing.TB); ok {
		testns.RequireRoot(tb)
	}
	tp := &Topology{t: t, echo: echoBinary, Pods: map[string]*Pod{}}
	tp.Node = testns.New(t, "nfp-node")
	tp.External = testns.New(t, "nfp-ext")
	tp.Node.MustRun(t, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	// The external host's packets to a cluster IP without endpoints are
	// routed back out the interface they came in on. The kernel then sends
	// an ICMP redirect, and redirects share the per-host token bucket with
	// ICMP errors, so the reject's port-unreachable would be rate-limited
	// (the same happens to iptables' REJECT). Routers do not send redirects.
	tp.Node.MustRun(t, "sysctl", "-qw", "net.ipv4.conf.all.send_redirects=0")
	tp.Node.MustRun(t, "sysctl", "-qw", "net.ipv4.conf.default.send_redirects=0")
	tp.Node.MustRun(t, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	tp.link(tp.External, "ext0")
	tp.Node.MustRun(t, "ip", "addr", "add", NodeIP+"/24", "dev", "ext0")
	tp.Node.MustRun(t, "ip", "link", "set", "ext0", "up")
	tp.Node.MustRun(t, "ip", "route", "add", "default", "via", ExternalIP)
	tp.External.MustRun(t, "ip", "addr", "add", ExternalIP+"/24", "dev", "eth0")
	tp.External.MustRun(t, "ip", "link", "set", "eth0", "up")
	tp.External.MustRun(t, "ip", "route", "add", ServiceCIDR, "via", NodeIP)
	tp.External.MustRun(t, "ip", "route", "add", ClusterCIDR, "via", NodeIP)
	tp.External.MustRun(t, "ip", "route", "add", ExternalNet, "via", NodeIP)
	tp.External.MustRun(t, "ip", "route", "add", LBNet, "via", NodeIP)
	tp.External.MustRun(t, "ip", "addr", "add", ExternalIP2+"/32", "dev", "eth0")
	tp.Node.MustRun(t, "ip", "route", "add", ExternalIP2+"/32", "via", ExternalIP)
	// IPv6.
	tp.Node.MustRun(t, "ip", "-6", "addr", "add", NodeIP6+"/64", "dev", "ext0", "nodad")
	tp.Node.MustRun(t, "ip", "-6", "route", "add", "default", "via", ExternalIP6)
	tp.External.MustRun(t, "ip", "-6", "addr", "add", ExternalIP6+"/64", "dev", "eth0", "nodad")
	tp.External.MustRun(t, "ip", "-6", "route", "add", ServiceCIDR6, "via", NodeIP6)
	tp.External.MustRun(t, "ip", "-6", "route", "add", ClusterCIDR6, "via", NodeIP6)
	return tp
}

// link creates a veth pair: nodeSide in the node, eth0 in other.
func (tp *Topology) link(other *testns.NS, nodeSide string) {
	tp.Node.MustRun(tp.t, "ip", "link", "add", nodeSide, "type", "veth", "peer", "name", "eth0", "netns", other.Name)
}

// AddPod creates a pod namespace with address ip, wires it to the node and
// starts the echo server on the given TCP and UDP ports, with echoFlags.
func (tp *Topology) AddPod(name, ip string, tcpPorts, udpPorts []int, echoFlags ...string) *Pod {
	t := tp.t
	t.Helper()
	p := &Pod{Name: name, NS: testns.New(t, "nfp-pod"), IP: netip.MustParseAddr(ip)}
	tp.nextVeth++
	veth := fmt.Sprintf("vp%d", tp.nextVeth)
	tp.link(p.NS, veth)
	tp.Node.MustRun(t, "ip", "addr", "add", NodePodSideIP+"/32", "dev", veth)
	tp.Node.MustRun(t, "ip", "link", "set", veth, "up")
	tp.Node.MustRun(t, "ip", "route", "add", ip+"/32", "dev", veth)
	p.NS.MustRun(t, "ip", "addr", "add", ip+"/32", "dev", "eth0")
	p.NS.MustRun(t, "ip", "link", "set", "eth0", "up")
	p.NS.MustRun(t, "ip", "route", "add", NodePodSideIP, "dev", "eth0")
	p.NS.MustRun(t, "ip", "route", "add", "default", "via", NodePodSideIP)
	// IPv6: fd00:10:244::<last byte of the IPv4 address>.
	p.IP6 = netip.MustParseAddr(fmt.Sprintf("fd00:10:244::%x", p.IP.As4()[3]))
	tp.Node.MustRun(t, "ip", "-6", "addr", "add", NodePodSideIP6+"/128", "dev", veth, "nodad")
	tp.Node.MustRun(t, "ip", "-6", "route", "add", p.IP6.String()+"/128", "dev", veth)
	p.NS.MustRun(t, "ip", "-6", "addr", "add", p.IP6.String()+"/128", "dev", "eth0", "nodad")
	p.NS.MustRun(t, "ip", "-6", "route", "add", NodePodSideIP6, "dev", "eth0")
	p.NS.MustRun(t, "ip", "-6", "route", "add", "default", "via", NodePodSideIP6)

	cmd := p.NS.Command(tp.echo, append([]string{"-name", name, "-tcp", joinInts(tcpPorts), "-udp", joinInts(udpPorts)}, echoFlags...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start echo server in %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("unexpected output %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("echo server in %s: %v", name, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("echo server in %s did not start", name)
	}
	tp.Pods[name] = p
	return p
}

func joinInts(ports []int) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ",")
}

// Reply is what the echo server answered.
type Reply struct {
	// Server is the name of the pod that answered.
	Server string
	// Source is the client address the server saw.
	Source netip.AddrPort
}

// ParseReply parses one answer line of the echo server.
func ParseReply(line string) (Reply, error) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return Reply{}, fmt.Errorf("short reply %q", line)
	}
	src, err := netip.ParseAddrPort(f[1])
	if err != nil {
		return Reply{}, fmt.Errorf("reply %q: %w", line, err)
	}
	return Reply{Server: f[0], Source: src}, nil
}

// DialTCP opens a TCP connection from inside ns.
func DialTCP(ns *testns.NS, addr string, timeout time.Duration) (net.Conn, error) {
	return DialTCPFrom(ns, "", addr, timeout)
}

// DialTCPFrom opens a TCP connection from inside ns with source address
// src (any when empty).
func DialTCPFrom(ns *testns.NS, src, addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	if src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	var c net.Conn
	err := ns.Do(func() error {
		var err error
		c, err = d.Dial("tcp", addr)
		return err
	})
	return c, err
}

// Exchange sends one line on c and reads the reply.
func Exchange(c net.Conn, msg string, timeout time.Duration) (Reply, error) {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(c, "%s\n", msg); err != nil {
		return Reply{}, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return Reply{}, err
	}
	return ParseReply(line)
}

// TCPRequest connects from ns to addr, exchanges one line and closes.
func TCPRequest(ns *testns.NS, addr string, timeout time.Duration) (Reply, error) {
	c, err := DialTCP(ns, addr, timeout)
	if err != nil {
		return Reply{}, err
	}
	defer c.Close()
	return Exchange(c, "hello", timeout)
}

// UDPRequest sends one datagram from a new socket in ns to addr and reads
// the reply. Each call uses a new source port, so it is a new conntrack
// entry and a new endpoint choice.
func UDPRequest(ns *testns.NS, addr string, timeout time.Duration) (Reply, error) {
	var c net.Conn
	if err := ns.Do(func() error {
		var err error
		c, err = net.Dial("udp", addr)
		return err
	}); err != nil {
		return Reply{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("hello")); err != nil {
		return Reply{}, err
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		return Reply{}, err
	}
	return ParseReply(string(buf[:n]))
}

// BuildBinary builds a package of this module into dir and returns the
// binary's path.
func BuildBinary(dir, pkg string) (string, error) {
	out := dir + "/" + pkg[strings.LastIndex(pkg, "/")+1:]
	cmd := exec.Command("go", "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w: %s", pkg, err, b)
	}
	return out, nil
}
