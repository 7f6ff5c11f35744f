//go:build linux

package kernel

import (
	"time"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// parsePayload decodes a payload expression's attributes.
func parsePayload(a *attrs) expr.Any {
	e := &expr.Payload{}
	for t, v, ok := a.next(); ok; t, v, ok = a.next() {
		switch t {
		case unix.NFTA_PAYLOAD_DREG:
			e.DestRegister = be32(v)
		case unix.NFTA_PAYLOAD_SREG:
			e.SourceRegister, e.OperationType = be32(v), expr.PayloadWrite
		case unix.NFTA_PAYLOAD_BASE:
			e.Base = expr.PayloadBase(be32(v))
		case unix.NFTA_PAYLOAD_OFFSET:
			e.Offset = be32(v)
		case unix.NFTA_PAYLOAD_LEN:
			e.Len = be32(v)
		case unix.NFTA_PAYLOAD_CSUM_TYPE:
			e.CsumType = expr.PayloadCsumType(be32(v))
		case unix.NFTA_PAYLOAD_CSUM_OFFSET:
			e.CsumOffset = be32(v)
		case unix.NFTA_PAYLOAD_CSUM_FLAGS:
			e.CsumFlags = be32(v)
		}
	}
	return e
}

// parseCmp decodes a cmp expression's attributes.
func parseCmp(a *attrs) expr.Any {
	e := &expr.Cmp{}
	for t, v, ok := a.next(); ok; t, v, ok = a.next() {
		switch t {
		case unix.NFTA_CMP_SREG:
			e.Register = be32(v)
		case unix.NFTA_CMP_OP:
			e.Op = expr.CmpOp(be32(v))
		case unix.NFTA_CMP_DATA:
			e.Data = dataValue(v)
		}
	}
	return e
}

// parseMeta decodes a meta expression's attributes.
func parseMeta(a *attrs) expr.Any {
	e := &expr.Meta{}
	for t, v, ok := a.next(); ok; t, v, ok = a.next() {
		switch t {
		case unix.NFTA_META_SREG:
			e.Register, e.SourceRegister = be32(v), true
		case unix.NFTA_META_DREG:
			e.Register = be32(v)
		case unix.NFTA_META_KEY:
			e.Key = expr.MetaKey(be32(v))
		}
	}
	return e
}

// parseImmediate decodes an immediate, which is a verdict when it writes
// the verdict register without a value (as google/nftables reads it).
func parseImmediate(a *attrs) expr.Any {
	e := &expr.Immediate{}
	var verdict []byte
	for t, v, ok := a.next(); ok; t, v, ok = a.next() {
		switch t {
		case unix.NFTA_IMMEDIATE_DREG:
			e.Register = be32(v)
		case unix.NFTA_IMMEDIATE_DATA:
			d := attrs{b: v}
			for dt, dv, ok := d.next(); ok; dt, dv, ok = d.next() {
				switch dt {
				case unix.NFTA_DATA_VALUE:
					e.Data = dv
				case unix.NFTA_DATA_VERDICT:
					verdict = dv
				}
			}
		}
	}
	if e.Register != unix.NFT_REG_VERDICT || len(e.Data) != 0 {
		return e
	}
	out := &expr.Verdict{}
	d := attrs{b: verdict}
	for t, v, ok := d.next(); ok; t, v, ok = d.next() {
		switch t {
		case unix.NFTA_VERDICT_CODE:
			out.Kind = expr.VerdictKind(int32(be32(v)))
		case unix.NFTA_VERDICT_CHAIN:
			out.Chain = cstring(v)
		}
	}
	return out
}

// parseLookup decodes a lookup expression's attributes.
func parseLookup(a *attrs) expr.Any {
	e := &expr.Lookup{}
	for t, v, ok := a.next(); ok; t, v, ok = a.next() {
		switch t {
		case unix.NFTA_LOOKUP_SET:
			e.SetName = cstring(v)
		case unix.NFTA_LOOKUP_SET_ID:
			e.SetID = be32(v)
		case unix.NFTA_LOOKUP_SREG:
			e.SourceRegister = be32(v)
		case unix.NFTA_LOOKUP_DREG:
			e.DestRegister, e.IsDestRegSet = be32(v), true
		case unix.NFTA_LOOKUP_FLAGS:
			e.Invert = be32(v)&unix.NFT_LOOKUP_F_INV != 0
		}
	}
	return e
}

// parseBitwise decodes a bitwise expression's attributes.
func parseBitwise(a *attrs) expr.Any {
	e := &expr.Bitwise{}
	for t, v, ok := a.next(); ok; t, v, ok = a.next() {
		switch t {
		case unix.NFTA_BITWISE_SREG:
			e.SourceRegister = be32(v)
		case unix.NFTA_BITWISE_DREG:
			e.DestRegister = be32(v)
		case unix.NFTA_BITWISE_LEN:
			e.Len = be32(v)
		case unix.NFTA_BITWISE_MASK:
			e.Mask = dataValue(v)
		case unix.NFTA_BITWISE_XOR:
			e.Xor = dataValue(v)
		}
	}
	return e
}

// parseNumgen decodes a numgen expression's attributes.
func parseNumgen(a *attrs) expr.Any {
	e := &expr.Numgen{}
	for t, v, ok := a.next(); ok; t, v, ok = a.next() {
		switch t {
		case unix.NFTA_NG_DREG:
			e.Register = be32(v)
		case unix.NFTA_NG_MODULUS:
			e.Modulus = be32(v)
		case unix.NFTA_NG_TYPE:
			e.Type = be32(v)
		case unix.NFTA_NG_OFFSET:
			e.Offset = be32(v)
		}
	}
	return e
}

// parseNAT decodes a nat expression's attributes.
func parseNAT(a *attrs) expr.Any {
	e := &expr.NAT{}
	for t, v, ok := a.next(); ok; t, v, ok = a.next() {
		switch t {
		case unix.NFTA_NAT_TYPE:
			e.Type = expr.NATType(be32(v))
		case unix.NFTA_NAT_FAMILY:
			e.Family = be32(v)
		case unix.NFTA_NAT_REG_ADDR_MIN:
			e.RegAddrMin = be32(v)
		case unix.NFTA_NAT_REG_ADDR_MAX:
			e.RegAddrMax = be32(v)
		case unix.NFTA_NAT_REG_PROTO_MIN:
			e.RegProtoMin = be32(v)
		case unix.NFTA_NAT_REG_PROTO_MAX:
			e.RegProtoMax = be32(v)
		case unix.NFTA_NAT_FLAGS:
			f := be32(v)
			e.Persistent, e.Random, e.FullyRandom = f&expr.NF_NAT_RANGE_PERSISTENT != 0, f&expr.NF_NAT_RANGE_PROTO_RANDOM != 0, f&expr.NF_NAT_RANGE_PROTO_RANDOM_FULLY != 0
			e.Prefix, e.Specified = f&expr.NF_NAT_RANGE_PREFIX != 0, f&expr.NF_NAT_RANGE_PROTO_SPECIFIED != 0
		}
	}
	return e
}

// parseMasq decodes a masq expression's attributes.
func parseMasq(a *attrs) expr.Any {
	e := &expr.Masq{}
	for t, v, ok := a.next(); ok; t, v, ok = a.next() {
		switch t {
		case unix.NFTA_MASQ_REG_PROTO_MIN:
			e.ToPorts, e.RegProtoMin = true, be32(v)
		case unix.NFTA_MASQ_REG_PROTO_MAX:
			e.RegProtoMax = be32(v)
		case unix.NFTA_MASQ_FLAGS:
			f := be32(v)
			e.Persistent, e.Random, e.FullyRandom = f&expr.NF_NAT_RANGE_PERSISTENT != 0, f&expr.NF_NAT_RANGE_PROTO_RANDOM != 0, f&expr.NF_NAT_RANGE_PROTO_RANDOM_FULLY != 0
		}
	}
	return e
}

// parseFib decodes a fib expression's attributes.
func parseFib(a *attrs) expr.Any {
	e := &expr.Fib{}
	for t, v, ok := a.next(); ok; t, v, ok = a.next() {
		switch t {
		case unix.NFTA_FIB_DREG:
			e.Register = be32(v)
		case unix.NFTA_FIB_RESULT:
			switch be32(v) {
			case unix.NFT_FIB_RESULT_OIF:
				e.ResultOIF = true
			case unix.NFT_FIB_RESULT_OIFNAME:
				e.ResultOIFNAME = true
			case unix.NFT_FIB_RESULT_ADDRTYPE:
				e.ResultADDRTYPE = true
			}
		case unix.NFTA_FIB_FLAGS:
			f := be32(v)
			e.FlagSADDR, e.FlagDADDR, e.FlagMARK = f&unix.NFTA_FIB_F_SADDR != 0, f&unix.NFTA_FIB_F_DADDR != 0, f&unix.NFTA_FIB_F_MARK != 0
			e.FlagIIF, e.FlagOIF, e.FlagPRESENT = f&unix.NFTA_FIB_F_IIF != 0, f&unix.NFTA_FIB_F_OIF != 0, f&unix.NFTA_FIB_F_PRESENT != 0
		}
	}
	return e
}

// parseCt decodes a ct expression's attributes.
func parseCt(a *attrs) expr.Any {
	e := &expr.Ct{}
	direction := false
	for t, v, ok := a.next(); ok; t, v, ok = a.next() {
		switch t {
		case unix.NFTA_CT_KEY:
			e.Key = expr.CtKey(be32(v))
		case unix.NFTA_CT_DREG:
			e.Register = be32(v)
		case unix.NFTA_CT_DIRECTION:
			if len(v) > 0 {
				e.Direction = uint32(v[0])
			}
			direction = true
		case unix.NFTA_CT_SREG:
			e.SourceRegister, e.Register = true, be32(v)
		}
	}
	switch e.Key {
	case expr.CtKeyPKTS, expr.CtKeyBYTES, expr.CtKeyAVGPKT, expr.CtKeyL3PROTOCOL, expr.CtKeyPROTOCOL:
		e.OptDirection = direction
	}
	return e
}

// parseDynset decodes a dynset; nil when it nests statements, which nftproxy never
// writes (the rule is then shown as foreign).
func parseDynset(a *attrs) expr.Any {
	e := &expr.Dynset{}
	for t, v, ok := a.next(); ok; t, v, ok = a.next() {
		switch t {
		case unix.NFTA_DYNSET_SET_NAME:
			e.SetName = cstring(v)
		case unix.NFTA_DYNSET_SET_ID:
			e.SetID = be32(v)
		case unix.NFTA_DYNSET_SREG_KEY:
			e.SrcRegKey = be32(v)
		case unix.NFTA_DYNSET_SREG_DATA:
			e.SrcRegData = be32(v)
		case unix.NFTA_DYNSET_OP:
			e.Operation = be32(v)
		case unix.NFTA_DYNSET_TIMEOUT:
			e.Timeout = time.Duration(be64(v)) * time.Millisecond
		case unix.NFTA_DYNSET_FLAGS:
			e.Invert = be32(v)&unix.NFT_DYNSET_F_INV != 0
		case unix.NFTA_DYNSET_EXPR, expr.NFTA_DYNSET_EXPRESSIONS:
			// Statements nested in the set update: nftproxy writes
			// none; show the rule as foreign.
			return nil
		}
	}
	return e
}

// parseReject decodes a reject expression's attributes.
func parseReject(a *attrs) expr.Any {
	e := &expr.Reject{}
	for t, v, ok := a.next(); ok; t, v, ok = a.next() {
		switch t {
		case unix.NFTA_REJECT_TYPE:
			e.Type = be32(v)
		case unix.NFTA_REJECT_ICMP_CODE:
			if len(v) > 0 {
				e.Code = v[0]
			}
		}
	}
	return e
}

// parseObjref decodes an objref; nil for an object chosen by a map look-up,
// which nftproxy never writes.
func parseObjref(a *attrs) expr.Any {
	e := &expr.Objref{}
	for t, v, ok := a.next(); ok; t, v, ok = a.next() {
		switch t {
		case unix.NFTA_OBJREF_IMM_TYPE:
			e.Type = int(be32(v))
		case unix.NFTA_OBJREF_IMM_NAME:
			e.Name = cstring(v)
		case unix.NFTA_OBJREF_SET_SREG, unix.NFTA_OBJREF_SET_NAME, unix.NFTA_OBJREF_SET_ID:
			// An object chosen by a map look-up: not one of nftproxy's.
			return nil
		}
	}
	return e
}

// parseCounter decodes a counter expression's attributes.
func parseCounter(a *attrs) expr.Any {
	e := &expr.Counter{}
	for t, v, ok := a.next(); ok; t, v, ok = a.next() {
		switch t {
		case unix.NFTA_COUNTER_BYTES:
			e.Bytes = be64(v)
		case unix.NFTA_COUNTER_PACKETS:
			e.Packets = be64(v)
		}
	}
	return e
}
