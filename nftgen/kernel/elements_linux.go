//go:build linux

package kernel

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// A set's elements come in a dump that the kernel restarts for every
// buffer it fills, walking the set from its first element to where the
// last buffer ended. google/nftables reads through mdlayher/netlink, which
// receives into buffers of the size of what is waiting, so the kernel
// never learns that a larger buffer would do and fills 4 KB ones: the
// 30,000 elements of service-ips took 835 buffers and 240 ms, and counting
// the maps' elements at 100,000 Services 9-10 s. The request pipeline
// reads into 64 KB buffers, so the kernel fills 32 KB ones (its largest):
// 106 buffers, 52 ms, and 1.5-1.7 s for the count at 100,000.

// setElements returns the elements of each of sets, which belong to one
// table, in the order of sets, dumped through the request pipeline (a
// socket per worker, several sets at once) and decoded as they arrive.
func (n *Netlink) setElements(sets []*nftables.Set) ([][]nftables.SetElement, error) {
	if len(sets) == 0 {
		return nil, nil
	}
	requests := make([][]netlink.Attribute, len(sets))
	for i, s := range sets {
		requests[i] = setElementsRequest(s)
	}
	body, err := marshalBodies(requests)
	if err != nil {
		return nil, err
	}
	out := make([][]nftables.SetElement, len(sets))
	// The sink is never called twice at once for one set.
	sink := func(i int, h netlink.Header, data []byte) error {
		var err error
		out[i], err = appendSetElements(out[i], h, data)
		return err
	}
	if err := n.requestEach(unix.NFT_MSG_GETSETELEM, netlink.Request|netlink.Dump, sets[0].Table.Family, len(sets), body, nil, nil, sink); err != nil {
		return nil, fmt.Errorf("dump elements of %d sets: %w", len(sets), err)
	}
	return out, nil
}

// setElementsRequest is the attributes of a dump of s's elements.
func setElementsRequest(s *nftables.Set) []netlink.Attribute {
	return []netlink.Attribute{
		{Type: unix.NFTA_SET_ELEM_LIST_TABLE, Data: []byte(s.Table.Name + "\x00")},
		{Type: unix.NFTA_SET_ELEM_LIST_SET, Data: []byte(s.Name + "\x00")},
	}
}

// appendSetElements appends the elements of one message of a set's dump
// to out (a message other than NFT_MSG_NEWSETELEM adds none), decoded
// into the library's SetElement with the fields google/nftables' own dump
// fills but for Counter: an expression attached to an element (which
// nftproxy never writes) is not decoded. Tested against the library's
// decoder (TestSetElementDecodingMatchesLibrary).
func appendSetElements(out []nftables.SetElement, h netlink.Header, data []byte) ([]nftables.SetElement, error) {
	if h.Type != netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWSETELEM) || len(data) < 4 {
		return out, nil
	}
	ad, err := netlink.NewAttributeDecoder(data[4:])
	if err != nil {
		return nil, err
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		if ad.Type() != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
			continue
		}
		ad.Nested(func(list *netlink.AttributeDecoder) error {
			for list.Next() {
				var e nftables.SetElement
				if list.Type() == unix.NFTA_LIST_ELEM {
					list.Nested(func(d *netlink.AttributeDecoder) error { return decodeSetElement(d, &e) })
				}
				out = append(out, e)
			}
			return nil
		})
	}
	return out, ad.Err()
}

// nftaSetElemKeyEnd is NFTA_SET_ELEM_KEY_END, which x/sys/unix lacks.
const nftaSetElemKeyEnd = 10

// decodeSetElement decodes one element's attributes into e.
func decodeSetElement(d *netlink.AttributeDecoder, e *nftables.SetElement) error {
	d.ByteOrder = binary.BigEndian
	for d.Next() {
		switch d.Type() {
		case unix.NFTA_SET_ELEM_KEY:
			e.Key = elementData(d)
		case nftaSetElemKeyEnd:
			e.KeyEnd = elementData(d)
		case unix.NFTA_SET_ELEM_DATA:
			e.Val = elementData(d)
		case unix.NFTA_SET_ELEM_FLAGS:
			e.IntervalEnd = d.Uint32()&unix.NFT_SET_ELEM_INTERVAL_END != 0
		case unix.NFTA_SET_ELEM_TIMEOUT:
			e.Timeout = time.Millisecond * time.Duration(d.Uint64())
		case unix.NFTA_SET_ELEM_EXPIRATION:
			e.Expires = time.Millisecond * time.Duration(d.Uint64())
		case unix.NFTA_SET_ELEM_USERDATA:
			ud := d.Bytes()
			if c, ok := userdata.GetString(ud, userdata.NFTNL_UDATA_SET_ELEM_COMMENT); ok {
				e.Comment = c
			}
			if f, ok := userdata.GetUint32(ud, userdata.NFTNL_UDATA_SET_ELEM_FLAGS); ok {
				e.IntervalOpen = f&userdata.NFTNL_UDATA_SET_ELEM_F_INTERVAL_OPEN != 0
			}
		}
	}
	return d.Err()
}

// elementData returns the contents of a key or data attribute: the bytes
// of its value, or, for a verdict, its nested verdict attributes, as
// google/nftables keeps them (Val).
func elementData(d *netlink.AttributeDecoder) []byte {
	var out []byte
	d.Nested(func(in *netlink.AttributeDecoder) error {
		for in.Next() {
			switch in.Type() {
			case unix.NFTA_DATA_VALUE, unix.NFTA_DATA_VERDICT:
				out = in.Bytes()
			}
		}
		return nil
	})
	return out
}
