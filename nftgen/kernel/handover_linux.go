//go:build linux

package kernel

import (
	"context"
	"fmt"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/nftproxy/nftproxy/nftgen"
)

// Sets of the handover table, and the priority of its chains: after the
// filter chains of iptables (0) and of nftproxy's own table, so that a
// reject of a Service without endpoints comes first.
const (
	handoverServiceIPs = "service-ips"
	handoverNodePorts  = "service-nodeports"
	handoverPriority   = 10
	// elementsPerMessage bounds the elements of one netlink message.
	elementsPerMessage = 1000
)

// WriteHandover writes the family's handover table (nftgen.HandoverTableName)
// in one transaction, replacing any earlier one: the destinations of
// nftproxy's table (the keys of its service-ips and service-nodeports maps,
// each kept for ttl) and one rule per filter hook that drops, silently, a new
// connection to one of them that no one has DNATed. It returns the number of
// destinations, 0 when nftproxy's table does not exist (then nothing is
// written).
//
// kube-proxy, started in iptables mode after nftproxy (a rollback), deletes
// nftproxy's table before it programs its own rules. A connection opened in
// between would be refused or misrouted; with the handover its first SYN is
// dropped before conntrack confirms it, the client retransmits, and the
// retransmission meets kube-proxy's DNAT. The elements expire after ttl, and
// the rules then match nothing.
func (n *Netlink) WriteHandover(ctx context.Context, f nftgen.Family, ttl time.Duration) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var count int
	err := n.withConn(func(c *nftables.Conn) error {
		main, err := findTable(c, f)
		if main == nil || err != nil {
			return err
		}
		keys := map[string][][]byte{}
		sets, err := c.GetSets(main)
		if err != nil {
			return fmt.Errorf("list maps of %s %s: %w", f, nftgen.TableName, err)
		}
		for _, s := range sets {
			if s.Name != nftgen.MapServiceIPs && s.Name != nftgen.MapServiceNodePorts {
				continue
			}
			els, err := c.GetSetElements(s)
			if err != nil {
				return fmt.Errorf("list %s: %w", s.Name, err)
			}
			for _, e := range els {
				keys[s.Name] = append(keys[s.Name], e.Key)
			}
		}
		count = len(keys[nftgen.MapServiceIPs]) + len(keys[nftgen.MapServiceNodePorts])
		t := &nftables.Table{Name: nftgen.HandoverTableName, Family: tableFamily(f)}
		c.AddTable(t) // add, delete, add: replaces a table that may not exist
		c.DelTable(t)
		c.AddTable(t)
		b := &exprBuilder{family: f}
		addr := nftables.TypeIPAddr
		if f == nftgen.FamilyIPv6 {
			addr = nftables.TypeIP6Addr
		}
		dests := &nftables.Set{Table: t, Name: handoverServiceIPs, Concatenation: true, HasTimeout: true, Timeout: ttl,
			KeyType: nftables.MustConcatSetType(addr, nftables.TypeInetProto, nftables.TypeInetService)}
		ports := &nftables.Set{Table: t, Name: handoverNodePorts, Concatenation: true, HasTimeout: true, Timeout: ttl,
			KeyType: nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService)}
		for _, s := range []struct {
			set  *nftables.Set
			keys [][]byte
		}{{dests, keys[nftgen.MapServiceIPs]}, {ports, keys[nftgen.MapServiceNodePorts]}} {
			if err := c.AddSet(s.set, nil); err != nil {
				return err
			}
			for i := 0; i < len(s.keys); i += elementsPerMessage {
				chunk := s.keys[i:min(i+elementsPerMessage, len(s.keys))]
				els := make([]nftables.SetElement, len(chunk))
				for j, k := range chunk {
					els[j] = nftables.SetElement{Key: k, Timeout: ttl}
				}
				if err := c.SetAddElements(s.set, els); err != nil {
					return err
				}
			}
		}
		// A new connection that no one DNATed.
		guard, err := b.ruleExprs(&nftgen.Rule{Stmts: []nftgen.Stmt{nftgen.MatchCtState{Mask: nftgen.CtNew}, nftgen.MatchCtStatusDNAT{Not: true}}})
		if err != nil {
			return err
		}
		_, daddr, length := b.addrOffsets()
		protoReg := uint32(reg32Base + length/4)
		toService := append(append([]expr.Any{}, guard...),
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: length},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: protoReg},
			&expr.Payload{DestRegister: protoReg + 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Lookup{SourceRegister: reg1, SetName: handoverServiceIPs},
			&expr.Verdict{Kind: expr.VerdictDrop})
		toLocal, err := b.ruleExprs(&nftgen.Rule{Stmts: []nftgen.Stmt{nftgen.MatchFibLocal{Dir: nftgen.Daddr}, nftgen.ProtoPortIn{Map: handoverNodePorts}}})
		if err != nil {
			return err
		}
		toNodePort := append(append(append([]expr.Any{}, guard...), toLocal...), &expr.Verdict{Kind: expr.VerdictDrop})
		accept := nftables.ChainPolicyAccept
		for _, h := range []struct {
			name string
			hook nftgen.Hook
		}{{"input", nftgen.HookInput}, {"forward", nftgen.HookForward}, {"output", nftgen.HookOutput}} {
			ch := c.AddChain(&nftables.Chain{Name: h.name, Table: t, Type: nftables.ChainTypeFilter, Hooknum: hooks[h.hook],
				Priority: nftables.ChainPriorityRef(nftables.ChainPriority(handoverPriority)), Policy: &accept})
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: toService})
			if h.hook != nftgen.HookForward {
				c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: toNodePort})
			}
		}
		if err := c.Flush(); err != nil {
			return fmt.Errorf("write table %s %s: %w", f, nftgen.HandoverTableName, err)
		}
		return nil
	})
	return count, err
}

// DeleteHandover deletes the family's handover table; a missing one is not
// an error.
func (n *Netlink) DeleteHandover(ctx context.Context, f nftgen.Family) error {
	return n.deleteTable(ctx, f, nftgen.HandoverTableName)
}
