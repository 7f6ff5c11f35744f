//go:build linux

package kernel

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/nftgen"
)

// Sets, maps and chain priorities of the handover table. Its NAT chains
// come after iptables' (dstnat -100, srcnat 100) and after the node port
// stage of nftproxy's shard tables (dstnat -99), and its filter chains
// after iptables' filter (0), so that what kube-proxy has programmed acts
// first: netfilter runs a later NAT chain only while no earlier one bound
// the connection, and a reject of a Service without endpoints comes before
// the hold.
const (
	handoverServiceIPs    = "service-ips"
	handoverNodePorts     = "service-nodeports"
	handoverDNATIPs       = "dnat-ips"
	handoverDNATPorts     = "dnat-nodeports"
	handoverNodePortAddrs = "nodeport-addresses"
	handoverPriority      = 10
	handoverDstNATPrio    = nftgen.PriorityNodePorts + 1
	handoverSrcNATPrio    = nftgen.PrioritySrcNAT + 1
	elementsPerMessage    = 1000
	elementsPerCommit     = 50000
	handoverWriteBuffer   = 16 << 20
	handoverDataReg32     = reg32Base + 8 // the DNAT map's value: address . port
)

// WriteHandover implements nftgen.Dataplane: the family's handover table
// (nftgen.HandoverTableName), replacing any earlier one, in one
// transaction up to 50,000 elements and in several beyond. It copies the destinations of nftproxy's table (the keys of its
// service-ips and service-nodeports maps) into two sets that hold a new,
// un-DNATed connection, and the endpoints spec gives for them into two DNAT
// maps keyed by destination and random bucket; every element expires after
// spec.TTL.
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
		w := handoverWriter{c: c, t: t, f: f, b: &exprBuilder{family: f}, spec: spec}
		if err := w.holdSets(keys); err != nil {
			return err
		}
		if err := w.dnatMaps(keys); err != nil {
			return err
		}
		if err := w.chains(); err != nil {
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
	c    *nftables.Conn
	t    *nftables.Table
	f    nftgen.Family
	b    *exprBuilder
	spec *nftgen.HandoverSpec
	// queued counts the elements queued since the last commit.
	queued int
}

func (w *handoverWriter) addrType() nftables.SetDatatype {
	if w.f == nftgen.FamilyIPv6 {
		return nftables.TypeIP6Addr
	}
	return nftables.TypeIPAddr
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

// holdSets adds the sets of destinations whose new, un-DNATed connections
// the filter chains drop.
func (w *handoverWriter) holdSets(keys map[string][][]byte) error {
	ttl := w.spec.TTL
	for _, s := range []struct {
		set  *nftables.Set
		keys [][]byte
	}{
		{&nftables.Set{Table: w.t, Name: handoverServiceIPs, Concatenation: true, HasTimeout: true, Timeout: ttl,
			KeyType: nftables.MustConcatSetType(w.addrType(), nftables.TypeInetProto, nftables.TypeInetService)}, keys[nftgen.MapServiceIPs]},
		{&nftables.Set{Table: w.t, Name: handoverNodePorts, Concatenation: true, HasTimeout: true, Timeout: ttl,
			KeyType: nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService)}, keys[nftgen.MapServiceNodePorts]},
	} {
		els := make([]nftables.SetElement, len(s.keys))
		for j, k := range s.keys {
			els[j] = nftables.SetElement{Key: k, Timeout: ttl}
		}
		if err := w.addElements(s.set, els); err != nil {
			return err
		}
	}
	return nil
}

// dnatMaps adds the maps "destination . bucket : endpoint address . port"
// for the destinations of keys that the spec has endpoints for.
func (w *handoverWriter) dnatMaps(keys map[string][][]byte) error {
	ttl := w.spec.TTL
	data := nftables.MustConcatSetType(w.addrType(), nftables.TypeInetService)
	for _, m := range []struct {
		name    string
		mapName string
		key     nftables.SetDatatype
		targets map[nftgen.MapKey][]netip.AddrPort
	}{
		{handoverDNATIPs, nftgen.MapServiceIPs, nftables.MustConcatSetType(w.addrType(), nftables.TypeInetProto, nftables.TypeInetService, nftables.TypeMark), w.spec.ServiceIPs},
		{handoverDNATPorts, nftgen.MapServiceNodePorts, nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService, nftables.TypeMark), w.spec.NodePorts},
	} {
		live := map[string]bool{}
		for _, k := range keys[m.mapName] {
			live[string(k)] = true
		}
		var els []nftables.SetElement
		for k, eps := range m.targets {
			key := mapKeyBytes(k)
			if !live[string(key)] || len(eps) == 0 {
				continue
			}
			for i, ep := range nftgen.Buckets(eps) {
				if ep.Addr().Is4() != (w.f == nftgen.FamilyIPv4) {
					return fmt.Errorf("handover endpoint %s does not belong to family %s", ep, w.f)
				}
				val := binary.BigEndian.AppendUint16(ep.Addr().AsSlice(), ep.Port())
				els = append(els, nftables.SetElement{Key: append(append([]byte{}, key...), native32(uint32(i))...), Val: append(val, 0, 0), Timeout: ttl})
			}
		}
		s := &nftables.Set{Table: w.t, Name: m.name, IsMap: true, Concatenation: true, HasTimeout: true, Timeout: ttl, KeyType: m.key, DataType: data}
		if err := w.addElements(s, els); err != nil {
			return err
		}
	}
	return nil
}

// chains adds the NAT chains that serve (DNAT, then masquerade what the
// handover DNATed) and the filter chains that hold.
func (w *handoverWriter) chains() error {
	_, daddr, length := w.b.addrOffsets()
	words := length / 4
	bucket := func(reg uint32) *expr.Numgen {
		return &expr.Numgen{Register: reg, Modulus: nftgen.HandoverBuckets, Type: unix.NFT_NG_RANDOM}
	}
	addrLen := length
	dnat := func() []expr.Any {
		return append(markSet(^w.spec.MasqueradeBit, w.spec.MasqueradeBit),
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: w.b.nfproto(), RegAddrMin: handoverDataReg32, RegProtoMin: handoverDataReg32 + addrLen/4})
	}
	protoReg := reg32Base + words
	toService := append([]expr.Any{
		&expr.Payload{DestRegister: reg32Base, Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: length},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: protoReg},
		&expr.Payload{DestRegister: protoReg + 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		bucket(protoReg + 2),
		&expr.Lookup{SourceRegister: reg32Base, SetName: handoverDNATIPs, DestRegister: handoverDataReg32, IsDestRegSet: true},
	}, dnat()...)
	local, err := w.nodePortAddresses()
	if err != nil {
		return err
	}
	toNodePort := append(append(local,
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg32Base},
		&expr.Payload{DestRegister: reg32Base + 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		bucket(reg32Base+2),
		&expr.Lookup{SourceRegister: reg32Base, SetName: handoverDNATPorts, DestRegister: handoverDataReg32, IsDestRegSet: true},
	), dnat()...)
	bit := w.spec.MasqueradeBit
	masquerade := append(appendMaskedTest(nil, &expr.Meta{Key: expr.MetaKeyMARK, Register: reg1}, bit, false),
		append(markSet(0xffffffff, bit), &expr.Masq{})...)
	accept := nftables.ChainPolicyAccept
	base := func(name string, typ nftables.ChainType, hook nftgen.Hook, prio int32) *nftables.Chain {
		return w.c.AddChain(&nftables.Chain{Name: name, Table: w.t, Type: typ, Hooknum: hooks[hook],
			Priority: nftables.ChainPriorityRef(nftables.ChainPriority(prio)), Policy: &accept})
	}
	for _, h := range []struct {
		name string
		hook nftgen.Hook
	}{{"nat-prerouting", nftgen.HookPrerouting}, {"nat-output", nftgen.HookOutput}} {
		ch := base(h.name, nftables.ChainTypeNAT, h.hook, handoverDstNATPrio)
		w.c.AddRule(&nftables.Rule{Table: w.t, Chain: ch, Exprs: toService})
		w.c.AddRule(&nftables.Rule{Table: w.t, Chain: ch, Exprs: toNodePort})
	}
	post := base("nat-postrouting", nftables.ChainTypeNAT, nftgen.HookPostrouting, handoverSrcNATPrio)
	w.c.AddRule(&nftables.Rule{Table: w.t, Chain: post, Exprs: masquerade})
	return w.holdChains()
}

// nodePortAddresses returns the match of a destination whose node ports
// the handover serves: one of spec.NodePortAddresses (in a set it adds), or
// else any local address.
func (w *handoverWriter) nodePortAddresses() ([]expr.Any, error) {
	addrs := w.spec.NodePortAddresses
	if len(addrs) == 0 {
		return w.b.ruleExprs(&nftgen.Rule{Stmts: []nftgen.Stmt{nftgen.MatchFibLocal{Dir: nftgen.Daddr}}})
	}
	s := &nftables.Set{Table: w.t, Name: handoverNodePortAddrs, KeyType: w.addrType()}
	els := make([]nftables.SetElement, 0, len(addrs))
	for _, a := range addrs {
		if a.Is4() != (w.f == nftgen.FamilyIPv4) {
			continue
		}
		els = append(els, nftables.SetElement{Key: a.AsSlice()})
	}
	if err := w.addElements(s, els); err != nil {
		return nil, err
	}
	_, daddr, length := w.b.addrOffsets()
	return []expr.Any{
		&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: length},
		&expr.Lookup{SourceRegister: reg1, SetName: handoverNodePortAddrs},
	}, nil
}

// holdChains adds the filter chains that drop, silently, a new connection
// to a held destination that no one DNATed: the client retransmits.
func (w *handoverWriter) holdChains() error {
	guard, err := w.b.ruleExprs(&nftgen.Rule{Stmts: []nftgen.Stmt{nftgen.MatchCtState{Mask: nftgen.CtNew}, nftgen.MatchCtStatusDNAT{Not: true}}})
	if err != nil {
		return err
	}
	_, daddr, length := w.b.addrOffsets()
	protoReg := uint32(reg32Base + length/4)
	toService := append(append([]expr.Any{}, guard...),
		&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: length},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: protoReg},
		&expr.Payload{DestRegister: protoReg + 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: reg1, SetName: handoverServiceIPs},
		&expr.Verdict{Kind: expr.VerdictDrop})
	toLocal, err := w.b.ruleExprs(&nftgen.Rule{Stmts: []nftgen.Stmt{nftgen.MatchFibLocal{Dir: nftgen.Daddr}, nftgen.ProtoPortIn{Map: handoverNodePorts}}})
	if err != nil {
		return err
	}
	toNodePort := append(append(append([]expr.Any{}, guard...), toLocal...), &expr.Verdict{Kind: expr.VerdictDrop})
	accept := nftables.ChainPolicyAccept
	for _, h := range []struct {
		name string
		hook nftgen.Hook
	}{{"input", nftgen.HookInput}, {"forward", nftgen.HookForward}, {"output", nftgen.HookOutput}} {
		ch := w.c.AddChain(&nftables.Chain{Name: h.name, Table: w.t, Type: nftables.ChainTypeFilter, Hooknum: hooks[h.hook],
			Priority: nftables.ChainPriorityRef(nftables.ChainPriority(handoverPriority)), Policy: &accept})
		w.c.AddRule(&nftables.Rule{Table: w.t, Chain: ch, Exprs: toService})
		if h.hook != nftgen.HookForward {
			w.c.AddRule(&nftables.Rule{Table: w.t, Chain: ch, Exprs: toNodePort})
		}
	}
	return nil
}
