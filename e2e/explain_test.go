//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nftproxy/nftproxy/compat/explain"
	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier"
)

// explainChecker compares nftproxy explain's answer for a probe with what
// the probe's real packets did, and its chain walk with the kernel's own
// trace of one more connection.
type explainChecker struct {
	c      *cluster
	pods   map[string]*Pod
	tr     *tracer
	local  explain.LocalAddrs
	traced int
}

func newExplainChecker(t *testing.T, c *cluster, pods map[string]*Pod) *explainChecker {
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
	if proto == "udp" {
		UDPRequest(v.ns, addr, dropTimeout)
	} else if conn, err := DialTCPFrom(v.ns, v.src, addr, dropTimeout); err == nil {
		conn.Close()
	}
	evs := x.tr.firstPacket(100 * time.Millisecond)
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
	var first []explain.Path
	for _, p := range e.Paths {
		if p.Affinity == "" {
			first = append(first, p)
		}
	}
	if len(first) == 0 {
		return "no path for a first connection"
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
		masq := want.source == NodePodSideIP || want.source == NodePodSideIP6
		for _, p := range first {
			if p.Masquerade != masq {
				return fmt.Sprintf("masquerade %v via %s, the server saw source %s", p.Masquerade, p.EndpointChain, want.source)
			}
		}
	}
	return ""
}
