//go:build linux

package kernel

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

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
// other kind (the rule is then foreign), an error for malformed attributes.
func parseExpr(name string, data []byte) (expr.Any, error) {
	a := attrs{b: data}
	var out expr.Any
	switch name {
	case "payload":
		out = parsePayload(&a)
	case "cmp":
		out = parseCmp(&a)
	case "meta":
		out = parseMeta(&a)
	case "immediate":
		out = parseImmediate(&a)
	case "lookup":
		out = parseLookup(&a)
	case "bitwise":
		out = parseBitwise(&a)
	case "numgen":
		out = parseNumgen(&a)
	case "nat":
		out = parseNAT(&a)
	case "masq":
		out = parseMasq(&a)
	case "fib":
		out = parseFib(&a)
	case "ct":
		out = parseCt(&a)
	case "dynset":
		out = parseDynset(&a)
	case "reject":
		out = parseReject(&a)
	case "objref":
		out = parseObjref(&a)
	case "counter":
		out = parseCounter(&a)
	default:
		return nil, nil
	}
	return out, a.err
}
