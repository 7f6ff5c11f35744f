package kernel

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/nftgen"
)

// notification is what the drift watch needs of one nftables notification
// (a message of the NFNLGRP_NFTABLES group). github.com/google/nftables'
// monitor drops the table of set element notifications, which is what
// tells another program's element commit (fail2ban, firewalld, a CNI)
// from a change of nftproxy's maps, so the watch decodes them itself.
type notification struct {
	// gen is set for the NEWGEN message that ends a transaction's
	// notifications; pid and comm name its process.
	gen  bool
	pid  uint32
	comm string

	family byte
	table  string
	kind   string // "table", "chain", "rule in chain", "set", "elements of set", "object", "flowtable"
	name   string
	delete bool
}

// kindElements is the kind of a set element notification, which alone
// does not make a change Ours (see classify).
const kindElements = "elements of set"

// nftaFlowtableName is NFTA_FLOWTABLE_NAME, which x/sys/unix lacks.
const nftaFlowtableName = 2

// nftables message types that the watch reads (linux/netfilter/nf_tables.h).
var notificationKinds = map[uint16]struct {
	kind   string
	name   uint16 // the attribute that names the object
	delete bool
}{
	unix.NFT_MSG_NEWTABLE: {"table", 0, false}, unix.NFT_MSG_DELTABLE: {"table", 0, true},
	unix.NFT_MSG_NEWCHAIN: {"chain", unix.NFTA_CHAIN_NAME, false}, unix.NFT_MSG_DELCHAIN: {"chain", unix.NFTA_CHAIN_NAME, true},
	unix.NFT_MSG_NEWRULE: {"rule in chain", unix.NFTA_RULE_CHAIN, false}, unix.NFT_MSG_DELRULE: {"rule in chain", unix.NFTA_RULE_CHAIN, true},
	unix.NFT_MSG_NEWSET: {"set", unix.NFTA_SET_NAME, false}, unix.NFT_MSG_DELSET: {"set", unix.NFTA_SET_NAME, true},
	unix.NFT_MSG_NEWSETELEM: {kindElements, unix.NFTA_SET_ELEM_LIST_SET, false}, unix.NFT_MSG_DELSETELEM: {kindElements, unix.NFTA_SET_ELEM_LIST_SET, true},
	unix.NFT_MSG_NEWOBJ: {"object", unix.NFTA_OBJ_NAME, false}, unix.NFT_MSG_DELOBJ: {"object", unix.NFTA_OBJ_NAME, true},
	unix.NFT_MSG_NEWFLOWTABLE: {"flowtable", nftaFlowtableName, false}, unix.NFT_MSG_DELFLOWTABLE: {"flowtable", nftaFlowtableName, true},
}

// decodeNotification reads one message; ok is false for a message the
// watch does not need. Every object's table is its first attribute
// (NFTA_TABLE_NAME, NFTA_CHAIN_TABLE, NFTA_SET_ELEM_LIST_TABLE, ...).
func decodeNotification(m netlink.Message) (n notification, ok bool, err error) {
	if uint16(m.Header.Type)>>8 != unix.NFNL_SUBSYS_NFTABLES || len(m.Data) < 4 {
		return n, false, nil
	}
	typ := uint16(m.Header.Type) & 0xff
	info, known := notificationKinds[typ]
	if typ != unix.NFT_MSG_NEWGEN && !known {
		return n, false, nil
	}
	ad, err := netlink.NewAttributeDecoder(m.Data[4:])
	if err != nil {
		return n, false, fmt.Errorf("decode nftables notification %d: %w", typ, err)
	}
	ad.ByteOrder = binary.BigEndian
	n.family = m.Data[0]
	if typ == unix.NFT_MSG_NEWGEN {
		n.gen = true
		for ad.Next() {
			switch ad.Type() {
			case unix.NFTA_GEN_PROC_PID:
				n.pid = ad.Uint32()
			case unix.NFTA_GEN_PROC_NAME:
				n.comm = ad.String()
			}
		}
		return n, true, ad.Err()
	}
	n.kind, n.delete = info.kind, info.delete
	for ad.Next() {
		switch t := ad.Type(); {
		case t == 1:
			n.table = ad.String()
		case info.name != 0 && t == info.name:
			n.name = ad.String()
		}
	}
	return n, true, ad.Err()
}

// ours reports whether the notification is about nftproxy's table of
// either family.
func (n notification) ours() bool {
	return (n.table == nftgen.TableName || nftgen.IsShardTable(n.table)) && (n.family == unix.NFPROTO_IPV4 || n.family == unix.NFPROTO_IPV6)
}

// classify sums up one transaction's notifications: a change of
// nftproxy's table, chains, rules, sets or objects is Ours; a change of
// only its maps' elements is reported without Ours (the caller compares
// element counts); anything in other tables is not reported at all.
func classify(changes []notification) (nftgen.Change, bool) {
	var elements *notification
	for i, c := range changes {
		if !c.ours() {
			continue
		}
		if c.kind == kindElements {
			if elements == nil {
				elements = &changes[i]
			}
			continue
		}
		verb := "added"
		if c.delete {
			verb = "deleted"
		}
		what := c.kind
		if c.name != "" {
			what += " " + c.name
		}
		return nftgen.Change{Ours: true, What: what + " " + verb}, true
	}
	if elements != nil {
		return nftgen.Change{What: kindElements + " " + elements.name + " changed"}, true
	}
	return nftgen.Change{}, false
}
