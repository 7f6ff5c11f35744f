package nftgen

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Stmt is one statement of a rule: a match, an action or a verdict. The set
// of statements is closed; each kind knows its nft text and its netlink
// expressions (exprs.go).
type Stmt interface {
	// nft returns the statement in nft syntax.
	nft(f Family) string
}

// Protocol numbers.
const (
	ProtoTCP  uint8 = 6
	ProtoUDP  uint8 = 17
	ProtoSCTP uint8 = 132
)

// ProtoName returns nft's name for an IP protocol number.
func ProtoName(p uint8) string {
	switch p {
	case ProtoTCP:
		return "tcp"
	case ProtoUDP:
		return "udp"
	case ProtoSCTP:
		return "sctp"
	}
	return fmt.Sprint(p)
}

// AddrDir selects the source or destination address.
type AddrDir string

// Address directions.
const (
	Saddr AddrDir = "saddr"
	Daddr AddrDir = "daddr"
)

// MatchProto matches the layer 4 protocol ("meta l4proto tcp").
type MatchProto struct{ Proto uint8 }

// MatchAddr matches the source or destination address against a prefix
// ("ip saddr != 10.0.0.0/8"). A full-length prefix matches one address.
type MatchAddr struct {
	Dir    AddrDir
	Prefix netip.Prefix
	Negate bool
}

// MatchIifname matches the name of the interface a packet came in on
// ("iifname "cbr0""), or with Prefix every name that starts with Name
// ("iifname "veth*""); Negate matches the others. It is kube-proxy's
// detection of pod traffic in the BridgeInterface and InterfaceNamePrefix
// modes.
type MatchIifname struct {
	Name   string
	Prefix bool
	Negate bool
}

// MatchDport matches the transport destination port ("th dport 80").
type MatchDport struct{ Port uint16 }

// MatchMark matches whether the bits of Mask in the packet mark are all zero
// ("meta mark & 0x4000 == 0") or not.
type MatchMark struct {
	Mask uint32
	Zero bool
}

// DispatchMap looks up "daddr . l4proto . dport" in a named verdict map.
type DispatchMap struct{ Map string }

// NumgenVmap picks one of Targets at random and jumps there with goto
// ("numgen random mod N vmap { 0 : goto A, 1 : goto B }"). Comments, if
// set, label each target ("ns/svc:port -> IP:port") on its map element.
// Map names the endpoint map that holds the targets in the kernel
// (EndpointMapName of the rule's chain): the rule that reads it creates it
// with its elements, and the plan that flushes or deletes that rule
// deletes it. Empty stands for an anonymous map, bound to the rule.
type NumgenVmap struct {
	Map      string
	Targets  []string
	Comments []string
}

// MatchRandom matches with probability 1/Mod ("numgen random mod 3 == 0").
// A service chain with N endpoints picks endpoint i with MatchRandom{N-i}
// and a goto, the last one with a plain goto: each endpoint is chosen with
// probability exactly 1/N, rule for rule as iptables mode's
// "-m statistic --mode random --probability 1/(N-i)" cascade, and without a
// set, whose look-up by name the kernel does by walking every set.
type MatchRandom struct{ Mod uint32 }

// MarkOr sets bits in the packet mark ("meta mark set meta mark | 0x4000").
type MarkOr struct{ Bits uint32 }

// MarkXor flips bits in the packet mark ("meta mark set meta mark ^ 0x4000").
type MarkXor struct{ Bits uint32 }

// DNAT rewrites the destination to Addr:Port.
type DNAT struct {
	Addr netip.Addr
	Port uint16
}

// Masquerade rewrites the source to the outgoing interface's address.
type Masquerade struct{ FullyRandom bool }

// Reject answers with ICMP port unreachable, as iptables' REJECT does by
// default; TCP clients see "connection refused".
type Reject struct{}

// Verdict is also a statement: it ends the rule.
func (v Verdict) nft(Family) string {
	if v.Chain != "" {
		return string(v.Kind) + " " + v.Chain
	}
	return string(v.Kind)
}

func (s MatchProto) nft(Family) string { return "meta l4proto " + ProtoName(s.Proto) }

func (s MatchAddr) nft(f Family) string {
	op := ""
	if s.Negate {
		op = "!= "
	}
	p := s.Prefix.String()
	if s.Prefix.IsSingleIP() {
		p = s.Prefix.Addr().String()
	}
	return fmt.Sprintf("%s %s %s%s", f, s.Dir, op, p)
}

func (s MatchDport) nft(Family) string { return fmt.Sprintf("th dport %d", s.Port) }

func (s MatchIifname) nft(Family) string {
	op, name := "", s.Name
	if s.Negate {
		op = "!= "
	}
	if s.Prefix {
		name += "*"
	}
	return fmt.Sprintf("iifname %s%q", op, name)
}

func (s MatchMark) nft(Family) string {
	op := "!="
	if s.Zero {
		op = "=="
	}
	return fmt.Sprintf("meta mark & 0x%08x %s 0x00000000", s.Mask, op)
}

func (s DispatchMap) nft(f Family) string {
	return fmt.Sprintf("%s daddr . meta l4proto . th dport vmap @%s", f, s.Map)
}

func (s NumgenVmap) nft(Family) string {
	parts := make([]string, len(s.Targets))
	for i, t := range s.Targets {
		c := ""
		if i < len(s.Comments) && s.Comments[i] != "" {
			c = fmt.Sprintf(" comment %q", s.Comments[i])
		}
		parts[i] = fmt.Sprintf("%d%s : goto %s", i, c, t)
	}
	return fmt.Sprintf("numgen random mod %d vmap { %s }", len(s.Targets), strings.Join(parts, ", "))
}

func (s MatchRandom) nft(Family) string { return fmt.Sprintf("numgen random mod %d == 0", s.Mod) }

func (s MarkOr) nft(Family) string {
	return fmt.Sprintf("meta mark set meta mark | 0x%08x", s.Bits)
}

func (s MarkXor) nft(Family) string {
	return fmt.Sprintf("meta mark set meta mark ^ 0x%08x", s.Bits)
}

func (s DNAT) nft(Family) string {
	return "dnat to " + netip.AddrPortFrom(s.Addr, s.Port).String()
}

func (s Masquerade) nft(Family) string {
	if s.FullyRandom {
		return "masquerade fully-random"
	}
	return "masquerade"
}

func (Reject) nft(f Family) string {
	if f == FamilyIPv6 {
		return "reject with icmpv6 port-unreachable"
	}
	return "reject with icmp port-unreachable"
}

func stmtEqual(a, b Stmt) bool {
	if na, ok := a.(NumgenVmap); ok {
		nb, ok := b.(NumgenVmap)
		return ok && na.Map == nb.Map && slices.Equal(na.Targets, nb.Targets) && slices.Equal(na.Comments, nb.Comments)
	}
	if _, ok := b.(NumgenVmap); ok {
		return false
	}
	return a == b
}

// Text returns the rule in nft syntax.
func (r *Rule) Text(f Family) string {
	parts := make([]string, 0, len(r.Stmts)+1)
	for _, s := range r.Stmts {
		parts = append(parts, s.nft(f))
	}
	if r.Comment != "" {
		parts = append(parts, fmt.Sprintf("comment %q", r.Comment))
	}
	return strings.Join(parts, " ")
}

// MatchFibLocal matches packets whose destination (or source) address is
// local to the node ("fib daddr type local"), like iptables' addrtype.
type MatchFibLocal struct{ Dir AddrDir }

// CtState bits, as the kernel defines them.
const (
	CtInvalid     uint32 = 1
	CtEstablished uint32 = 2
	CtRelated     uint32 = 4
	CtNew         uint32 = 8
)

// MatchCtState matches when any of the conntrack states in Mask apply, or,
// with None, when none of them do.
type MatchCtState struct {
	Mask uint32
	None bool
}

// MatchCtStatusDNAT matches connections that were (or, with Not, were not)
// destination-NATed.
type MatchCtStatusDNAT struct{ Not bool }

// ProtoPortMap looks up "l4proto . dport" in a named verdict map.
type ProtoPortMap struct{ Map string }

// ProtoPortIn matches when "l4proto . dport" is a key of the named map
// ("meta l4proto . th dport @map"), without taking its verdict.
type ProtoPortIn struct{ Map string }

func (s ProtoPortIn) nft(Family) string { return "meta l4proto . th dport @" + s.Map }

// AffinityCheck jumps (goto) to Chain when the dynamic set Set holds the
// source address (or, with Endpoint valid, "source address . Endpoint"):
// the client was sent to that endpoint recently.
type AffinityCheck struct {
	Set      string
	Chain    string
	Endpoint netip.AddrPort
}

// AffinityUpdate adds the source address (or "source address . Endpoint")
// to the dynamic set Set, or refreshes its timeout.
type AffinityUpdate struct {
	Set      string
	Endpoint netip.AddrPort
}

// CounterRef counts the packet in the table's named counter Name
// ("counter name X"), where kube-proxy's rule feeds an nfacct counter of
// that name ("-m nfacct --nfacct-name X").
type CounterRef struct{ Name string }

func (s CounterRef) nft(Family) string { return fmt.Sprintf("counter name %q", s.Name) }

func (s MatchFibLocal) nft(Family) string { return fmt.Sprintf("fib %s type local", s.Dir) }

func ctStateNames(mask uint32) string {
	var names []string
	for _, st := range []struct {
		bit  uint32
		name string
	}{{CtInvalid, "invalid"}, {CtEstablished, "established"}, {CtRelated, "related"}, {CtNew, "new"}} {
		if mask&st.bit != 0 {
			names = append(names, st.name)
		}
	}
	return strings.Join(names, ",")
}

func (s MatchCtState) nft(Family) string {
	if s.None {
		return fmt.Sprintf("ct state & (%s) == 0", strings.ReplaceAll(ctStateNames(s.Mask), ",", " | "))
	}
	return "ct state " + ctStateNames(s.Mask)
}

func (s MatchCtStatusDNAT) nft(Family) string {
	if s.Not {
		return "ct status & dnat == 0"
	}
	return "ct status dnat"
}

func (s ProtoPortMap) nft(Family) string {
	return fmt.Sprintf("meta l4proto . th dport vmap @%s", s.Map)
}

func (s AffinityCheck) nft(f Family) string {
	return fmt.Sprintf("%s @%s goto %s", affinityKeyText(f, s.Endpoint), s.Set, s.Chain)
}

func (s AffinityUpdate) nft(f Family) string {
	return fmt.Sprintf("update @%s { %s }", s.Set, affinityKeyText(f, s.Endpoint))
}

// affinityKeyText is an affinity set's key as nft prints it. nft prints,
// but cannot parse, the constants of the "client . endpoint" key.
func affinityKeyText(f Family, ep netip.AddrPort) string {
	if !ep.IsValid() {
		return fmt.Sprintf("%s saddr", f)
	}
	return fmt.Sprintf("%s saddr . %s . %d", f, ep.Addr(), ep.Port())
}

// Unknown stands for expressions the decoder does not recognise: a rule
// that somebody else added, or one that was tampered with. It keeps a
// description so that the compat view can report it.
type Unknown struct{ Desc string }

func (u Unknown) nft(Family) string { return "# unknown: " + u.Desc }
