package nftgen

import (
	"net/netip"
	"slices"
	"strings"
	"time"
)

// HandoverBuckets is how many random buckets the handover's DNAT map keys
// per destination: a connection picks bucket "numgen random mod
// HandoverBuckets", and the buckets of a destination with n endpoints hold
// them in turn. Each endpoint is chosen with probability within 1/16 of 1/n
// (exactly 1/n when n divides 16); a destination with more than 16
// endpoints uses its first 16. The handover serves for the seconds until
// the next proxy's first sync, where one map and one rule per hook, quick
// to write at scale (no chain per Service), matter more than exact shares.
const HandoverBuckets = 16

// HandoverSpec is what a stopping nftproxy leaves in its handover table
// (Dataplane.WriteHandover) for the proxy that starts next: kube-proxy, in a
// rollback, deletes nftproxy's table at its start and programs its own rules
// only after it has read the API server, seconds later. Until then the
// handover DNATs a new connection to a destination of nftproxy's table to
// one of the endpoints nftproxy last programmed for it, and holds (drops, so
// that the client retransmits) one it cannot serve. Its chains come after
// iptables' NAT and filter chains, so a destination kube-proxy has
// programmed is kube-proxy's: netfilter consults a later NAT chain only
// while no earlier one has bound the connection.
type HandoverSpec struct {
	// TTL is how long each element lives; when they have expired the
	// handover matches nothing.
	TTL time.Duration
	// MasqueradeBit is the mark bit (KUBE-MARK-MASQ's) that the handover's
	// DNAT sets, and whose connections its postrouting chain masquerades
	// unless iptables' masqueraded them first.
	MasqueradeBit uint32
	// NodePortAddresses, when set, are the only local addresses whose node
	// ports the handover serves (--nodeport-addresses); otherwise every
	// local address's.
	NodePortAddresses []netip.Addr
	// ServiceIPs and NodePorts map the keys of nftproxy's service-ips and
	// service-nodeports maps to the endpoints their chains DNAT to.
	ServiceIPs map[MapKey][]netip.AddrPort
	NodePorts  map[MapKey][]netip.AddrPort
}

// NewHandoverSpec returns an empty spec for the table g generates: its
// masquerade bit and node port addresses.
func NewHandoverSpec(g *Generator, ttl time.Duration) *HandoverSpec {
	h := &HandoverSpec{TTL: ttl, MasqueradeBit: g.markBits, ServiceIPs: map[MapKey][]netip.AddrPort{}, NodePorts: map[MapKey][]netip.AddrPort{}}
	if g.cfg.RestrictNodePorts {
		h.NodePortAddresses = slices.Clone(g.cfg.NodePortAddresses)
	}
	return h
}

// Add records the destinations of one service fragment with the endpoints
// each reaches: the DNATs of every chain of the fragment its map element
// leads to. A destination whose path passes a firewall chain
// (loadBalancerSourceRanges) is not recorded: the handover cannot check
// sources, so it only holds such a connection. The first fragment to name a
// destination keeps it.
func (h *HandoverSpec) Add(f *Fragment) {
	if f == nil {
		return
	}
	chains := make(map[string]*Chain, len(f.Chains))
	for _, c := range f.Chains {
		chains[c.Name] = c
	}
	for _, m := range []struct {
		name string
		into map[MapKey][]netip.AddrPort
	}{{MapServiceIPs, h.ServiceIPs}, {MapServiceNodePorts, h.NodePorts}} {
		for _, el := range f.Elements[m.name] {
			if _, seen := m.into[el.Key]; seen {
				continue
			}
			if eps, ok := reachableDNATs(chains, el.Verdict.Chain); ok && len(eps) > 0 {
				m.into[el.Key] = eps
			}
		}
	}
}

// Destinations returns how many destinations the spec serves.
func (h *HandoverSpec) Destinations() int { return len(h.ServiceIPs) + len(h.NodePorts) }

// Buckets returns the endpoint of each of the HandoverBuckets buckets of
// eps: endpoint i % len(eps) in bucket i.
func Buckets(eps []netip.AddrPort) []netip.AddrPort {
	out := make([]netip.AddrPort, HandoverBuckets)
	for i := range out {
		out[i] = eps[i%len(eps)]
	}
	return out
}

// reachableDNATs returns, sorted, the DNAT targets of the chains reachable
// from start within chains; ok is false when a firewall chain is on the
// way.
func reachableDNATs(chains map[string]*Chain, start string) (eps []netip.AddrPort, ok bool) {
	seen := map[string]bool{}
	todo := []string{start}
	for len(todo) > 0 {
		name := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[name] {
			continue
		}
		seen[name] = true
		if strings.HasPrefix(name, PrefixFirewall) {
			return nil, false
		}
		c := chains[name]
		if c == nil {
			continue // a shared chain (KUBE-MARK-MASQ) or none
		}
		for _, r := range c.Rules {
			for _, st := range r.Stmts {
				switch s := st.(type) {
				case DNAT:
					eps = append(eps, netip.AddrPortFrom(s.Addr, s.Port))
				case Verdict:
					if s.Chain != "" {
						todo = append(todo, s.Chain)
					}
				case NumgenVmap:
					todo = append(todo, s.Targets...)
				}
			}
		}
	}
	slices.SortFunc(eps, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return slices.Compact(eps), true
}
