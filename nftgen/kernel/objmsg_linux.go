//go:build linux

package kernel

import (
	"fmt"
	"math"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The messages of a batch other than rules and regular chains (tables,
// base chains, flushes and deletions, sets and maps, their elements, the
// named counters), encoded by nftproxy as google/nftables' Conn encodes
// them, attribute for attribute: TestObjectMessagesMatchLibrary compares
// the two on every kind nftproxy sends. The library's declarations
// (nftables.Set, SetElement, SetDatatype) describe what is encoded; no
// connection of the library takes part in a commit.

// objEncoder encodes the messages of one batch for one table; each message
// is built in scratch and added to batch, and returned (as it is in the
// batch) for the tests that compare it with the library's.
type objEncoder struct {
	family  nftables.TableFamily
	table   string
	scratch []byte
	batch   *wireBatch
	// lastID numbers the sets the batch declares (NFTA_SET_ID, which a
	// rule of the same batch can name).
	lastID uint32
}

// maxElementBytes bounds the encoded elements of one message: the length
// of a netlink attribute is 16 bits (the library's limit, so that both
// split a long list at the same element).
const maxElementBytes = math.MaxUint16 - 1024

func nftMsg(typ int) netlink.HeaderType {
	return netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | typ)
}

// start begins a message's payload: the nfgenmsg header.
func (e *objEncoder) start() wire {
	return append(wire(e.scratch[:0]), byte(e.family), unix.NFNETLINK_V0, 0, 0)
}

// finish adds the message of w to the batch.
func (e *objEncoder) finish(typ int, flags netlink.HeaderFlags, w wire) netlink.Message {
	e.scratch = w
	return e.batch.add(netlink.Header{Type: nftMsg(typ), Flags: netlink.Request | flags}, w)
}

// addTable declares the table (a table that exists is kept).
func (e *objEncoder) addTable() netlink.Message {
	return e.finish(unix.NFT_MSG_NEWTABLE, netlink.Create, e.start().str(unix.NFTA_TABLE_NAME, e.table).u32(unix.NFTA_TABLE_FLAGS, 0))
}

// deleteTable deletes the table and everything in it.
func (e *objEncoder) deleteTable() netlink.Message {
	return e.finish(unix.NFT_MSG_DELTABLE, 0, e.start().str(unix.NFTA_TABLE_NAME, e.table).u32(unix.NFTA_TABLE_FLAGS, 0))
}

// chainStart begins a chain message: its table and name.
func (e *objEncoder) chainStart(name string) wire {
	return e.start().str(unix.NFTA_CHAIN_TABLE, e.table).str(unix.NFTA_CHAIN_NAME, name)
}

// addRegularChain declares a chain without a hook (a cold sync declares a
// million of them).
func (e *objEncoder) addRegularChain(name string) netlink.Message {
	return e.finish(unix.NFT_MSG_NEWCHAIN, netlink.Create, e.chainStart(name))
}

// addBaseChain declares a chain on a hook, with its type and policy.
func (e *objEncoder) addBaseChain(c *nftables.Chain) netlink.Message {
	w := e.chainStart(c.Name)
	if c.Hooknum != nil && c.Priority != nil {
		var at int
		w, at = w.nest(unix.NFTA_CHAIN_HOOK)
		w = w.u32(unix.NFTA_HOOK_HOOKNUM, uint32(*c.Hooknum)).u32(unix.NFTA_HOOK_PRIORITY, uint32(*c.Priority)).end(at)
	}
	if c.Policy != nil {
		w = w.u32(unix.NFTA_CHAIN_POLICY, uint32(*c.Policy))
	}
	if c.Type != "" {
		w = w.str(unix.NFTA_CHAIN_TYPE, string(c.Type))
	}
	return e.finish(unix.NFT_MSG_NEWCHAIN, netlink.Create, w)
}

// flushChain deletes every rule of the chain.
func (e *objEncoder) flushChain(name string) netlink.Message {
	return e.finish(unix.NFT_MSG_DELRULE, 0, e.start().str(unix.NFTA_RULE_TABLE, e.table).str(unix.NFTA_RULE_CHAIN, name))
}

// deleteChain deletes an empty chain nothing jumps to.
func (e *objEncoder) deleteChain(name string) netlink.Message {
	return e.finish(unix.NFT_MSG_DELCHAIN, 0, e.chainStart(name))
}

// deleteSet deletes a set or map with its elements.
func (e *objEncoder) deleteSet(name string) netlink.Message {
	return e.finish(unix.NFT_MSG_DELSET, 0, e.start().str(unix.NFTA_SET_TABLE, e.table).str(unix.NFTA_SET_NAME, name))
}

// flushSet deletes every element of a set or map.
func (e *objEncoder) flushSet(name string) netlink.Message {
	return e.finish(unix.NFT_MSG_DELSETELEM, 0, e.start().str(unix.NFTA_SET_ELEM_LIST_TABLE, e.table).str(unix.NFTA_SET_ELEM_LIST_SET, name))
}

// addCounter declares a named counter (one that exists keeps its counts).
func (e *objEncoder) addCounter(name string) netlink.Message {
	w := e.start().str(unix.NFTA_OBJ_TABLE, e.table).str(unix.NFTA_OBJ_NAME, name).u32(unix.NFTA_OBJ_TYPE, unix.NFT_OBJECT_COUNTER)
	w, at := w.nest(unix.NFTA_OBJ_DATA)
	w = w.u64(unix.NFTA_COUNTER_BYTES, 0).u64(unix.NFTA_COUNTER_PACKETS, 0).end(at)
	return e.finish(unix.NFT_MSG_NEWOBJ, netlink.Create, w)
}

// addSet declares s (giving it the batch's next set ID) and adds elems to
// it. It encodes the kinds of set nftproxy declares: named maps and sets,
// concatenated or not, with a timeout and the dynamic flag or not, with a
// comment or not.
func (e *objEncoder) addSet(s *nftables.Set, elems []nftables.SetElement) ([]netlink.Message, error) {
	if s.Anonymous || s.Constant || s.Interval || s.Counter || s.Size != 0 || s.KeyByteOrder != nil || s.AutoMerge || s.DataInterval {
		return nil, fmt.Errorf("set %s: a kind of set nftproxy does not declare", s.Name)
	}
	if s.ID == 0 {
		e.lastID++
		s.ID = e.lastID
	}
	var flags uint32
	if s.IsMap {
		flags |= unix.NFT_SET_MAP
	}
	if s.HasTimeout {
		flags |= unix.NFT_SET_TIMEOUT
	}
	if s.Dynamic {
		flags |= unix.NFT_SET_EVAL
	}
	if s.Concatenation {
		flags |= nftables.NFT_SET_CONCAT
	}
	w := e.start().str(unix.NFTA_SET_TABLE, e.table).str(unix.NFTA_SET_NAME, s.Name).u32(unix.NFTA_SET_FLAGS, flags).
		u32(unix.NFTA_SET_KEY_TYPE, s.KeyType.GetNFTMagic()).u32(unix.NFTA_SET_KEY_LEN, s.KeyType.Bytes).u32(unix.NFTA_SET_ID, s.ID)
	if s.IsMap {
		dataType := s.DataType.GetNFTMagic()
		if dataType == nftables.TypeVerdict.GetNFTMagic() {
			dataType = unix.NFT_DATA_VERDICT
		}
		w = w.u32(unix.NFTA_SET_DATA_TYPE, dataType).u32(unix.NFTA_SET_DATA_LEN, s.DataType.Bytes)
	}
	if s.HasTimeout && s.Timeout != 0 {
		w = w.u64(unix.NFTA_SET_TIMEOUT, uint64(s.Timeout.Milliseconds()))
	}
	if s.Concatenation {
		// The length of each field of the key.
		var desc, concat int
		w, desc = w.nest(unix.NFTA_SET_DESC)
		w, concat = w.nest(nftables.NFTA_SET_DESC_CONCAT)
		for _, field := range nftables.ConcatSetTypeElements(s.KeyType) {
			// Each length nested in NFTA_SET_DESC_SIZE (the kernel's
			// NFTA_LIST_ELEM), as the library writes it: without the
			// nested flag.
			var size int
			w, size = w.group(unix.NFTA_SET_DESC_SIZE)
			w = w.u32(unix.NFTA_DATA_VALUE, field.Bytes).end(size)
		}
		w = w.end(concat).end(desc)
	}
	if s.Comment != "" {
		w = w.attr(unix.NFTA_SET_USERDATA, userdata.AppendString(nil, userdata.NFTNL_UDATA_SET_COMMENT, s.Comment))
	}
	msgs := []netlink.Message{e.finish(unix.NFT_MSG_NEWSET, netlink.Create, w)}
	return append(msgs, e.elements(unix.NFT_MSG_NEWSETELEM, s, elems)...), nil
}

// elements adds (NEWSETELEM) or deletes (DELSETELEM) elems of s, in as
// many messages as their size needs. Elements are numbered across the
// messages, as the library numbers them.
func (e *objEncoder) elements(typ int, s *nftables.Set, elems []nftables.SetElement) []netlink.Message {
	var out []netlink.Message
	for start := 0; start < len(elems); {
		w := e.start().str(unix.NFTA_SET_ELEM_LIST_SET, s.Name).u32(unix.NFTA_SET_ELEM_LIST_SET_ID, s.ID).str(unix.NFTA_SET_ELEM_LIST_TABLE, e.table)
		w, list := w.nest(unix.NFTA_SET_ELEM_LIST_ELEMENTS)
		size, j := 0, start
		for ; j < len(elems); j++ {
			before := len(w)
			w = appendElement(w, uint16(j+1), &elems[j])
			item := len(w) - before
			if size+item > maxElementBytes && j > start {
				w = w[:before]
				break
			}
			size += item
		}
		out = append(out, e.finish(typ, netlink.Create, w.end(list)))
		start = j
	}
	return out
}

// appendElement appends element number i: its key, its verdict and its
// comment.
func appendElement(w wire, i uint16, el *nftables.SetElement) wire {
	w, at := w.nest(i)
	w = w.data(unix.NFTA_SET_ELEM_KEY, el.Key)
	if el.VerdictData != nil {
		w = w.verdict(unix.NFTA_SET_ELEM_DATA, el.VerdictData)
	}
	if el.Comment != "" {
		w = w.attr(unix.NFTA_SET_ELEM_USERDATA, userdata.AppendString(nil, userdata.NFTNL_UDATA_SET_ELEM_COMMENT, el.Comment))
	}
	return w.end(at)
}
