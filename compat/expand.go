package compat

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"

	"github.com/nftproxy/nftproxy/nftgen"
)

// Where one nftables rule stands for many iptables rules: a verdict map
// (one rule per element) and a numgen choice (kube-proxy's statistic
// cascade).

// expandMap writes one rule per map element, as iptables mode does. Rules
// before the map lookup in the same nftables rule (fib) become matches.
func (b *builder) expandMap(table, chain, mapName string, r nftgen.Rule) {
	m := b.st.Map(mapName)
	if m == nil {
		b.note(table, "map %s is missing", mapName)
		return
	}
	local := slices.ContainsFunc(r.Stmts, func(s nftgen.Stmt) bool { _, ok := s.(nftgen.MatchFibLocal); return ok })
	elems := slices.Clone(m.Elements)
	sort.Slice(elems, func(i, j int) bool {
		if elems[i].Comment != elems[j].Comment {
			return elems[i].Comment < elems[j].Comment
		}
		return elems[i].Key.Addr.Less(elems[j].Key.Addr) || (elems[i].Key.Addr == elems[j].Key.Addr && elems[i].Key.Port < elems[j].Key.Port)
	})
	at := b.origin
	for _, e := range elems {
		b.origin = Origin{Chain: at.Chain, Rule: at.Rule, Element: ElementKey(e.Key)}
		comments := []string{e.Comment}
		if mapName == nftgen.MapHealthCheckNodePorts {
			comments = nftgen.SplitHealthCheckComment(e.Comment)
		}
		for _, comment := range comments {
			proto := nftgen.ProtoName(e.Key.Proto)
			out := &iptRule{chain: chain, proto: proto, target: b.target(table, e.Verdict)}
			if e.Key.Addr.IsValid() {
				out.dst = hostString(e.Key.Addr)
			}
			out.comment(comment)
			if local {
				out.match("-m addrtype --dst-type LOCAL")
			}
			out.match(fmt.Sprintf("-m %s --dport %d", proto, e.Key.Port))
			if counter, ok := b.counted[mapName]; ok {
				b.add(table, countedCopy(out, counter))
			}
			b.add(table, out)
		}
	}
}

// countedCopy returns the rule kube-proxy writes before out to feed an
// nfacct counter: out with the counting rule's destination and the nfacct
// match (the localhost node port counter: "-d 127.0.0.0/8 ... -m nfacct
// --nfacct-name localhost_nps_accepted_pkts").
func countedCopy(out *iptRule, counter nftgen.Rule) *iptRule {
	cp := *out
	cp.matches = slices.Clone(out.matches)
	for _, s := range counter.Stmts {
		switch s := s.(type) {
		case nftgen.MatchAddr:
			if s.Dir == nftgen.Daddr {
				cp.dst, cp.notDst = prefixString(s.Prefix), s.Negate
			}
		case nftgen.CounterRef:
			cp.match(nfacctMatch(s.Name))
		}
	}
	return &cp
}

// nfacctMatch is the nfacct match as iptables-save prints it (with two
// spaces).
func nfacctMatch(name string) string { return "-m nfacct --nfacct-name  " + name }

// expandNumgen writes kube-proxy's statistic rules for a random choice.
func (b *builder) expandNumgen(table, chain string, s nftgen.NumgenVmap, comment string) {
	n := len(s.Targets)
	at := b.origin
	for i, sep := range s.Targets {
		b.origin = Origin{Chain: at.Chain, Rule: at.Rule, Element: TargetKey(i)}
		out := &iptRule{chain: chain, target: "-j " + sep}
		switch {
		case i < len(s.Comments) && s.Comments[i] != "":
			out.comment(s.Comments[i])
		case comment != "":
			out.comment(comment + " -> " + b.endpointOf(sep))
		}
		if i < n-1 {
			out.match("-m statistic --mode random --probability " + b.probability(n-i))
		}
		b.add(table, out)
	}
}

// endpointOf returns "IP:port" of an endpoint chain, from its DNAT rule.
func (b *builder) endpointOf(sep string) string {
	if c := b.index.chain(sep); c != nil {
		for _, r := range c.Rules {
			for _, s := range r.Stmts {
				if d, ok := s.(nftgen.DNAT); ok {
					return netip.AddrPortFrom(d.Addr, d.Port).String()
				}
			}
		}
	}
	b.note("nat", "endpoint chain %s is missing or has no DNAT", sep)
	return "?"
}
