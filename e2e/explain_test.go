//go:build linux

package e2e

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"hash/crc32"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/compat/explain"
	"github.com/nftproxy/nftproxy/e2e/testns"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier"
)

// deliveredLocally is the outcome of a connection the node itself answers
// (a health check node port): accepted, no DNAT.
const deliveredLocally = "delivered to the node"

// explainChecker compares nftproxy explain's answer for a probe with what
// the probe's real packets did, and its chain walk with the kernel's own
// trace of one more connection.
type explainChecker struct {
	c      *cluster
	pods   map[string]*harness.Pod
	tr     *tracer
	local  explain.LocalAddrs
	traced int
}

func newExplainChecker(t *testing.T, c *cluster, pods map[string]*harness.Pod) *explainChecker {
	t.Helper()
	x := &explainChecker{c: c, pods: pods, tr: listenTrace(t, c.Node)}
	if err := c.Node.Do(func() (err error) { x.local, err = proxier.LocalAddresses(); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Node.Run("nft", "delete", "table", "inet", "nfp-trace") })
	return x
}

// source is the address a connection from v to dst leaves with.
func (x *explainChecker) source(t *testing.T, v vantage, dst netip.Addr) netip.Addr {
	t.Helper()
	if v.src != "" {
		return netip.MustParseAddr(v.src)
	}
	out := v.ns.MustRun(t, "ip", "route", "get", dst.String())
	f := strings.Fields(out)
	if i := slices.Index(f, "src"); i >= 0 && i+1 < len(f) {
		return netip.MustParseAddr(f[i+1])
	}
	t.Fatalf("no source in %q", out)
	return netip.Addr{}
}

func (x *explainChecker) vantage(v vantage) explain.Vantage {
	switch v.ns {
	case x.c.Node:
		return explain.FromNode
	case x.c.External:
		return explain.FromExternal
	}
	return explain.FromPod
}

// check explains proto from v to addr, compares it with want (what the
// probe's packets did) and with the kernel's trace of one connection.
func (x *explainChecker) check(t *testing.T, label string, v vantage, proto, addr string, want expect) {
	t.Helper()
	dst := netip.MustParseAddrPort(addr)
	src := x.source(t, v, dst.Addr())
	q, err := explain.ParseQuery(string(x.vantage(v)), proto, src.String(), addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := x.c.dp.Read(context.Background(), q.Family())
	if err != nil {
		t.Fatal(err)
	}
	e := explain.Explain(st, q, x.local)
	what := fmt.Sprintf("explain %s from %s (%s) to %s", label, v.name, src, addr)
	var b strings.Builder
	explain.WriteText(&b, e)
	if msg := x.compare(e, want); msg != "" {
		t.Errorf("%s: %s\n%s", what, msg, b.String())
	}
	// The kernel's trace of one more connection walks one of the paths.
	traceFlow(t, x.c.Node, string(q.Family()), proto, src.String(), dst.Addr().String(), dst.Port())
	x.tr.reset()
	switch {
	case proto == "udp":
		harness.UDPRequest(v.ns, addr, dropTimeout)
	case proto == "sctp":
		if err := sendSCTPInit(v.ns, dst); err != nil {
			t.Fatalf("%s: send an SCTP INIT: %v", what, err)
		}
	default:
		if conn, err := harness.DialTCPFrom(v.ns, v.src, addr, dropTimeout); err == nil {
			conn.Close()
		}
	}
	evs := x.tr.firstPacket(100*time.Millisecond, src, dst.Addr(), dst.Port())
	var got []string
	for _, ev := range evs {
		got = append(got, fmt.Sprintf("%s#%d", ev.chain, ev.handle))
	}
	if len(got) == 0 {
		t.Errorf("%s: the kernel traced nothing", what)
		return
	}
	x.traced++
	var walks []string
	for _, p := range e.Paths {
		var walk []string
		for _, s := range p.Steps {
			walk = append(walk, fmt.Sprintf("%s#%d", s.Chain, s.Handle))
		}
		if slices.Equal(walk, got) {
			return
		}
		walks = append(walks, strings.Join(walk, " "))
	}
	t.Errorf("%s: the kernel's trace\n  %s\nis none of explain's paths:\n  %s", what, strings.Join(got, " "), strings.Join(walks, "\n  "))
}

// compare says how e's prediction differs from what the probe saw ("" if
// it does not).
func (x *explainChecker) compare(e *explain.Explanation, want expect) string {
	if want.sticky {
		// The probe's connections left the client an entry in one
		// affinity set, which explain reads from the kernel: one path.
		if len(e.Paths) != 1 || e.Paths[0].AffinityLeft == "" || e.Paths[0].Verdict != explain.Accepted {
			return "want one path, to the endpoint the client's affinity entry names"
		}
		ip := netip.MustParseAddrPort(e.Paths[0].Endpoint).Addr()
		for _, name := range want.servers {
			if x.pods[name].IP == ip || x.pods[name].IP6 == ip {
				return ""
			}
		}
		return fmt.Sprintf("affinity path to %s, not one of %v", ip, want.servers)
	}
	var first []explain.Path
	for _, p := range e.Paths {
		if p.Affinity == "" {
			first = append(first, p)
		}
	}
	if len(first) == 0 {
		return "no path for a first connection"
	}
	if want.outcome == deliveredLocally {
		for _, p := range first {
			if p.Verdict != explain.Accepted || p.Endpoint != "" || p.Delivered != "local" {
				return fmt.Sprintf("a path ends in %s to %q (%s), the node itself answered", p.Verdict, p.Endpoint, p.Delivered)
			}
		}
		return ""
	}
	verdict := map[string]string{answered: explain.Accepted, refused: explain.Rejected, dropped: explain.Dropped}[want.outcome]
	for _, p := range first {
		if p.Verdict != verdict {
			return fmt.Sprintf("a path ends in %s (%s), the packets were %s", p.Verdict, p.Cause, want.outcome)
		}
	}
	if want.outcome != answered {
		return ""
	}
	var servers []string
	for _, name := range want.servers {
		ip := x.pods[name].IP
		if e.Family == nftgen.FamilyIPv6 {
			ip = x.pods[name].IP6
		}
		servers = append(servers, ip.String())
	}
	slices.Sort(servers)
	var eps []string
	for _, ep := range e.Endpoints() {
		eps = append(eps, netip.MustParseAddrPort(ep).Addr().String())
	}
	if !slices.Equal(eps, servers) {
		return fmt.Sprintf("endpoints %v, the packets reached %v", eps, servers)
	}
	if want.source != "" {
		masq := want.source == harness.NodePodSideIP || want.source == harness.NodePodSideIP6
		for _, p := range first {
			if p.Masquerade != masq {
				return fmt.Sprintf("masquerade %v via %s, the server saw source %s", p.Masquerade, p.EndpointChain, want.source)
			}
		}
	}
	return ""
}

// runExplain runs `nftproxy explain -o json` with args and decodes it.
func runExplain(t *testing.T, args ...string) *explain.Explanation {
	t.Helper()
	out, err := exec.Command(nftproxyBinary, append([]string{"explain", "-o", "json"}, args...)...).Output()
	if err != nil {
		t.Fatalf("nftproxy explain %v: %v\n%s", args, err, out)
	}
	var e explain.Explanation
	if err := json.Unmarshal(out, &e); err != nil {
		t.Fatalf("explain output: %v\n%s", err, out)
	}
	return &e
}

// TestExplainCLIAndHTTPFollowTheKernel checks `nftproxy explain` on the
// live table of a namespace, offline on the same objects, after the table
// is tampered with, and over the daemon's metrics address.
func TestExplainCLIAndHTTPFollowTheKernel(t *testing.T) {
	tp := harness.NewTopology(t, echoBinary)
	tp.AddPod("ep1", harness.PodIP(1), []int{8080}, nil)
	tp.AddPod("ep2", harness.PodIP(2), []int{8080}, nil)
	objects := writeObjects(t, t.TempDir(),
		harness.ClusterIPService("demo", "web", "10.96.0.32", httpPort),
		harness.Slice("demo", "web", "web-1", []harness.PortSpec{httpPort}, harness.PodIP(1), harness.PodIP(2)))
	flags := []string{"--objects", objects, "--netns", tp.Node.Path(), "--cluster-cidr", harness.ClusterCIDR}
	if out, err := exec.Command(nftproxyBinary, append([]string{"sync"}, flags...)...).CombinedOutput(); err != nil {
		t.Fatalf("nftproxy sync: %v\n%s", err, out)
	}
	query := []string{"--from", "external", "--src", harness.ExternalIP, "10.96.0.32:80"}
	live := runExplain(t, append([]string{"--netns", tp.Node.Path()}, query...)...)
	want := []string{harness.PodIP(1) + ":8080", harness.PodIP(2) + ":8080"}
	if got := live.Endpoints(); !slices.Equal(got, want) {
		t.Fatalf("live: endpoints %v, want %v", got, want)
	}
	var svcChain string
	for _, p := range live.Paths {
		if p.Probability != 0.5 || !p.Masquerade {
			t.Errorf("live path to %s: probability %v masquerade %v, want 0.5 and masqueraded (external source)", p.Endpoint, p.Probability, p.Masquerade)
		}
		for _, s := range p.Steps {
			if strings.HasPrefix(s.Chain, "KUBE-SVC-") {
				svcChain = s.Chain
			}
			if s.Handle == 0 {
				t.Errorf("live step %s rule %d has no kernel handle", s.Chain, s.Rule)
			}
		}
	}
	// Offline, from the same objects, the same walk (without handles).
	offline := runExplain(t, append(flags, query...)...)
	if len(offline.Paths) != len(live.Paths) {
		t.Fatalf("offline has %d paths, live %d", len(offline.Paths), len(live.Paths))
	}
	for i := range live.Paths {
		a, b := live.Paths[i].Steps, offline.Paths[i].Steps
		if len(a) != len(b) {
			t.Errorf("path %d: %d steps live, %d offline", i, len(a), len(b))
			continue
		}
		for j := range a {
			if a[j].Chain != b[j].Chain || a[j].NFT != b[j].NFT || !slices.Equal(a[j].Iptables, b[j].Iptables) {
				t.Errorf("path %d step %d: live %+v, offline %+v", i, j, a[j], b[j])
			}
		}
	}

	// A flushed service chain: the packet leaves unchanged, and indeed no
	// endpoint answers.
	tp.Node.MustRun(t, "nft", "flush", "chain", "ip", "kube-proxy", svcChain)
	flushed := runExplain(t, append([]string{"--netns", tp.Node.Path()}, query...)...)
	if len(flushed.Paths) != 1 || flushed.Paths[0].Endpoint != "" || flushed.Paths[0].Verdict != explain.Accepted {
		t.Errorf("flushed %s: paths %+v, want one accepted without DNAT", svcChain, flushed.Paths)
	}
	if r, err := harness.TCPRequest(tp.External, "10.96.0.32:80", 500*time.Millisecond); err == nil {
		t.Errorf("after the flush, %s still answered", r.Server)
	}
	// A removed map element: not a Service any more.
	if out, err := exec.Command(nftproxyBinary, append([]string{"sync"}, flags...)...).CombinedOutput(); err != nil {
		t.Fatalf("nftproxy sync: %v\n%s", err, out)
	}
	tp.Node.MustRun(t, "nft", "delete", "element", "ip", "kube-proxy", "service-ips", "{ 10.96.0.32 . tcp . 80 }")
	removed := runExplain(t, append([]string{"--netns", tp.Node.Path()}, query...)...)
	if len(removed.Endpoints()) != 0 || slices.ContainsFunc(removed.Paths[0].Steps, func(s explain.Step) bool { return s.Chain == svcChain }) {
		t.Errorf("removed element: %+v", removed.Paths)
	}

	// Over HTTP on the daemon's metrics address, after it repaired the
	// table.
	logPath := filepath.Join(t.TempDir(), "nftproxy.log")
	startNftproxy(t, logPath, flags...)
	url := "http://127.0.0.1:10249/explain?dst=10.96.0.32:80&from=external&src=" + harness.ExternalIP + "&output=json"
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("nftproxy log:\n%s", b)
		}
	})
	var body string
	eventually(t, "GET /explain on the repaired table", 10*time.Second, func() error {
		code, b, err := httpGetStatus(tp.Node, url)
		if err != nil {
			return err
		}
		if code != 200 || !strings.Contains(b, svcChain) {
			return errorf("%d %q", code, b)
		}
		body = b
		return nil
	})
	var e explain.Explanation
	if err := json.Unmarshal([]byte(body), &e); err != nil || !slices.Equal(e.Endpoints(), want) {
		t.Fatalf("GET /explain: %v %q, want endpoints %v", err, body, want)
	}
	code, b, err := httpGetStatus(tp.Node, "http://127.0.0.1:10249/explain?dst=10.96.0.32")
	if err != nil || code != 400 || !strings.Contains(b, "IP:PORT") {
		t.Errorf("GET /explain with a bad destination: %d %q %v, want 400 naming IP:PORT", code, b, err)
	}
}

// sendSCTPInit sends one SCTP INIT chunk from ns to dst through a raw
// socket (this kernel has no SCTP sockets, but conntrack and NAT know the
// protocol): the first packet of an SCTP association, for the trace.
func sendSCTPInit(ns *testns.NS, dst netip.AddrPort) error {
	pkt := make([]byte, 32)
	binary.BigEndian.PutUint16(pkt[0:], 40000)      // source port
	binary.BigEndian.PutUint16(pkt[2:], dst.Port()) // destination port
	// Verification tag 0 (an INIT), checksum at 8..12, then the chunk.
	pkt[12], pkt[13] = 1, 0 // INIT, no flags
	binary.BigEndian.PutUint16(pkt[14:], 20)
	binary.BigEndian.PutUint32(pkt[16:], 0x5eed1234) // initiate tag
	binary.BigEndian.PutUint32(pkt[20:], 65535)      // a_rwnd
	binary.BigEndian.PutUint16(pkt[24:], 1)          // outbound streams
	binary.BigEndian.PutUint16(pkt[26:], 1)          // inbound streams
	binary.BigEndian.PutUint32(pkt[28:], 1)          // initial TSN
	binary.LittleEndian.PutUint32(pkt[8:], crc32.Checksum(pkt, crc32.MakeTable(crc32.Castagnoli)))
	return ns.Do(func() error {
		fam, sa := syscall.AF_INET, syscall.Sockaddr(&syscall.SockaddrInet4{Addr: dst.Addr().As4()})
		if dst.Addr().Is6() {
			fam, sa = syscall.AF_INET6, &syscall.SockaddrInet6{Addr: dst.Addr().As16()}
		}
		fd, err := syscall.Socket(fam, syscall.SOCK_RAW, syscall.IPPROTO_SCTP)
		if err != nil {
			return err
		}
		defer syscall.Close(fd)
		return syscall.Sendto(fd, pkt, 0, sa)
	})
}
