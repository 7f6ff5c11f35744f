//go:build linux

package kernel

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"

	"github.com/nftproxy/nftproxy/nftgen"
)

// Sizes of the handover's writes.
const (
	elementsPerMessage  = 1000
	elementsPerCommit   = 50000
	handoverWriteBuffer = 16 << 20
)

// WriteHandover implements nftgen.Dataplane: the family's handover table
// as the generator builds it (nftgen.HandoverSpec.Table), replacing any
// earlier one, in one transaction up to 50,000 elements and in several
// beyond. It fills the table's sets with the destinations of nftproxy's
// tables (the keys of their service-ips and service-nodeports maps) and
// its DNAT maps with the endpoints spec gives for them; every element
// expires after spec.TTL.
func (n *Netlink) WriteHandover(ctx context.Context, f nftgen.Family, spec *nftgen.HandoverSpec) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var count int
	// A connection of its own, with a send buffer that takes a commit of
	// elementsPerCommit elements in one message.
	c, err := NewConn(append(n.connOptions(), nftables.WithSockOptions(func(nc *netlink.Conn) error {
		return nc.SetWriteBuffer(handoverWriteBuffer)
	}))...)
	if err != nil {
		return 0, fmt.Errorf("open netlink: %w", err)
	}
	defer c.CloseLasting()
	err = func() error {
		main, err := findTable(c, f)
		if main == nil || err != nil {
			return err
		}
		keys, err := n.destinationKeys(c, main, f)
		if err != nil {
			return err
		}
		count = len(keys[nftgen.MapServiceIPs]) + len(keys[nftgen.MapServiceNodePorts])
		t := &nftables.Table{Name: nftgen.HandoverTableName, Family: tableFamily(f)}
		c.AddTable(t) // add, delete, add: replaces a table that may not exist
		c.DelTable(t)
		c.AddTable(t)
		w := handoverWriter{c: c, t: t, f: f, b: &exprBuilder{family: f}, table: spec.Table(f)}
		if err := w.write(keys); err != nil {
			return err
		}
		if err := c.Flush(); err != nil {
			return fmt.Errorf("write table %s %s: %w", f, nftgen.HandoverTableName, err)
		}
		return nil
	}()
	return count, err
}

// DeleteHandover implements nftgen.Dataplane; a missing table is not an
// error.
func (n *Netlink) DeleteHandover(ctx context.Context, f nftgen.Family) error {
	return n.deleteTable(ctx, f, nftgen.HandoverTableName)
}

// destinationKeys reads the element keys of the service-ips and
// service-nodeports maps of nftproxy's table: what acts in the kernel,
// whatever the spec says.
func (n *Netlink) destinationKeys(c *nftables.Conn, main *nftables.Table, f nftgen.Family) (map[string][][]byte, error) {
	shards, err := shardTables(c, f)
	if err != nil {
		return nil, err
	}
	var maps []*nftables.Set
	for _, name := range append([]string{main.Name}, shards...) {
		sets, err := c.GetSets(&nftables.Table{Name: name, Family: main.Family})
		if err != nil {
			return nil, fmt.Errorf("list maps of %s %s: %w", f, name, err)
		}
		for _, s := range sets {
			if s.Name == nftgen.MapServiceIPs || s.Name == nftgen.MapServiceNodePorts {
				maps = append(maps, s)
			}
		}
	}
	elements, err := n.setElements(maps)
	if err != nil {
		return nil, err
	}
	keys := map[string][][]byte{}
	for i, s := range maps {
		for _, e := range elements[i] {
			keys[s.Name] = append(keys[s.Name], e.Key)
		}
	}
	return keys, nil
}

// handoverWriter adds the handover table's objects to one batch.
type handoverWriter struct {
	c     *nftables.Conn
	t     *nftables.Table
	f     nftgen.Family
	b     *exprBuilder
	table *nftgen.HandoverTable
	// queued counts the elements queued since the last commit.
	queued int
}

// write adds the table's sets, filled from keys (the live keys of each
// map of nftproxy's tables) and the spec, then its chains.
func (w *handoverWriter) write(keys map[string][][]byte) error {
	for _, s := range w.table.Sets {
		var err error
		switch {
		case s.Key == nftgen.KeyAddr:
			err = w.addressSet(s)
		case s.DNAT:
			err = w.dnatMap(s, keys[s.From])
		default:
			err = w.holdSet(s, keys[s.From])
		}
		if err != nil {
			return err
		}
	}
	for _, c := range w.table.Chains {
		ch := w.c.AddChain(chainOf(w.t, c.Name, c.Base))
		for i := range c.Rules {
			exprs, err := w.b.ruleExprs(&c.Rules[i])
			if err != nil {
				return fmt.Errorf("handover chain %s: %w", c.Name, err)
			}
			w.c.AddRule(&nftables.Rule{Table: w.t, Chain: ch, Exprs: exprs})
		}
	}
	return nil
}

// addElements adds els to s, at most elementsPerMessage per message, and
// commits what is queued every elementsPerCommit elements: one batch of
// 480,000 elements (30,000 Services, 29 MB) is larger than the netlink
// socket takes in one message ("message too long"). The handover serves what is
// committed; nftproxy's own table still serves everything meanwhile.
func (w *handoverWriter) addElements(s *nftables.Set, els []nftables.SetElement) error {
	if err := w.c.AddSet(s, nil); err != nil {
		return err
	}
	for i := 0; i < len(els); i += elementsPerMessage {
		chunk := els[i:min(i+elementsPerMessage, len(els))]
		if err := w.c.SetAddElements(s, chunk); err != nil {
			return err
		}
		if w.queued += len(chunk); w.queued >= elementsPerCommit {
			if err := w.c.Flush(); err != nil {
				return fmt.Errorf("write table %s %s: %w", w.f, nftgen.HandoverTableName, err)
			}
			w.queued = 0
		}
	}
	return nil
}

// holdSet adds a set of destinations (keys) whose new, un-DNATed
// connections the filter chains drop.
func (w *handoverWriter) holdSet(s nftgen.HandoverSet, keys [][]byte) error {
	set := &nftables.Set{Table: w.t, Name: s.Name, Concatenation: true, HasTimeout: true, Timeout: s.Timeout,
		KeyType: nftables.MustConcatSetType(keyTypes(w.f, s.Key)...)}
	els := make([]nftables.SetElement, len(keys))
	for j, k := range keys {
		els[j] = nftables.SetElement{Key: k, Timeout: s.Timeout}
	}
	return w.addElements(set, els)
}

// dnatMap adds a map "destination . bucket : endpoint address . port" for
// the destinations of keys that the spec has endpoints for.
func (w *handoverWriter) dnatMap(s nftgen.HandoverSet, keys [][]byte) error {
	targets := w.table.Spec.ServiceIPs
	if s.From == nftgen.MapServiceNodePorts {
		targets = w.table.Spec.NodePorts
	}
	live := make(map[string]bool, len(keys))
	for _, k := range keys {
		live[string(k)] = true
	}
	var els []nftables.SetElement
	for k, eps := range targets {
		key := mapKeyBytes(k)
		if !live[string(key)] || len(eps) == 0 {
			continue
		}
		for i, ep := range nftgen.Buckets(eps) {
			if ep.Addr().Is4() != (w.f == nftgen.FamilyIPv4) {
				return fmt.Errorf("handover endpoint %s does not belong to family %s", ep, w.f)
			}
			val := binary.BigEndian.AppendUint16(ep.Addr().AsSlice(), ep.Port())
			els = append(els, nftables.SetElement{Key: append(append([]byte{}, key...), native32(uint32(i))...), Val: append(val, 0, 0), Timeout: s.Timeout})
		}
	}
	set := &nftables.Set{Table: w.t, Name: s.Name, IsMap: true, Concatenation: true, HasTimeout: true, Timeout: s.Timeout,
		KeyType:  nftables.MustConcatSetType(append(keyTypes(w.f, s.Key), nftables.TypeMark)...),
		DataType: nftables.MustConcatSetType(addrType(w.f), nftables.TypeInetService)}
	return w.addElements(set, els)
}

// addressSet adds the set of the node port addresses the spec serves.
func (w *handoverWriter) addressSet(s nftgen.HandoverSet) error {
	addrs := w.table.NodePortAddresses()
	els := make([]nftables.SetElement, 0, len(addrs))
	for _, a := range addrs {
		els = append(els, nftables.SetElement{Key: a.AsSlice()})
	}
	return w.addElements(&nftables.Set{Table: w.t, Name: s.Name, KeyType: addrType(w.f)}, els)
}
