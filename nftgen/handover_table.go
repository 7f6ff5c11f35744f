package nftgen

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// The handover table's sets and maps.
const (
	// HandoverServiceIPs and HandoverNodePorts hold the destinations of
	// nftproxy's service-ips and service-nodeports maps: a new connection
	// to one that no one DNATed is held.
	HandoverServiceIPs = "service-ips"
	HandoverNodePorts  = "service-nodeports"
	// HandoverDNATIPs and HandoverDNATNodePorts map a destination and a
	// random bucket to the endpoint that serves it.
	HandoverDNATIPs       = "dnat-ips"
	HandoverDNATNodePorts = "dnat-nodeports"
	// HandoverNodePortAddresses holds the addresses whose node ports are
	// served, when --nodeport-addresses restricts them.
	HandoverNodePortAddresses = "nodeport-addresses"
)

// Priorities of the handover table's chains. Its NAT chains come after
// iptables' (dstnat -100, srcnat 100) and after the node port stage of
// nftproxy's shard tables, and its filter chains after iptables' filter
// (0), so that what kube-proxy has programmed acts first: netfilter runs a
// later NAT chain only while no earlier one bound the connection, and a
// reject of a Service without endpoints comes before the hold.
const (
	HandoverFilterPriority int32 = 10
	HandoverDstNATPriority       = PriorityNodePorts + 1
	HandoverSrcNATPriority       = PrioritySrcNAT + 1
)

// KeyAddr keys a set by an address alone (the handover's node port
// addresses).
const KeyAddr KeyKind = "addr"

// HandoverSet is a set, or with DNAT a map, of the handover table. The
// kernel fills it when it writes the table, from what nftproxy's tables
// hold then.
type HandoverSet struct {
	Name string
	// Key is the kind of its keys: KeyAddrProtoPort, KeyProtoPort or
	// KeyAddr.
	Key KeyKind
	// From names the map of nftproxy's tables whose keys, as the kernel
	// holds them, it holds (a DNAT map: those the spec has endpoints
	// for); "" for the node port addresses, which the spec gives.
	From string
	// DNAT makes it a map from the key and a random bucket (one of
	// HandoverBuckets) to an endpoint's "address . port".
	DNAT bool
	// Timeout is how long each element lives (0: for ever).
	Timeout time.Duration
}

// HandoverTable is the handover table of one family (HandoverTableName),
// as a stopping nftproxy leaves it: its sets and maps, and its base chains,
// whose rules serve a destination of nftproxy's tables from the spec's
// endpoints (DNAT and masquerade) or hold a new connection to it.
type HandoverTable struct {
	Family Family
	Sets   []HandoverSet
	Chains []*Chain
	// Spec gives the endpoints and the node port addresses the sets are
	// filled with.
	Spec *HandoverSpec
}

// Table returns the handover table of family f that serves from h.
func (h *HandoverSpec) Table(f Family) *HandoverTable {
	t := &HandoverTable{Family: f, Spec: h, Sets: []HandoverSet{
		{Name: HandoverServiceIPs, Key: KeyAddrProtoPort, From: MapServiceIPs, Timeout: h.TTL},
		{Name: HandoverNodePorts, Key: KeyProtoPort, From: MapServiceNodePorts, Timeout: h.TTL},
		{Name: HandoverDNATIPs, Key: KeyAddrProtoPort, From: MapServiceIPs, DNAT: true, Timeout: h.TTL},
		{Name: HandoverDNATNodePorts, Key: KeyProtoPort, From: MapServiceNodePorts, DNAT: true, Timeout: h.TTL},
	}}
	nodePortDest := Stmt(MatchFibLocal{Dir: Daddr})
	if len(h.NodePortAddresses) > 0 {
		t.Sets = append(t.Sets, HandoverSet{Name: HandoverNodePortAddresses, Key: KeyAddr})
		nodePortDest = AddrIn{Dir: Daddr, Set: HandoverNodePortAddresses}
	}
	serve := []Rule{
		{Stmts: []Stmt{BucketDNAT{Map: HandoverDNATIPs, Buckets: HandoverBuckets, MarkBits: h.MasqueradeBit}}},
		{Stmts: []Stmt{nodePortDest, BucketDNAT{Map: HandoverDNATNodePorts, NodePort: true, Buckets: HandoverBuckets, MarkBits: h.MasqueradeBit}}},
	}
	base := func(name string, typ ChainType, hook Hook, prio int32, rules []Rule) *Chain {
		return &Chain{Name: name, Base: &BaseChain{Type: typ, Hook: hook, Priority: prio}, Rules: rules}
	}
	t.Chains = append(t.Chains,
		base("nat-prerouting", NATType, HookPrerouting, HandoverDstNATPriority, serve),
		base("nat-output", NATType, HookOutput, HandoverDstNATPriority, serve),
		base("nat-postrouting", NATType, HookPostrouting, HandoverSrcNATPriority, []Rule{
			{Stmts: []Stmt{MatchMark{Mask: h.MasqueradeBit}, MarkXor{Bits: h.MasqueradeBit}, Masquerade{}}}}))
	// A new connection that no one DNATed, to a held destination, is
	// dropped silently: the client retransmits.
	unserved := []Stmt{MatchCtState{Mask: CtNew}, MatchCtStatusDNAT{Not: true}}
	holdService := Rule{Stmts: append(append([]Stmt{}, unserved...), DestIn{Set: HandoverServiceIPs}, Verdict{Kind: VerdictDrop})}
	holdNodePort := Rule{Stmts: append(append([]Stmt{}, unserved...), MatchFibLocal{Dir: Daddr}, ProtoPortIn{Map: HandoverNodePorts}, Verdict{Kind: VerdictDrop})}
	t.Chains = append(t.Chains,
		base("input", FilterType, HookInput, HandoverFilterPriority, []Rule{holdService, holdNodePort}),
		base("forward", FilterType, HookForward, HandoverFilterPriority, []Rule{holdService}),
		base("output", FilterType, HookOutput, HandoverFilterPriority, []Rule{holdService, holdNodePort}))
	return t
}

// NodePortAddresses returns the spec's node port addresses of the table's
// family.
func (t *HandoverTable) NodePortAddresses() []netip.Addr {
	var out []netip.Addr
	for _, a := range t.Spec.NodePortAddresses {
		if a.Is4() == (t.Family == FamilyIPv4) {
			out = append(out, a)
		}
	}
	return out
}

// Text renders the table in nft syntax, each set with a comment naming
// the map it is filled from. Its elements are the kernel's to fill (see
// HandoverSet); only the node port addresses are shown. It is for
// reading: nft cannot parse the DNAT rules back, since their buckets
// (numgen, an integer) look up a key typed as a mark.
func (t *HandoverTable) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table %s %s {\n", t.Family, HandoverTableName)
	for _, s := range t.Sets {
		writeHandoverSet(&b, t, s)
	}
	for _, c := range t.Chains {
		writeChain(&b, t.Family, c)
	}
	b.WriteString("}\n")
	return b.String()
}

func writeHandoverSet(b *strings.Builder, t *HandoverTable, s HandoverSet) {
	key := mapKeyType(t.Family, s.Key)
	if s.Key == KeyAddr {
		key = addrType(t.Family)
	}
	if s.DNAT {
		fmt.Fprintf(b, "\tmap %s {\n\t\ttype %s . mark : %s . inet_service\n", s.Name, key, addrType(t.Family))
	} else {
		fmt.Fprintf(b, "\tset %s {\n\t\ttype %s\n", s.Name, key)
	}
	if s.Timeout > 0 {
		fmt.Fprintf(b, "\t\tflags timeout\n\t\ttimeout %s\n", nftDuration(s.Timeout))
	}
	if s.From != "" {
		fmt.Fprintf(b, "\t\tcomment %q\n", "filled from "+s.From)
	}
	if s.Key == KeyAddr {
		var els []string
		for _, a := range t.NodePortAddresses() {
			els = append(els, a.String())
		}
		if len(els) > 0 {
			fmt.Fprintf(b, "\t\telements = { %s }\n", strings.Join(els, ", "))
		}
	}
	b.WriteString("\t}\n")
}

// nftDuration writes d as nft does: "10m", "1h30m", "45s".
func nftDuration(d time.Duration) string {
	var out string
	for _, u := range []struct {
		d    time.Duration
		unit string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := d / u.d; n > 0 {
			out += fmt.Sprintf("%d%s", n, u.unit)
			d -= n * u.d
		}
	}
	if out == "" {
		return "0s"
	}
	return out
}
