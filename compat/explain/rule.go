package explain

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/nftproxy/nftproxy/compat"
	"github.com/nftproxy/nftproxy/nftgen"
)

// branch is one way a rule's evaluation can go.
type branch struct {
	s       *state
	matched bool
	// verdict is the rule's jump, goto, return, accept or drop.
	verdict *nftgen.Verdict
	// terminal is a verdict that ends the walk of this hook (accept
	// after a NAT statement, reject) or Unknown.
	terminal string
	element  string
	comment  string
	chance   string
	actions  []string
}

func (b *branch) fork() *branch {
	c := *b
	c.s = b.s.clone()
	c.actions = append([]string(nil), b.actions...)
	return &c
}

// rule evaluates rule i of c: each branch says whether it matched and
// what it did; matched branches have their step recorded.
func (w *walker) rule(s *state, c *nftgen.Chain, i int) []*branch {
	r := &c.Rules[i]
	live := []*branch{{s: s.clone(), matched: true, comment: r.Comment}}
	for _, st := range r.Stmts {
		var next []*branch
		for _, b := range live {
			if !b.matched || b.verdict != nil || b.terminal != "" {
				next = append(next, b)
				continue
			}
			next = append(next, w.stmt(b, c, i, st)...)
		}
		live = next
	}
	for _, b := range live {
		if !b.matched {
			continue
		}
		did := strings.Join(b.actions, ", ")
		switch {
		case b.verdict != nil && did != "":
			did += ", " + verdictText(*b.verdict)
		case b.verdict != nil:
			did = verdictText(*b.verdict)
		case did == "":
			did = "continue"
		}
		w.step(b.s, c, i, b.element, did, b.chance)
		if b.terminal == Dropped || b.terminal == Rejected || (b.verdict != nil && b.verdict.Kind == nftgen.VerdictDrop) {
			// The deciding rule's or element's comment, or, for the
			// shared reject chain, that of the step that sent the
			// packet there.
			b.s.cause = b.comment
			if b.s.cause == "" {
				b.s.cause = b.s.lastComment
			}
		}
		b.s.lastComment = b.comment
	}
	return live
}

func verdictText(v nftgen.Verdict) string {
	if v.Chain != "" {
		return string(v.Kind) + " " + v.Chain
	}
	return string(v.Kind)
}

// stmt applies one statement to a branch that still matches. It is one
// case per statement kind (nftgen.StmtKinds), which reads best as one switch.
func (w *walker) stmt(b *branch, c *nftgen.Chain, i int, st nftgen.Stmt) []*branch {
	s := b.s
	match := func(ok bool) []*branch { return matched(b, ok) }
	switch st := st.(type) {
	case nftgen.MatchProto:
		return match(s.proto == st.Proto)
	case nftgen.DestBits:
		return match(st.Matches(s.dst))
	case nftgen.MatchAddr:
		a := s.dst
		if st.Dir == nftgen.Saddr {
			a = s.src
		}
		return match(st.Prefix.Contains(a) != st.Negate)
	case nftgen.MatchDport:
		return match(s.dport == st.Port)
	case nftgen.MatchIifname:
		// A probe names addresses, not the interface a packet comes in
		// on: the walk assumes an interface the match does not name (the
		// source is not a local pod, in kube-proxy's interface modes).
		name := st.Name
		if st.Prefix {
			name += "*"
		}
		b.actions = append(b.actions, fmt.Sprintf("assumed not in on %s (the input interface is not part of a probe)", name))
		return match(st.Negate)
	case nftgen.MatchMark:
		return match((s.mark&st.Mask == 0) == st.Zero)
	case nftgen.MatchFibLocal:
		a := s.dst
		if st.Dir == nftgen.Saddr {
			a = s.src
		}
		return match(w.host.IsLocal(a))
	case nftgen.MatchCtState:
		// The first packet of a connection is NEW.
		return match((st.Mask&nftgen.CtNew != 0) != st.None)
	case nftgen.MatchCtStatusDNAT:
		return match(s.natted != st.Not)
	case nftgen.MatchRandom:
		return w.random(b, c, i, st)
	case nftgen.DispatchMap:
		return w.lookup(b, st.Map, nftgen.MapKey{Addr: s.dst, Proto: s.proto, Port: s.dport})
	case nftgen.ProtoPortMap:
		return w.lookup(b, st.Map, nftgen.MapKey{Proto: s.proto, Port: s.dport})
	case nftgen.ProtoPortIn:
		return w.member(b, st.Map, nftgen.MapKey{Proto: s.proto, Port: s.dport})
	case nftgen.DestIn:
		return w.member(b, st.Set, nftgen.MapKey{Addr: s.dst, Proto: s.proto, Port: s.dport})
	case nftgen.AddrIn:
		a := s.dst
		if st.Dir == nftgen.Saddr {
			a = s.src
		}
		return w.member(b, st.Set, nftgen.MapKey{Addr: a})
	case nftgen.BucketDNAT:
		// Only the handover table, which a stopped nftproxy leaves, has
		// one; its map's endpoints are not part of a table's state.
		return w.unknown(b, c, i, "the handover's DNAT through @"+st.Map+", whose endpoints explain does not read")
	case nftgen.NumgenVmap:
		return w.numgen(b, st)
	case nftgen.AffinityCheck:
		return w.affinityCheck(b, st)
	case nftgen.AffinityUpdate:
		b.actions = append(b.actions, fmt.Sprintf("remember %s in @%s", s.src, st.Set))
		return []*branch{b}
	case nftgen.CounterRef:
		b.actions = append(b.actions, "count in "+st.Name)
		return []*branch{b}
	case nftgen.MarkOr:
		return w.markOr(b, st)
	case nftgen.MarkXor:
		s.mark ^= st.Bits
		b.actions = append(b.actions, fmt.Sprintf("set mark ^ 0x%x", st.Bits))
		return []*branch{b}
	case nftgen.DNAT:
		s.dst, s.dport, s.natted = st.Addr, st.Port, true
		s.endpoint = netip.AddrPortFrom(st.Addr, st.Port).String()
		s.endpointChain = c.Name
		b.actions = append(b.actions, "dnat to "+s.endpoint)
		b.terminal = Accepted
		return []*branch{b}
	case nftgen.Masquerade:
		s.masquerade = true
		s.masqReason = s.markReason
		b.actions = append(b.actions, "masquerade")
		b.terminal = Accepted
		return []*branch{b}
	case nftgen.Reject:
		b.actions = append(b.actions, "reject")
		b.terminal = Rejected
		return []*branch{b}
	case nftgen.Verdict:
		v := st
		b.verdict = &v
		return []*branch{b}
	case nftgen.Unknown:
		return w.unknown(b, c, i, "an expression nftproxy did not write: "+st.Desc)
	}
	return w.unknown(b, c, i, fmt.Sprintf("statement %T", st))
}

// random forks the branch at a numgen random match: one in Mod packets
// matches, the rest fall through.
func (w *walker) random(b *branch, c *nftgen.Chain, i int, st nftgen.MatchRandom) []*branch {
	if st.Mod == 0 {
		return w.unknown(b, c, i, "numgen random mod 0")
	}
	miss := b.fork()
	miss.matched = false
	miss.s.prob *= float64(st.Mod-1) / float64(st.Mod)
	b.s.prob /= float64(st.Mod)
	b.chance = fmt.Sprintf("1/%d", st.Mod)
	return []*branch{b, miss}
}

// numgen forks the branch at a numgen vmap, once for each endpoint chain
// (the first SummaryLimit unless the walk shows all, the rest as one branch).
func (w *walker) numgen(b *branch, st nftgen.NumgenVmap) []*branch {
	n := len(st.Targets)
	if n == 0 {
		return matched(b, false)
	}
	var out []*branch
	var rest *branch
	walked := st.Targets
	if !w.all && n > SummaryLimit {
		walked = walked[:SummaryLimit]
		rest = b.fork()
		rest.s.prob *= float64(n-SummaryLimit) / float64(n)
		rest.s.more = n - SummaryLimit
		rest.chance = fmt.Sprintf("1/%d each", n)
		rest.actions = append(rest.actions, fmt.Sprintf("goto one of %d more endpoint chains (not walked)", n-SummaryLimit))
		rest.terminal = More
	}
	for k, target := range walked {
		o := b.fork()
		o.s.prob /= float64(n)
		o.chance = fmt.Sprintf("1/%d", n)
		o.element = compat.TargetKey(k)
		if k < len(st.Comments) && st.Comments[k] != "" {
			o.comment = st.Comments[k]
		}
		o.verdict = &nftgen.Verdict{Kind: nftgen.VerdictGoto, Chain: target}
		out = append(out, o)
	}
	if rest != nil {
		out = append(out, rest)
	}
	return out
}

// affinityCheck follows a client's affinity entry: read from the kernel's
// set when the walk has it, else forked into "in the set" and "not".
func (w *walker) affinityCheck(b *branch, st nftgen.AffinityCheck) []*branch {
	s := b.s
	if w.st.Members != nil {
		// Read from the kernel: the set says whether this client has
		// an entry, so the walk does not branch.
		for _, m := range w.st.Members[st.Set] {
			if m.Addr.Unmap() == s.src && m.Endpoint == st.Endpoint {
				s.affinity, s.affinityLeft = st.Set, m.Expires.Round(time.Second).String()
				b.chance = fmt.Sprintf("client in @%s, %s left", st.Set, s.affinityLeft)
				b.verdict = &nftgen.Verdict{Kind: nftgen.VerdictGoto, Chain: st.Chain}
				return []*branch{b}
			}
		}
		return matched(b, false)
	}
	if s.affinity != "" {
		return matched(b, false)
	}
	if !w.all && w.affinityWalked >= SummaryLimit {
		w.affinityNotWalked++
		return matched(b, false)
	}
	w.affinityWalked++
	hit := b.fork()
	hit.s.affinity = st.Set
	hit.chance = "client in @" + st.Set
	hit.verdict = &nftgen.Verdict{Kind: nftgen.VerdictGoto, Chain: st.Chain}
	b.matched = false
	return []*branch{b, hit}
}

// markOr sets the masquerade mark and remembers which rule asked for it.
func (w *walker) markOr(b *branch, st nftgen.MarkOr) []*branch {
	s := b.s
	s.mark |= st.Bits
	b.actions = append(b.actions, fmt.Sprintf("set mark | 0x%x", st.Bits))
	if n := len(s.callers); n > 0 {
		caller := s.callers[n-1]
		if cc := w.st.Chain(caller.Chain); cc != nil && caller.Rule-1 < len(cc.Rules) {
			s.markReason = masqueradeReason(&caller, &cc.Rules[caller.Rule-1])
		}
	}
	return []*branch{b}
}

// matched is the branch past a match statement, ok saying whether it
// matched.
func matched(b *branch, ok bool) []*branch {
	b.matched = ok
	return []*branch{b}
}

// unknown ends a branch at a statement the walk cannot evaluate.
func (w *walker) unknown(b *branch, c *nftgen.Chain, i int, what string) []*branch {
	b.terminal = Unknown
	b.actions = append(b.actions, "stops the walk")
	b.s.cause = fmt.Sprintf("rule %d of %s has %s", i+1, c.Name, what)
	return []*branch{b}
}

// member matches when the named set (or map) holds key.
func (w *walker) member(b *branch, name string, key nftgen.MapKey) []*branch {
	m := w.st.Map(name)
	if m == nil {
		return missingMap(b, name)
	}
	return matched(b, slices.ContainsFunc(m.Elements, func(e nftgen.MapElement) bool { return e.Key == key }))
}

// missingMap ends a branch at a look-up in a map the table lacks.
func missingMap(b *branch, name string) []*branch {
	b.terminal = Unknown
	b.s.cause = fmt.Sprintf("map %s is missing from the table", name)
	return []*branch{b}
}

// lookup finds the packet's key in a verdict map.
func (w *walker) lookup(b *branch, mapName string, key nftgen.MapKey) []*branch {
	m := w.st.Map(mapName)
	if m == nil {
		return missingMap(b, mapName)
	}
	for _, e := range m.Elements {
		if e.Key == key {
			v := e.Verdict
			b.verdict = &v
			b.element = compat.ElementKey(e.Key)
			if e.Comment != "" {
				b.comment = e.Comment
			}
			return []*branch{b}
		}
	}
	return matched(b, false)
}
