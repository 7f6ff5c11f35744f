package kernel

import (
	"encoding/binary"
	"fmt"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Rules are most of what a sync sends, and google/nftables marshals each
// expression through a list of attributes, a buffer per nesting level and
// a copy at every level: a sixth of a cold sync's allocations. appendExpr
// writes the same bytes straight into the rule's buffer for the kinds
// nftproxy writes, and asks the library for any other kind. The library
// stays the reference: TestAppendExprMatchesLibrary compares the two on
// every variant nftproxy builds and every rule of the generated corpus.

// wire appends netlink attributes to a buffer.
type wire []byte

// attr appends an attribute holding v, padded to 4 bytes.
func (w wire) attr(typ uint16, v []byte) wire {
	w = binary.NativeEndian.AppendUint16(w, uint16(4+len(v)))
	w = binary.NativeEndian.AppendUint16(w, typ)
	w = append(w, v...)
	return w.pad(len(v))
}

// u32 appends a big-endian 32-bit attribute.
func (w wire) u32(typ uint16, v uint32) wire {
	w = binary.NativeEndian.AppendUint16(w, 8)
	w = binary.NativeEndian.AppendUint16(w, typ)
	return binary.BigEndian.AppendUint32(w, v)
}

// u64 appends a big-endian 64-bit attribute.
func (w wire) u64(typ uint16, v uint64) wire {
	w = binary.NativeEndian.AppendUint16(w, 12)
	w = binary.NativeEndian.AppendUint16(w, typ)
	return binary.BigEndian.AppendUint64(w, v)
}

// str appends a NUL-terminated string attribute.
func (w wire) str(typ uint16, s string) wire {
	w = binary.NativeEndian.AppendUint16(w, uint16(4+len(s)+1))
	w = binary.NativeEndian.AppendUint16(w, typ)
	w = append(w, s...)
	w = append(w, 0)
	return w.pad(len(s) + 1)
}

// pad appends the zeros that align a value of n bytes to 4.
func (w wire) pad(n int) wire {
	for ; n%4 != 0; n++ {
		w = append(w, 0)
	}
	return w
}

// nest opens a nested attribute; end closes it.
func (w wire) nest(typ uint16) (wire, int) {
	start := len(w)
	w = binary.NativeEndian.AppendUint16(w, 0)
	return binary.NativeEndian.AppendUint16(w, unix.NLA_F_NESTED|typ), start
}

// group opens an attribute that holds attributes but, as some of the
// library's do, lacks the nested flag; end closes it.
func (w wire) group(typ uint16) (wire, int) {
	start := len(w)
	w = binary.NativeEndian.AppendUint16(w, 0)
	return binary.NativeEndian.AppendUint16(w, typ), start
}

func (w wire) end(start int) wire {
	binary.NativeEndian.PutUint16(w[start:], uint16(len(w)-start))
	return w
}

// data appends a nested attribute holding one NFTA_DATA_VALUE.
func (w wire) data(typ uint16, v []byte) wire {
	w, start := w.nest(typ)
	return w.attr(unix.NFTA_DATA_VALUE, v).end(start)
}

// verdict appends a nested attribute typ holding verdict v (its code and
// chain), as an immediate's data or a map element's.
func (w wire) verdict(typ uint16, v *expr.Verdict) wire {
	w, outer := w.nest(typ)
	w, inner := w.nest(unix.NFTA_DATA_VERDICT)
	w = w.u32(unix.NFTA_VERDICT_CODE, uint32(v.Kind))
	if v.Chain != "" {
		w = w.str(unix.NFTA_VERDICT_CHAIN, v.Chain)
	}
	return w.end(inner).end(outer)
}

// register appends a source or destination register attribute.
func (w wire) register(source bool, sreg, dreg uint16, r uint32) wire {
	if source {
		return w.u32(sreg, r)
	}
	return w.u32(dreg, r)
}

// NAT and masquerade flags, as the kernel's nf_nat.h defines them.
const (
	natRangeProtoSpecified   = 0x2
	natRangeProtoRandom      = 0x4
	natRangePersistent       = 0x8
	natRangeProtoRandomFully = 0x10
	natRangePrefix           = 0x40
)

func flag(on bool, v uint32) uint32 {
	if on {
		return v
	}
	return 0
}

// appendExpr appends e as one NFTA_LIST_ELEM of a rule's expressions. It
// is one case per expression type, which reads best as one switch.
func appendExpr(b []byte, fam byte, e expr.Any) ([]byte, error) {
	w, elem := wire(b).nest(unix.NFTA_LIST_ELEM)
	var data int
	start := func(n string) {
		w = w.str(unix.NFTA_EXPR_NAME, n)
		w, data = w.nest(unix.NFTA_EXPR_DATA)
	}
	switch e := e.(type) {
	case *expr.Payload:
		start("payload")
		if e.OperationType == expr.PayloadWrite {
			w = w.u32(unix.NFTA_PAYLOAD_SREG, e.SourceRegister)
		} else {
			w = w.u32(unix.NFTA_PAYLOAD_DREG, e.DestRegister)
		}
		w = w.u32(unix.NFTA_PAYLOAD_BASE, uint32(e.Base)).u32(unix.NFTA_PAYLOAD_OFFSET, e.Offset).u32(unix.NFTA_PAYLOAD_LEN, e.Len)
		if e.CsumType > 0 {
			w = w.u32(unix.NFTA_PAYLOAD_CSUM_TYPE, uint32(e.CsumType)).u32(unix.NFTA_PAYLOAD_CSUM_OFFSET, e.CsumOffset)
			if e.CsumFlags > 0 {
				w = w.u32(unix.NFTA_PAYLOAD_CSUM_FLAGS, e.CsumFlags)
			}
		}
	case *expr.Cmp:
		start("cmp")
		w = w.u32(unix.NFTA_CMP_SREG, e.Register).u32(unix.NFTA_CMP_OP, uint32(e.Op)).data(unix.NFTA_CMP_DATA, e.Data)
	case *expr.Meta:
		start("meta")
		w = w.u32(unix.NFTA_META_KEY, uint32(e.Key)).register(e.SourceRegister, unix.NFTA_META_SREG, unix.NFTA_META_DREG, e.Register)
	case *expr.Ct:
		if !ctWithoutDirection(e) {
			return fallbackExpr(b, fam, e)
		}
		start("ct")
		w = w.u32(unix.NFTA_CT_KEY, uint32(e.Key)).register(e.SourceRegister, unix.NFTA_CT_SREG, unix.NFTA_CT_DREG, e.Register)
	case *expr.Immediate:
		start("immediate")
		w = w.u32(unix.NFTA_IMMEDIATE_DREG, e.Register).data(unix.NFTA_IMMEDIATE_DATA, e.Data)
	case *expr.Verdict:
		start("immediate")
		w = w.u32(unix.NFTA_IMMEDIATE_DREG, unix.NFT_REG_VERDICT).verdict(unix.NFTA_IMMEDIATE_DATA, e)
	case *expr.Lookup:
		start("lookup")
		if e.SourceRegister != 0 {
			w = w.u32(unix.NFTA_LOOKUP_SREG, e.SourceRegister)
		}
		if e.IsDestRegSet {
			w = w.u32(unix.NFTA_LOOKUP_DREG, e.DestRegister)
		}
		if e.Invert {
			w = w.u32(unix.NFTA_LOOKUP_FLAGS, unix.NFT_LOOKUP_F_INV)
		}
		w = w.str(unix.NFTA_LOOKUP_SET, e.SetName).u32(unix.NFTA_LOOKUP_SET_ID, e.SetID)
	case *expr.NAT:
		start("nat")
		w = natAttrs(w, e)
	case *expr.Masq:
		start("masq")
		w = masqAttrs(w, e)
	case *expr.Bitwise:
		start("bitwise")
		w = w.u32(unix.NFTA_BITWISE_SREG, e.SourceRegister).u32(unix.NFTA_BITWISE_DREG, e.DestRegister).u32(unix.NFTA_BITWISE_LEN, e.Len).
			data(unix.NFTA_BITWISE_MASK, e.Mask).data(unix.NFTA_BITWISE_XOR, e.Xor)
	case *expr.Numgen:
		if e.Type != unix.NFT_NG_INCREMENTAL && e.Type != unix.NFT_NG_RANDOM {
			return b, fmt.Errorf("unsupported numgen type %d", e.Type)
		}
		start("numgen")
		w = w.u32(unix.NFTA_NG_DREG, e.Register).u32(unix.NFTA_NG_MODULUS, e.Modulus).u32(unix.NFTA_NG_TYPE, e.Type).u32(unix.NFTA_NG_OFFSET, e.Offset)
	case *expr.Objref:
		start("objref")
		// Without a NUL, as the library writes it and the kernel takes it.
		w = w.u32(unix.NFTA_OBJREF_IMM_TYPE, uint32(e.Type)).attr(unix.NFTA_OBJREF_IMM_NAME, []byte(e.Name))
	default:
		return fallbackExpr(b, fam, e)
	}
	return w.end(data).end(elem), nil
}

// natAttrs writes a nat expression's attributes.
func natAttrs(w wire, e *expr.NAT) wire {
	w = w.u32(unix.NFTA_NAT_TYPE, uint32(e.Type)).u32(unix.NFTA_NAT_FAMILY, e.Family)
	if e.RegAddrMin != 0 {
		w = w.u32(unix.NFTA_NAT_REG_ADDR_MIN, e.RegAddrMin)
		if e.RegAddrMax != 0 {
			w = w.u32(unix.NFTA_NAT_REG_ADDR_MAX, e.RegAddrMax)
		}
	}
	if e.RegProtoMin != 0 {
		w = w.u32(unix.NFTA_NAT_REG_PROTO_MIN, e.RegProtoMin)
		if e.RegProtoMax != 0 {
			w = w.u32(unix.NFTA_NAT_REG_PROTO_MAX, e.RegProtoMax)
		}
	}
	flags := flag(e.Random, natRangeProtoRandom) | flag(e.FullyRandom, natRangeProtoRandomFully) | flag(e.Persistent, natRangePersistent) |
		flag(e.Prefix, natRangePrefix) | flag(e.Specified, natRangeProtoSpecified)
	if flags != 0 {
		w = w.u32(unix.NFTA_NAT_FLAGS, flags)
	}
	return w
}

// masqAttrs writes a masq expression's attributes.
func masqAttrs(w wire, e *expr.Masq) wire {
	if e.ToPorts {
		w = w.u32(unix.NFTA_MASQ_REG_PROTO_MIN, e.RegProtoMin)
		if e.RegProtoMax != 0 {
			w = w.u32(unix.NFTA_MASQ_REG_PROTO_MAX, e.RegProtoMax)
		}
	} else if flags := flag(e.Random, natRangeProtoRandom) | flag(e.FullyRandom, natRangeProtoRandomFully) | flag(e.Persistent, natRangePersistent); flags != 0 {
		w = w.u32(unix.NFTA_MASQ_FLAGS, flags)
	}
	return w
}

// ctWithoutDirection reports whether a ct expression carries no direction
// attribute, the only form appendExpr writes itself.
func ctWithoutDirection(e *expr.Ct) bool {
	switch e.Key {
	case expr.CtKeySRC, expr.CtKeyDST, expr.CtKeyPROTOSRC, expr.CtKeyPROTODST, expr.CtKeySRCIP, expr.CtKeyDSTIP, expr.CtKeySRCIP6, expr.CtKeyDSTIP6:
		return false
	case expr.CtKeyPKTS, expr.CtKeyBYTES, expr.CtKeyAVGPKT, expr.CtKeyL3PROTOCOL, expr.CtKeyPROTOCOL:
		return !e.OptDirection
	}
	return true
}

// fallbackExpr appends e as the library marshals it.
func fallbackExpr(b []byte, fam byte, e expr.Any) ([]byte, error) {
	data, err := expr.Marshal(fam, e)
	if err != nil {
		return b, err
	}
	return []byte(wire(b).attr(unix.NLA_F_NESTED|unix.NFTA_LIST_ELEM, data)), nil
}
