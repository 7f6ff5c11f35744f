package kernel

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/nftgen"
)

// anonLookup resolves a numgen verdict map (an endpoint map, or an
// anonymous map written by other tools) by name: it returns the goto
// targets indexed by the map's integer keys, and the elements' comments.
type anonLookup func(name string) (targets, comments []string, ok bool)

// exprDecoder turns netlink expressions back into statements, the inverse
// of exprBuilder. Expressions it does not recognise become Unknown
// statements rather than disappearing.
type exprDecoder struct {
	family nftgen.Family
	anon   anonLookup
}

// decode returns the statements of one rule.
func (d *exprDecoder) decode(exprs []expr.Any) []nftgen.Stmt {
	// A statement takes two or three expressions; most rules are read
	// without growing this.
	out := make([]nftgen.Stmt, 0, len(exprs)/2+1)
	for i := 0; i < len(exprs); {
		s, n := d.match(exprs[i:])
		if n == 0 {
			out = append(out, nftgen.Unknown{Desc: describe(exprs[i])})
			i++
			continue
		}
		if s != nil {
			out = append(out, s)
		}
		i += n
	}
	return out
}

func describe(e expr.Any) string {
	return strings.TrimPrefix(fmt.Sprintf("%T%+v", e, e), "*expr.")
}

func (d *exprDecoder) addrLen() uint32 {
	if d.family == nftgen.FamilyIPv6 {
		return 16
	}
	return 4
}

// match recognises the statement at the start of es and returns it with the
// number of expressions it used; 0 means no match. A nil statement with a
// count skips expressions that carry no meaning here (counters).
func (d *exprDecoder) match(es []expr.Any) (nftgen.Stmt, int) {
	at := func(i int) expr.Any {
		if i < len(es) {
			return es[i]
		}
		return nil
	}
	saddr, daddr, alen := uint32(12), uint32(16), d.addrLen()
	if d.family == nftgen.FamilyIPv6 {
		saddr, daddr = 8, 24
	}
	switch e := es[0].(type) {
	case *expr.Counter:
		return nil, 1
	case *expr.Objref:
		if e.Type == unix.NFT_OBJECT_COUNTER {
			return nftgen.CounterRef{Name: e.Name}, 1
		}
	case *expr.Verdict:
		return decodeVerdict(e)
	case *expr.Masq:
		return nftgen.Masquerade{FullyRandom: e.FullyRandom}, 1
	case *expr.Reject:
		return nftgen.Reject{}, 1
	case *expr.Numgen:
		if c, ok := at(1).(*expr.Cmp); ok && e.Type == unix.NFT_NG_RANDOM && e.Offset == 0 && e.Modulus >= 2 &&
			c.Op == expr.CmpOpEq && len(c.Data) == 4 && binary.NativeEndian.Uint32(c.Data) == 0 {
			return nftgen.MatchRandom{Mod: e.Modulus}, 2
		}
		if l, ok := at(1).(*expr.Lookup); ok && e.Type == unix.NFT_NG_RANDOM && d.anon != nil {
			if targets, comments, ok := d.anon(l.SetName); ok && uint32(len(targets)) == e.Modulus {
				v := nftgen.NumgenVmap{Targets: targets, Comments: comments}
				if nftgen.IsEndpointMap(l.SetName) {
					v.Map = l.SetName // else anonymous, bound to the rule
				}
				return v, 2
			}
		}
	case *expr.Fib:
		if c, ok := at(1).(*expr.Cmp); ok && e.ResultADDRTYPE && c.Op == expr.CmpOpEq && len(c.Data) == 4 && binary.NativeEndian.Uint32(c.Data) == unix.RTN_LOCAL {
			dir := nftgen.Daddr
			if e.FlagSADDR {
				dir = nftgen.Saddr
			}
			return nftgen.MatchFibLocal{Dir: dir}, 2
		}
	case *expr.Immediate:
		if p, ok := at(1).(*expr.Immediate); ok {
			if nat, ok := at(2).(*expr.NAT); ok && nat.Type == expr.NATTypeDestNAT && len(p.Data) == 2 {
				if a, ok := netip.AddrFromSlice(e.Data); ok {
					return nftgen.DNAT{Addr: a, Port: binary.BigEndian.Uint16(p.Data)}, 3
				}
			}
		}
	case *expr.Ct:
		b, ok1 := at(1).(*expr.Bitwise)
		c, ok2 := at(2).(*expr.Cmp)
		if !ok1 || !ok2 || len(b.Mask) != 4 || len(c.Data) != 4 || binary.NativeEndian.Uint32(c.Data) != 0 {
			break
		}
		mask := binary.NativeEndian.Uint32(b.Mask)
		switch {
		case e.Key == expr.CtKeySTATE:
			return nftgen.MatchCtState{Mask: mask, None: c.Op == expr.CmpOpEq}, 3
		case e.Key == expr.CtKeySTATUS && mask == ctStatusDNAT:
			return nftgen.MatchCtStatusDNAT{Not: c.Op == expr.CmpOpEq}, 3
		}
	case *expr.Meta:
		return d.matchMeta(e, at)
	case *expr.Payload:
		return d.matchPayload(e, at, saddr, daddr, alen)
	}
	return nil, 0
}

func decodeVerdict(e *expr.Verdict) (nftgen.Stmt, int) {
	kinds := map[expr.VerdictKind]nftgen.VerdictKind{
		expr.VerdictAccept: nftgen.VerdictAccept, expr.VerdictDrop: nftgen.VerdictDrop, expr.VerdictReturn: nftgen.VerdictReturn,
		expr.VerdictJump: nftgen.VerdictJump, expr.VerdictGoto: nftgen.VerdictGoto,
	}
	k, ok := kinds[e.Kind]
	if !ok {
		return nil, 0
	}
	return nftgen.Verdict{Kind: k, Chain: e.Chain}, 1
}

func (d *exprDecoder) matchMeta(e *expr.Meta, at func(int) expr.Any) (nftgen.Stmt, int) {
	switch {
	case e.Key == expr.MetaKeyIIFNAME && !e.SourceRegister:
		if c, ok := at(1).(*expr.Cmp); ok && (c.Op == expr.CmpOpEq || c.Op == expr.CmpOpNeq) && len(c.Data) > 0 && len(c.Data) <= ifnameSize {
			name, pad, whole := bytes.Cut(c.Data, []byte{0})
			if whole && len(c.Data) == ifnameSize && len(name) > 0 && len(bytes.Trim(pad, "\x00")) == 0 {
				return nftgen.MatchIifname{Name: string(name), Negate: c.Op == expr.CmpOpNeq}, 2
			}
			if !whole {
				return nftgen.MatchIifname{Name: string(c.Data), Prefix: true, Negate: c.Op == expr.CmpOpNeq}, 2
			}
		}
	case e.Key == expr.MetaKeyL4PROTO && !e.SourceRegister:
		if c, ok := at(1).(*expr.Cmp); ok && c.Op == expr.CmpOpEq && len(c.Data) == 1 {
			return nftgen.MatchProto{Proto: c.Data[0]}, 2
		}
		if p, ok := at(1).(*expr.Payload); ok && p.Base == expr.PayloadBaseTransportHeader && p.Offset == 2 && p.Len == 2 {
			if l, ok := at(2).(*expr.Lookup); ok && l.SetName != "" && !l.Invert {
				if l.IsDestRegSet && l.DestRegister == regVerdict {
					return nftgen.ProtoPortMap{Map: l.SetName}, 3
				}
				if !l.IsDestRegSet {
					return nftgen.ProtoPortIn{Map: l.SetName}, 3
				}
			}
			if s, n := bucketDNAT(at, 2, true); n > 0 {
				return s, n
			}
		}
	case e.Key == expr.MetaKeyMARK && !e.SourceRegister:
		b, ok := at(1).(*expr.Bitwise)
		if !ok || len(b.Mask) != 4 || len(b.Xor) != 4 {
			break
		}
		mask, xor := binary.NativeEndian.Uint32(b.Mask), binary.NativeEndian.Uint32(b.Xor)
		if c, ok := at(2).(*expr.Cmp); ok && xor == 0 && len(c.Data) == 4 && binary.NativeEndian.Uint32(c.Data) == 0 {
			return nftgen.MatchMark{Mask: mask, Zero: c.Op == expr.CmpOpEq}, 3
		}
		if set, ok := at(2).(*expr.Meta); ok && set.Key == expr.MetaKeyMARK && set.SourceRegister {
			switch {
			case mask == ^xor:
				return nftgen.MarkOr{Bits: xor}, 3
			case mask == 0xffffffff:
				return nftgen.MarkXor{Bits: xor}, 3
			}
		}
	}
	return nil, 0
}

func (d *exprDecoder) matchPayload(e *expr.Payload, at func(int) expr.Any, saddr, daddr, alen uint32) (nftgen.Stmt, int) {
	if s, n := destBits(e, at, daddr, alen); n > 0 {
		return s, n
	}
	if e.Base == expr.PayloadBaseTransportHeader && e.Offset == 2 && e.Len == 2 {
		if c, ok := at(1).(*expr.Cmp); ok && c.Op == expr.CmpOpEq && len(c.Data) == 2 {
			return nftgen.MatchDport{Port: binary.BigEndian.Uint16(c.Data)}, 2
		}
		return nil, 0
	}
	if e.Base != expr.PayloadBaseNetworkHeader || e.Len != alen || (e.Offset != saddr && e.Offset != daddr) {
		return nil, 0
	}
	dir := nftgen.Daddr
	if e.Offset == saddr {
		dir = nftgen.Saddr
	}
	// addr . l4proto . dport: vmap @map (the dispatch), @set, or a
	// random bucket's endpoint in a map (the handover's DNAT).
	if m, ok := at(1).(*expr.Meta); ok && dir == nftgen.Daddr && m.Key == expr.MetaKeyL4PROTO {
		if p, ok := at(2).(*expr.Payload); ok && p.Base == expr.PayloadBaseTransportHeader && p.Offset == 2 {
			if l, ok := at(3).(*expr.Lookup); ok && l.SetName != "" && !l.Invert {
				switch {
				case l.IsDestRegSet && l.DestRegister == regVerdict:
					return nftgen.DispatchMap{Map: l.SetName}, 4
				case !l.IsDestRegSet:
					return nftgen.DestIn{Set: l.SetName}, 4
				}
			}
			if s, n := bucketDNAT(at, 3, false); n > 0 {
				return s, n
			}
		}
	}
	// Affinity of a Service port's shared set: saddr . endpoint address .
	// port @set goto chain, and the update of the same key.
	if ep, ok := affinityEndpoint(e, at(1), at(2), alen); ok && dir == nftgen.Saddr {
		if l, ok := at(3).(*expr.Lookup); ok && reg32(l.SourceRegister) == reg32Base && l.DestRegister == 0 && !l.Invert {
			if v, ok := at(4).(*expr.Verdict); ok && v.Kind == expr.VerdictGoto {
				return nftgen.AffinityCheck{Set: l.SetName, Chain: v.Chain, Endpoint: ep}, 5
			}
		}
		if ds, ok := at(3).(*expr.Dynset); ok && reg32(ds.SrcRegKey) == reg32Base && ds.Operation == unix.NFT_DYNSET_OP_UPDATE {
			return nftgen.AffinityUpdate{Set: ds.SetName, Endpoint: ep}, 4
		}
	}
	if l, ok := at(1).(*expr.Lookup); ok && dir == nftgen.Saddr && l.DestRegister == 0 && !l.Invert {
		if v, ok := at(2).(*expr.Verdict); ok && v.Kind == expr.VerdictGoto {
			return nftgen.AffinityCheck{Set: l.SetName, Chain: v.Chain}, 3
		}
	}
	if ds, ok := at(1).(*expr.Dynset); ok && dir == nftgen.Saddr && ds.Operation == unix.NFT_DYNSET_OP_UPDATE {
		return nftgen.AffinityUpdate{Set: ds.SetName}, 2
	}
	if l, ok := at(1).(*expr.Lookup); ok && !l.IsDestRegSet && !l.Invert && l.SetName != "" {
		return nftgen.AddrIn{Dir: dir, Set: l.SetName}, 2
	}
	// Address or prefix match.
	i := 1
	bits := int(alen * 8)
	if b, ok := at(1).(*expr.Bitwise); ok && len(b.Mask) == int(alen) {
		bits = 0
		for _, by := range b.Mask {
			for j := 7; j >= 0 && by&(1<<j) != 0; j-- {
				bits++
			}
		}
		i = 2
	}
	c, ok := at(i).(*expr.Cmp)
	if !ok || (c.Op != expr.CmpOpEq && c.Op != expr.CmpOpNeq) {
		return nil, 0
	}
	a, ok := netip.AddrFromSlice(c.Data)
	if !ok {
		return nil, 0
	}
	return nftgen.MatchAddr{Dir: dir, Prefix: netip.PrefixFrom(a, bits), Negate: c.Op == expr.CmpOpNeq}, i + 1
}

// destBits recognises a shard's guard (nftgen.DestBits): a load of the
// destination's last 32 bits, a mask whose top bit is clear (so it is no
// prefix, which MatchAddr would be) and a compare for equality.
func destBits(e *expr.Payload, at func(int) expr.Any, daddr, alen uint32) (nftgen.Stmt, int) {
	if e.Base != expr.PayloadBaseNetworkHeader || e.Offset != daddr+alen-4 || e.Len != 4 {
		return nil, 0
	}
	b, ok1 := at(1).(*expr.Bitwise)
	c, ok2 := at(2).(*expr.Cmp)
	if !ok1 || !ok2 || len(b.Mask) != 4 || len(b.Xor) != 4 || binary.BigEndian.Uint32(b.Xor) != 0 || c.Op != expr.CmpOpEq || len(c.Data) != 4 {
		return nil, 0
	}
	mask := binary.BigEndian.Uint32(b.Mask)
	if mask == 0 || mask>>31 != 0 {
		return nil, 0
	}
	return nftgen.DestBits{Mask: mask, Value: binary.BigEndian.Uint32(c.Data)}, 3
}

// bucketDNAT recognises the rest of a BucketDNAT from its random bucket
// on (expression i): the map's look-up of the endpoint, the mark and the
// DNAT from the look-up's register. It returns the expressions used from
// the statement's first, or 0.
func bucketDNAT(at func(int) expr.Any, i int, nodePort bool) (nftgen.Stmt, int) {
	ng, ok1 := at(i).(*expr.Numgen)
	l, ok2 := at(i + 1).(*expr.Lookup)
	if !ok1 || !ok2 || ng.Type != unix.NFT_NG_RANDOM || ng.Offset != 0 || !l.IsDestRegSet || l.DestRegister == regVerdict || l.SetName == "" {
		return nil, 0
	}
	load, ok1 := at(i + 2).(*expr.Meta)
	bw, ok2 := at(i + 3).(*expr.Bitwise)
	set, ok3 := at(i + 4).(*expr.Meta)
	nat, ok4 := at(i + 5).(*expr.NAT)
	if !ok1 || !ok2 || !ok3 || !ok4 || load.Key != expr.MetaKeyMARK || load.SourceRegister || set.Key != expr.MetaKeyMARK || !set.SourceRegister ||
		len(bw.Mask) != 4 || len(bw.Xor) != 4 || nat.Type != expr.NATTypeDestNAT || nat.RegAddrMin != l.DestRegister {
		return nil, 0
	}
	bits := binary.NativeEndian.Uint32(bw.Xor)
	if binary.NativeEndian.Uint32(bw.Mask) != ^bits {
		return nil, 0
	}
	return nftgen.BucketDNAT{Map: l.SetName, NodePort: nodePort, Buckets: ng.Modulus, MarkBits: bits}, i + 6
}

// reg32 is register r in 4-byte slot numbering: the kernel reports a slot
// that starts a 16-byte register as that register (slot 8 as register 1).
func reg32(r uint32) uint32 {
	if r >= 1 && r <= 4 {
		return reg32Base + (r-1)*4
	}
	return r
}

// affinityEndpoint reads the endpoint of a "client . endpoint address .
// port" key: the source address loaded at reg32Base, then two immediates
// with the endpoint's address and its port (padded to 4 bytes) in the
// slots that follow.
func affinityEndpoint(src *expr.Payload, a, b expr.Any, alen uint32) (netip.AddrPort, bool) {
	ia, ok1 := a.(*expr.Immediate)
	ib, ok2 := b.(*expr.Immediate)
	words := alen / 4
	if !ok1 || !ok2 || reg32(src.DestRegister) != reg32Base || reg32(ia.Register) != reg32Base+words || reg32(ib.Register) != reg32Base+2*words ||
		uint32(len(ia.Data)) != alen || len(ib.Data) != 4 || ib.Data[2] != 0 || ib.Data[3] != 0 {
		return netip.AddrPort{}, false
	}
	addr, ok := netip.AddrFromSlice(ia.Data)
	return netip.AddrPortFrom(addr, binary.BigEndian.Uint16(ib.Data)), ok
}
