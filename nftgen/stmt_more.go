package nftgen

import (
	"fmt"
	"strings"
)

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

// AffinityCheck jumps (goto) to Chain when the source address is in the
// dynamic set Set: the client was sent to that endpoint recently.
type AffinityCheck struct {
	Set   string
	Chain string
}

// AffinityUpdate adds the source address to the dynamic set Set, or
// refreshes its timeout.
type AffinityUpdate struct{ Set string }

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
	return fmt.Sprintf("%s saddr @%s goto %s", f, s.Set, s.Chain)
}

func (s AffinityUpdate) nft(f Family) string {
	return fmt.Sprintf("update @%s { %s saddr }", s.Set, f)
}
