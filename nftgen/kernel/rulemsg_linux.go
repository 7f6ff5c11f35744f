//go:build linux

package kernel

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/nftgen"
)

// Reading a large table is mostly decoding its rule messages. google/
// nftables decodes each attribute through a freshly allocated decoder and
// skips, without a trace, expressions it does not know; this decoder walks
// the attributes in place, builds the same expression values for the kinds
// nftproxy writes, and keeps the kernel's name of any other kind so that
// the rule shows it (Unknown) instead of losing it.

// parsedRule is one rule message; chain, userData and unknown
// expressions' data point into the receive buffer.
type parsedRule struct {
	chain    []byte
	handle   uint64
	userData []byte
	exprs    []ruleExpr
	// run is decodeRule's scratch, reused with the parsedRule.
	run []expr.Any
}

// ruleExpr is one expression of a rule: e, or, for a kind this decoder
// does not read, its kernel name.
type ruleExpr struct {
	e       expr.Any
	unknown string
	// data is an unknown expression's attributes (they point into the
	// receive buffer, as the message does).
	data []byte
}

// decodeRule decodes a rule read by parseRuleMsg: its runs of known
// expressions through decode, each unknown one as an Unknown statement.
// The runs are gathered in r's scratch, which the statements do not keep.
func (d *exprDecoder) decodeRule(r *parsedRule) []nftgen.Stmt {
	var out []nftgen.Stmt
	run := r.run[:0]
	for _, x := range r.exprs {
		if x.e != nil {
			run = append(run, x.e)
			continue
		}
		out = append(out, d.decode(run)...)
		run = run[:0]
		out = append(out, nftgen.Unknown{Desc: x.unknown + " expression"})
	}
	r.run = run[:0]
	if out == nil {
		// Every expression known: the usual case, without a copy.
		return d.decode(run)
	}
	return append(out, d.decode(run)...)
}

var errMalformed = errors.New("malformed netlink attribute")

// attrs walks netlink attributes in place.
type attrs struct {
	b   []byte
	err error
}

// next returns the next attribute's type (without the nested and byte
// order flags) and value.
func (a *attrs) next() (typ uint16, v []byte, ok bool) {
	if len(a.b) < 4 {
		return 0, nil, false
	}
	l := int(binary.NativeEndian.Uint16(a.b))
	if l < 4 || l > len(a.b) {
		a.err = errMalformed
		return 0, nil, false
	}
	typ, v = binary.NativeEndian.Uint16(a.b[2:])&0x3fff, a.b[4:l]
	a.b = a.b[min((l+3)&^3, len(a.b)):]
	return typ, v, true
}

func be32(v []byte) uint32 {
	if len(v) < 4 {
		return 0
	}
	return binary.BigEndian.Uint32(v)
}

func be64(v []byte) uint64 {
	if len(v) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func cstring(v []byte) string { return string(bytes.TrimRight(v, "\x00")) }

// dataValue returns the NFTA_DATA_VALUE inside a nested NFTA_*_DATA.
func dataValue(v []byte) []byte {
	a := attrs{b: v}
	for typ, val, ok := a.next(); ok; typ, val, ok = a.next() {
		if typ == unix.NFTA_DATA_VALUE {
			return val
		}
	}
	return nil
}

// parseRuleMsg decodes the payload of a NEWRULE message (after the 4-byte
// nfgenmsg header) into r, whose expression slice is reused: a caller
// decoding many rules one after another keeps one parsedRule.
func parseRuleMsg(data []byte, r *parsedRule) error {
	*r = parsedRule{exprs: r.exprs[:0], run: r.run[:0]}
	if len(data) < 4 {
		return errMalformed
	}
	a := attrs{b: data[4:]}
	for typ, v, ok := a.next(); ok; typ, v, ok = a.next() {
		switch typ {
		case unix.NFTA_RULE_CHAIN:
			r.chain = bytes.TrimRight(v, "\x00")
		case unix.NFTA_RULE_HANDLE:
			r.handle = be64(v)
		case unix.NFTA_RULE_USERDATA:
			r.userData = v
		case unix.NFTA_RULE_EXPRESSIONS:
			exprs, err := parseExprList(v, r.exprs)
			r.exprs = exprs
			if err != nil {
				return err
			}
		}
	}
	return a.err
}

// parseExprList decodes a list of NFTA_LIST_ELEM expressions, appended to
// out.
func parseExprList(v []byte, out []ruleExpr) ([]ruleExpr, error) {
	list := attrs{b: v}
	for typ, elem, ok := list.next(); ok; typ, elem, ok = list.next() {
		if typ != unix.NFTA_LIST_ELEM {
			continue
		}
		var name string
		var data []byte
		e := attrs{b: elem}
		for t, val, ok := e.next(); ok; t, val, ok = e.next() {
			switch t {
			case unix.NFTA_EXPR_NAME:
				name = cstring(val)
			case unix.NFTA_EXPR_DATA:
				data = val
			}
		}
		if e.err != nil {
			return nil, e.err
		}
		x, err := parseExpr(name, data)
		if err != nil {
			return nil, fmt.Errorf("expression %s: %w", name, err)
		}
		if x == nil {
			out = append(out, ruleExpr{unknown: name, data: data})
			continue
		}
		out = append(out, ruleExpr{e: x})
	}
	return out, list.err
}

// parseExpr decodes one expression of a kind nftproxy writes; nil for any
// other kind. It is one case per kind, which reads best as one switch.
func parseExpr(name string, data []byte) (expr.Any, error) {
	a := attrs{b: data}
	var out expr.Any
	switch name {
	case "payload":
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
		out = e
	case "cmp":
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
		out = e
	case "meta":
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
		out = e
	case "immediate":
		out = parseImmediate(&a)
	case "lookup":
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
		out = e
	case "bitwise":
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
		out = e
	case "numgen":
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
		out = e
	default:
		return parseExprMore(name, &a)
	}
	return out, a.err
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

// parseExprMore decodes the expression kinds parseExpr leaves to it. It
// is one case per kind, which reads best as one switch.
func parseExprMore(name string, a *attrs) (expr.Any, error) {
	var out expr.Any
	switch name {
	case "nat":
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
		out = e
	case "masq":
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
		out = e
	case "fib":
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
		out = e
	case "ct":
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
		out = e
	case "dynset":
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
				return nil, a.err
			}
		}
		out = e
	case "reject":
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
		out = e
	case "objref":
		e := &expr.Objref{}
		for t, v, ok := a.next(); ok; t, v, ok = a.next() {
			switch t {
			case unix.NFTA_OBJREF_IMM_TYPE:
				e.Type = int(be32(v))
			case unix.NFTA_OBJREF_IMM_NAME:
				e.Name = cstring(v)
			case unix.NFTA_OBJREF_SET_SREG, unix.NFTA_OBJREF_SET_NAME, unix.NFTA_OBJREF_SET_ID:
				// An object chosen by a map look-up: not one of nftproxy's.
				return nil, a.err
			}
		}
		out = e
	case "counter":
		e := &expr.Counter{}
		for t, v, ok := a.next(); ok; t, v, ok = a.next() {
			switch t {
			case unix.NFTA_COUNTER_BYTES:
				e.Bytes = be64(v)
			case unix.NFTA_COUNTER_PACKETS:
				e.Packets = be64(v)
			}
		}
		out = e
	default:
		return nil, nil
	}
	return out, a.err
}
