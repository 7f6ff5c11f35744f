//go:build linux

package kernel

import (
	"encoding/binary"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Rules are most of a large batch. google/nftables builds each rule
// message through several intermediate copies and keeps a map of every
// message for the echo it asks for; ruleMessage writes the same rule into
// one buffer, without the echo (nftproxy reads nothing back). The other
// operations are encoded by objEncoder, and the batch keeps the order of
// the operations (see batchWriter).

// appendAttr appends one netlink attribute (header, value, padding).
func appendAttr(b []byte, typ uint16, v []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(v)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// appendString appends a NUL-terminated string attribute.
func appendString(b []byte, typ uint16, s string) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(s)+1))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, s...)
	b = append(b, 0)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// ruleMessage encodes a NEWRULE that appends exprs (and the comment in
// userData) to chain and adds it to batch (a nil batch: the message is
// only returned). scratch, if not nil, is a buffer to build it in (reused
// from one rule to the next).
func ruleMessage(fam nftables.TableFamily, table, chain string, exprs []expr.Any, userData []byte, scratch *[]byte, batch *wireBatch) (netlink.Message, error) {
	var b []byte
	if scratch != nil {
		b = (*scratch)[:0]
		defer func() { *scratch = b }()
	}
	b = append(b, byte(fam), unix.NFNETLINK_V0, 0, 0)
	b = appendString(b, unix.NFTA_RULE_TABLE, table)
	b = appendString(b, unix.NFTA_RULE_CHAIN, chain)
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	for _, e := range exprs {
		var err error
		if b, err = appendExpr(b, byte(fam), e); err != nil {
			return netlink.Message{}, fmt.Errorf("expression %T: %w", e, err)
		}
	}
	binary.NativeEndian.PutUint16(b[start:], uint16(len(b)-start))
	binary.NativeEndian.PutUint16(b[start+2:], unix.NLA_F_NESTED|unix.NFTA_RULE_EXPRESSIONS)
	if userData != nil {
		b = appendAttr(b, unix.NFTA_RULE_USERDATA, userData)
	}
	h := netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWRULE), Flags: netlink.Request | netlink.Create | netlink.Append}
	return batch.add(h, b), nil
}

// addBatchMarker adds the begin or end message of an nf_tables batch.
func addBatchMarker(batch *wireBatch, typ uint16) {
	batch.add(netlink.Header{Type: netlink.HeaderType(typ), Flags: netlink.Request},
		[]byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, unix.NFNL_SUBSYS_NFTABLES})
}

// isBatchBoundary reports whether m begins or ends a batch.
func isBatchBoundary(m netlink.Message) bool {
	return m.Header.Type == netlink.HeaderType(unix.NFNL_MSG_BATCH_BEGIN) || m.Header.Type == netlink.HeaderType(unix.NFNL_MSG_BATCH_END)
}
