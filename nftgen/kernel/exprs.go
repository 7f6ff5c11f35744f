package kernel

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/nftgen"
)

// Netlink registers. Register 1 is the first 16-byte register; registers 8
// and up address it and its neighbours in 4-byte slots, which is how nft
// lays out concatenated keys.
const (
	reg1       = 1
	reg2       = 2
	reg32Base  = 8
	regVerdict = 0
)

// anonVmap is the verdict map of one "numgen ... vmap { ... }" rule, keyed
// by a 32-bit integer in host byte order. The rule text shows it inline;
// the netlink layer declares it as the named endpoint map Map in the batch
// that adds the rule (see nftgen.NumgenVmap).
type anonVmap struct {
	Map      string
	Targets  []string
	Comments []string
}

// exprBuilder turns statements into netlink expressions. addAnon is called
// for each numgen map a rule needs; it must declare the map in the same
// batch and return the name and ID that the lookup should reference.
type exprBuilder struct {
	family  nftgen.Family
	addAnon func(m anonVmap) (name string, id uint32)
}

// ruleExprs returns the netlink expressions of a rule.
func (b *exprBuilder) ruleExprs(r *nftgen.Rule) ([]expr.Any, error) {
	return b.appendRuleExprs(nil, r)
}

// appendRuleExprs appends the netlink expressions of a rule to out.
func (b *exprBuilder) appendRuleExprs(out []expr.Any, r *nftgen.Rule) ([]expr.Any, error) {
	for _, s := range r.Stmts {
		var err error
		if out, err = b.appendStmt(out, s); err != nil {
			return out, err
		}
	}
	return out, nil
}

// affinityKey loads an affinity set's key into the registers from
// reg32Base on (the same place as reg1): the source address, and, for an
// endpoint's key, the endpoint's address and port (padded to 4 bytes, as
// the fields of a concatenation are) in the 4-byte slots that follow.
func (b *exprBuilder) affinityKey(ep netip.AddrPort) []expr.Any {
	saddr, _, length := b.addrOffsets()
	key := []expr.Any{&expr.Payload{DestRegister: reg32Base, Base: expr.PayloadBaseNetworkHeader, Offset: saddr, Len: length}}
	if !ep.IsValid() {
		return key
	}
	words := length / 4
	port := make([]byte, 4)
	binary.BigEndian.PutUint16(port, ep.Port())
	return append(key,
		&expr.Immediate{Register: reg32Base + words, Data: ep.Addr().AsSlice()},
		&expr.Immediate{Register: reg32Base + 2*words, Data: port})
}

func (b *exprBuilder) addrOffsets() (saddr, daddr, length uint32) {
	if b.family == nftgen.FamilyIPv6 {
		return 8, 24, 16
	}
	return 12, 16, 4
}

func (b *exprBuilder) nfproto() uint32 {
	if b.family == nftgen.FamilyIPv6 {
		return unix.NFPROTO_IPV6
	}
	return unix.NFPROTO_IPV4
}

// appendStmt appends the netlink expressions of one statement to out. It
// is one case per statement kind (nftgen.StmtKinds), which reads best as
// one switch.
func (b *exprBuilder) appendStmt(out []expr.Any, s nftgen.Stmt) ([]expr.Any, error) {
	switch s := s.(type) {
	case nftgen.MatchProto:
		return append(out,
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{s.Proto}},
		), nil
	case nftgen.MatchAddr:
		return b.appendAddrMatch(out, s)
	case nftgen.DestBits:
		return b.appendDestBits(out, s), nil
	case nftgen.MatchDport:
		return append(out,
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: binary.BigEndian.AppendUint16(nil, s.Port)},
		), nil
	case nftgen.MatchCtState:
		return appendMaskedTest(out, &expr.Ct{Register: reg1, Key: expr.CtKeySTATE}, s.Mask, s.None), nil
	case nftgen.MatchCtStatusDNAT:
		return appendMaskedTest(out, &expr.Ct{Register: reg1, Key: expr.CtKeySTATUS}, ctStatusDNAT, s.Not), nil
	case nftgen.MatchFibLocal:
		f := &expr.Fib{Register: reg1, ResultADDRTYPE: true, FlagDADDR: s.Dir == nftgen.Daddr, FlagSADDR: s.Dir == nftgen.Saddr}
		return append(out, f, &expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: native32(unix.RTN_LOCAL)}), nil
	case nftgen.ProtoPortIn:
		return append(out,
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
			&expr.Payload{DestRegister: reg32Base + 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Lookup{SourceRegister: reg1, SetName: s.Map},
		), nil
	case nftgen.CounterRef:
		return append(out, &expr.Objref{Type: unix.NFT_OBJECT_COUNTER, Name: s.Name}), nil
	case nftgen.ProtoPortMap:
		return append(out,
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
			&expr.Payload{DestRegister: reg32Base + 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Lookup{SourceRegister: reg1, SetName: s.Map, DestRegister: regVerdict, IsDestRegSet: true},
		), nil
	case nftgen.AffinityCheck:
		return append(append(out, b.affinityKey(s.Endpoint)...),
			&expr.Lookup{SourceRegister: reg32Base, SetName: s.Set},
			verdictExpr(nftgen.Verdict{Kind: nftgen.VerdictGoto, Chain: s.Chain}),
		), nil
	case nftgen.AffinityUpdate:
		return append(append(out, b.affinityKey(s.Endpoint)...),
			&expr.Dynset{SrcRegKey: reg32Base, SetName: s.Set, Operation: unix.NFT_DYNSET_OP_UPDATE},
		), nil
	case nftgen.MatchMark:
		return appendMaskedTest(out, &expr.Meta{Key: expr.MetaKeyMARK, Register: reg1}, s.Mask, s.Zero), nil
	case nftgen.DispatchMap:
		return b.appendDestLookup(out, s.Map, true), nil
	case nftgen.NumgenVmap:
		if len(s.Targets) == 0 {
			return out, fmt.Errorf("numgen vmap with no targets")
		}
		name, id := b.addAnon(anonVmap{Map: s.Map, Targets: s.Targets, Comments: s.Comments})
		return append(out,
			&expr.Numgen{Register: reg1, Modulus: uint32(len(s.Targets)), Type: unix.NFT_NG_RANDOM},
			&expr.Lookup{SourceRegister: reg1, SetName: name, SetID: id, DestRegister: regVerdict, IsDestRegSet: true},
		), nil
	case nftgen.MatchRandom:
		if s.Mod < 2 {
			return out, fmt.Errorf("numgen random mod %d: want at least 2", s.Mod)
		}
		return append(out,
			&expr.Numgen{Register: reg1, Modulus: s.Mod, Type: unix.NFT_NG_RANDOM},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: native32(0)},
		), nil
	case nftgen.MatchIifname:
		es, err := iifnameExprs(s)
		return append(out, es...), err
	case nftgen.MarkOr:
		return append(out, markSet(^s.Bits, s.Bits)...), nil
	case nftgen.MarkXor:
		return append(out, markSet(0xffffffff, s.Bits)...), nil
	case nftgen.DNAT:
		if s.Addr.Is4() != (b.family == nftgen.FamilyIPv4) {
			return out, fmt.Errorf("dnat address %s does not belong to family %s", s.Addr, b.family)
		}
		return append(out,
			&expr.Immediate{Register: reg1, Data: s.Addr.AsSlice()},
			&expr.Immediate{Register: reg2, Data: binary.BigEndian.AppendUint16(nil, s.Port)},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: b.nfproto(), RegAddrMin: reg1, RegProtoMin: reg2},
		), nil
	case nftgen.Masquerade:
		return append(out, &expr.Masq{FullyRandom: s.FullyRandom}), nil
	case nftgen.Reject:
		code := uint8(3) // ICMP_PORT_UNREACH
		if b.family == nftgen.FamilyIPv6 {
			code = 4 // ICMPV6_PORT_UNREACH
		}
		return append(out, &expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: code}), nil
	case nftgen.Verdict:
		return append(out, verdictExpr(s)), nil
	case nftgen.DestIn, nftgen.AddrIn, nftgen.BucketDNAT:
		return b.appendHandoverStmt(out, s)
	}
	return out, fmt.Errorf("unknown statement %T", s)
}

// appendHandoverStmt appends a statement of the handover table's: a
// look-up in one of its sets, or its DNAT through a map.
func (b *exprBuilder) appendHandoverStmt(out []expr.Any, s nftgen.Stmt) ([]expr.Any, error) {
	switch s := s.(type) {
	case nftgen.DestIn:
		return b.appendDestLookup(out, s.Set, false), nil
	case nftgen.AddrIn:
		saddr, daddr, length := b.addrOffsets()
		if s.Dir == nftgen.Saddr {
			daddr = saddr
		}
		return append(out,
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: length},
			&expr.Lookup{SourceRegister: reg1, SetName: s.Set},
		), nil
	case nftgen.BucketDNAT:
		return b.appendBucketDNAT(out, s)
	}
	return out, fmt.Errorf("unknown statement %T", s)
}

// bucketDataReg is where a BucketDNAT's look-up puts the endpoint's
// "address . port", past the registers of its key.
const bucketDataReg = reg32Base + 8

// appendDestLookup appends the look-up of the packet's daddr . l4proto .
// dport in the named set, or, with verdict, verdict map.
func (b *exprBuilder) appendDestLookup(out []expr.Any, set string, verdict bool) []expr.Any {
	_, daddr, length := b.addrOffsets()
	protoReg := uint32(reg32Base + length/4)
	return append(out,
		&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: length},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: protoReg},
		&expr.Payload{DestRegister: protoReg + 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: reg1, SetName: set, DestRegister: regVerdict, IsDestRegSet: verdict},
	)
}

// appendBucketDNAT appends a BucketDNAT: the key and a random bucket, the
// map's look-up of the endpoint, the mark and the DNAT.
func (b *exprBuilder) appendBucketDNAT(out []expr.Any, s nftgen.BucketDNAT) ([]expr.Any, error) {
	if s.Buckets < 1 {
		return out, fmt.Errorf("dnat map %s with %d buckets", s.Map, s.Buckets)
	}
	_, daddr, length := b.addrOffsets()
	next := uint32(reg32Base)
	if !s.NodePort {
		out = append(out, &expr.Payload{DestRegister: reg32Base, Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: length})
		next += length / 4
	}
	out = append(out,
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: next},
		&expr.Payload{DestRegister: next + 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Numgen{Register: next + 2, Modulus: s.Buckets, Type: unix.NFT_NG_RANDOM},
		&expr.Lookup{SourceRegister: reg32Base, SetName: s.Map, DestRegister: bucketDataReg, IsDestRegSet: true},
	)
	out = append(out, markSet(^s.MarkBits, s.MarkBits)...)
	return append(out, &expr.NAT{Type: expr.NATTypeDestNAT, Family: b.nfproto(), RegAddrMin: bucketDataReg, RegProtoMin: bucketDataReg + length/4}), nil
}

// appendAddrMatch appends the match of a source or destination prefix.
func (b *exprBuilder) appendAddrMatch(out []expr.Any, s nftgen.MatchAddr) ([]expr.Any, error) {
	saddr, daddr, length := b.addrOffsets()
	off := daddr
	if s.Dir == nftgen.Saddr {
		off = saddr
	}
	addr := s.Prefix.Masked().Addr()
	if (addr.Is4()) != (b.family == nftgen.FamilyIPv4) {
		return out, fmt.Errorf("address %s does not belong to family %s", s.Prefix, b.family)
	}
	op := expr.CmpOpEq
	if s.Negate {
		op = expr.CmpOpNeq
	}
	out = append(out, &expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: length})
	if bits := s.Prefix.Bits(); bits < int(length*8) {
		mask := make([]byte, length)
		for i := 0; i < bits; i++ {
			mask[i/8] |= 0x80 >> (i % 8)
		}
		out = append(out, &expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: length, Mask: mask, Xor: make([]byte, length)})
	}
	return append(out, &expr.Cmp{Op: op, Register: reg1, Data: addr.AsSlice()}), nil
}

// appendDestBits appends a shard's guard: the destination address's last
// 32 bits, masked, compared with the shard's value (in network order, as
// the packet holds them).
func (b *exprBuilder) appendDestBits(out []expr.Any, s nftgen.DestBits) []expr.Any {
	_, daddr, length := b.addrOffsets()
	return append(out,
		&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: daddr + length - 4, Len: 4},
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: binary.BigEndian.AppendUint32(nil, s.Mask), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: binary.BigEndian.AppendUint32(nil, s.Value)},
	)
}

// appendMaskedTest appends load (a 32-bit value into reg1) and a test of
// its bits in mask: all zero when zero is true, else any set.
func appendMaskedTest(out []expr.Any, load expr.Any, mask uint32, zero bool) []expr.Any {
	op := expr.CmpOpNeq
	if zero {
		op = expr.CmpOpEq
	}
	return append(out,
		load,
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: native32(mask), Xor: native32(0)},
		&expr.Cmp{Op: op, Register: reg1, Data: native32(0)},
	)
}

// ifnameSize is IFNAMSIZ: an interface name compared whole is its bytes
// padded with NULs to this length, as nft writes it; a prefix is compared
// on its own bytes.
const ifnameSize = 16

func iifnameExprs(s nftgen.MatchIifname) ([]expr.Any, error) {
	if s.Name == "" || len(s.Name) >= ifnameSize || strings.ContainsRune(s.Name, 0) {
		return nil, fmt.Errorf("interface name %q: want 1 to %d bytes", s.Name, ifnameSize-1)
	}
	data := []byte(s.Name)
	if !s.Prefix {
		data = append(data, make([]byte, ifnameSize-len(data))...)
	}
	op := expr.CmpOpEq
	if s.Negate {
		op = expr.CmpOpNeq
	}
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: reg1}, &expr.Cmp{Op: op, Register: reg1, Data: data}}, nil
}

func markSet(mask, xor uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: reg1},
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: native32(mask), Xor: native32(xor)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg1},
	}
}

func verdictExpr(v nftgen.Verdict) *expr.Verdict {
	var kind expr.VerdictKind
	switch v.Kind {
	case nftgen.VerdictAccept:
		kind = expr.VerdictAccept
	case nftgen.VerdictDrop:
		kind = expr.VerdictDrop
	case nftgen.VerdictReturn:
		kind = expr.VerdictReturn
	case nftgen.VerdictJump:
		kind = expr.VerdictJump
	case nftgen.VerdictGoto:
		kind = expr.VerdictGoto
	}
	return &expr.Verdict{Kind: kind, Chain: v.Chain}
}

// native32 encodes v in host byte order, as marks, ct state and numgen
// results are held in registers.
func native32(v uint32) []byte {
	return binary.NativeEndian.AppendUint32(nil, v)
}

// ctStatusDNAT is IPS_DST_NAT, the conntrack status bit of DNATed
// connections.
const ctStatusDNAT = 1 << 5

// mapKeyBytes encodes a map key as the kernel stores a concatenation of
// [ipv4_addr/ipv6_addr .] inet_proto . inet_service: each field padded to
// 4 bytes.
func mapKeyBytes(k nftgen.MapKey) []byte {
	var out []byte
	if k.Addr.IsValid() {
		out = k.Addr.AsSlice()
	}
	out = append(out, k.Proto, 0, 0, 0)
	out = binary.BigEndian.AppendUint16(out, k.Port)
	return append(out, 0, 0)
}

// appendComment encodes a rule comment as the userdata TLV that nft and
// iptables-nft use, so that `nft list` shows it.
func appendComment(b []byte, comment string) []byte {
	return userdata.AppendString(b, userdata.TypeComment, comment)
}
