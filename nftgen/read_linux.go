//go:build linux

package nftgen

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// dump sends one dump request per attribute list, on socket per worker,
// and returns every answer's messages, request by request. Each request is
// answered before the worker sends the next (google/nftables waits for
// answers by polling, which is most of its time here).
func (n *Netlink) dump(msgType uint16, family nftables.TableFamily, requests [][]netlink.Attribute) ([][]netlink.Message, error) {
	out := make([][]netlink.Message, len(requests))
	workers := min(dumpWorkers, max(len(requests), 1))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			nl, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: max(n.netnsFd, 0)})
			if err != nil {
				errs[w] = fmt.Errorf("open netfilter socket: %w", err)
				return
			}
			defer nl.Close()
			for i := w; i < len(requests); i += workers {
				data, err := netlink.MarshalAttributes(requests[i])
				if err != nil {
					errs[w] = err
					return
				}
				req := netlink.Message{
					Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | msgType), Flags: netlink.Request | netlink.Dump},
					Data:   append([]byte{byte(family), unix.NFNETLINK_V0, 0, 0}, data...),
				}
				if out[i], err = nl.Execute(req); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// dumpWorkers is how many dumps Read runs at once.
const dumpWorkers = 4

// decoder returns a google/nftables connection that never reaches the
// kernel and answers its one request with msgs, so that the library
// decodes messages nftproxy fetched itself. A multi-part answer ends with
// Done, which Execute took off; without it the library loses the last
// message. The answers are renumbered as answers to the library's request.
func decoder(msgs []netlink.Message) (*nftables.Conn, error) {
	answered := false
	return nftables.New(nftables.WithTestDial(func(reqs []netlink.Message) ([]netlink.Message, error) {
		if answered || len(reqs) == 0 {
			return nil, nil
		}
		answered = true
		out := append(msgs, netlink.Message{Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi}, Data: make([]byte, 4)})
		for i := range out {
			// Some listings check that answers carry their request's
			// sequence number.
			out[i].Header.Sequence, out[i].Header.PID = reqs[0].Header.Sequence, reqs[0].Header.PID
		}
		return out, nil
	}))
}

// tableChains lists the chains of the family's nftproxy table in one dump.
func (n *Netlink) tableChains(table *nftables.Table) ([]*nftables.Chain, error) {
	answers, err := n.dump(unix.NFT_MSG_GETCHAIN, table.Family, [][]netlink.Attribute{{{Type: unix.NFTA_CHAIN_TABLE, Data: []byte(table.Name + "\x00")}}})
	if err != nil {
		return nil, fmt.Errorf("dump chains: %w", err)
	}
	dec, err := decoder(answers[0])
	if err != nil {
		return nil, err
	}
	return dec.ListChainsOfTableFamily(table.Family)
}

// tableRules lists the rules of the named chains of table, by chain. The
// kernel finds a chain named in a rule dump through its hash, so one dump
// per chain costs what the chain holds; a dump of the whole table restarts
// its walk over every rule for each 32 KB buffer, which is quadratic (26 s
// against 8.5 s at 3,000 Services).
func (n *Netlink) tableRules(table *nftables.Table, chains []string) (map[string][]*nftables.Rule, error) {
	requests := make([][]netlink.Attribute, len(chains))
	for i, chain := range chains {
		requests[i] = []netlink.Attribute{
			{Type: unix.NFTA_RULE_TABLE, Data: []byte(table.Name + "\x00")},
			{Type: unix.NFTA_RULE_CHAIN, Data: []byte(chain + "\x00")},
		}
	}
	answers, err := n.dump(unix.NFT_MSG_GETRULE, table.Family, requests)
	if err != nil {
		return nil, fmt.Errorf("dump rules: %w", err)
	}
	var all []netlink.Message
	for _, a := range answers {
		all = append(all, a...)
	}
	dec, err := decoder(all)
	if err != nil {
		return nil, err
	}
	rules, err := dec.GetRules(table, &nftables.Chain{Table: table})
	if err != nil {
		return nil, fmt.Errorf("decode rules: %w", err)
	}
	out := map[string][]*nftables.Rule{}
	for _, r := range rules {
		if r.Chain != nil {
			out[r.Chain.Name] = append(out[r.Chain.Name], r)
		}
	}
	return out, nil
}

// Read reads the family's table back from the kernel and decodes it into
// a TableState; nil and no error when the table does not exist. It lists
// the whole table, so it is for the compat view and tools, not for syncs.
func (n *Netlink) Read(_ context.Context, f Family) (*TableState, error) {
	// One socket for the whole read: it dumps every set and every chain
	// separately, which is hundreds of thousands of dumps at 30,000
	// Services.
	c, err := nftables.New(append(n.connOptions(), nftables.AsLasting())...)
	if err != nil {
		return nil, fmt.Errorf("open netlink: %w", err)
	}
	defer c.CloseLasting()
	table, err := findTable(c, f)
	if table == nil || err != nil {
		return nil, err
	}
	st := &TableState{Family: f}
	sets, err := c.GetSets(table)
	if err != nil {
		return nil, fmt.Errorf("list sets of %s %s: %w", f, TableName, err)
	}
	type anonMap struct{ targets, comments []string }
	anon := map[string]anonMap{}
	for _, s := range sets {
		elems, err := c.GetSetElements(s)
		if err != nil {
			return nil, fmt.Errorf("list elements of %s: %w", s.Name, err)
		}
		switch {
		case (s.Anonymous || isEndpointMap(s.Name)) && s.IsMap:
			targets := make([]string, len(elems))
			comments := make([]string, len(elems))
			anyComment := false
			ok := true
			for _, e := range elems {
				v, err := elementVerdict(e)
				if len(e.Key) != 4 || err != nil {
					ok = false
					continue
				}
				i := binary.NativeEndian.Uint32(e.Key)
				if int(i) >= len(targets) {
					ok = false
					continue
				}
				targets[i] = v.Chain
				comments[i] = e.Comment
				anyComment = anyComment || e.Comment != ""
			}
			if !anyComment {
				comments = nil
			}
			if ok {
				anon[s.Name] = anonMap{targets, comments}
			}
		case s.Anonymous:
		case s.IsMap && s.DataType.Name == nftables.TypeVerdict.Name:
			st.Maps = append(st.Maps, decodeMap(f, s, elems, &st.Unknown))
		case s.HasTimeout && s.Dynamic:
			st.Sets = append(st.Sets, SetSpec{Name: s.Name, TimeoutSeconds: int32(s.Timeout.Seconds())})
		default:
			st.Unknown = append(st.Unknown, fmt.Sprintf("set %s", s.Name))
		}
	}
	chains, err := n.tableChains(table)
	if err != nil {
		return nil, fmt.Errorf("list chains of %s %s: %w", f, TableName, err)
	}
	dec := &exprDecoder{family: f, anon: func(name string) ([]string, []string, bool) {
		m, ok := anon[name]
		return m.targets, m.comments, ok
	}}
	var names []string
	for _, ch := range chains {
		if ch.Table.Name == TableName {
			names = append(names, ch.Name)
		}
	}
	byChain, err := n.tableRules(table, names)
	if err != nil {
		return nil, fmt.Errorf("list rules of %s %s: %w", f, TableName, err)
	}
	for _, ch := range chains {
		if ch.Table.Name != TableName {
			continue
		}
		out := &Chain{Name: ch.Name}
		if ch.Hooknum != nil && ch.Priority != nil {
			out.Base = &BaseChain{Type: ChainType(ch.Type), Hook: hookName(*ch.Hooknum), Priority: int32(*ch.Priority)}
		}
		for _, r := range byChain[ch.Name] {
			comment, _ := userdata.GetString(r.UserData, userdata.TypeComment)
			out.Rules = append(out.Rules, Rule{Stmts: dec.decode(r.Exprs), Comment: comment})
		}
		st.Chains = append(st.Chains, out)
	}
	return st, nil
}

func hookName(h nftables.ChainHook) Hook {
	for name, p := range hooks {
		if *p == h {
			return name
		}
	}
	return Hook(fmt.Sprint(h))
}

// decodeMap decodes a named verdict map: keys of "[addr .] proto . port".
func decodeMap(f Family, s *nftables.Set, elems []nftables.SetElement, unknown *[]string) MapState {
	alen := 4
	if f == FamilyIPv6 {
		alen = 16
	}
	m := MapState{Spec: MapSpec{Name: s.Name, Key: KeyAddrProtoPort, Comment: s.Comment}}
	if s.KeyType.Bytes == 8 {
		m.Spec.Key = KeyProtoPort
		alen = 0
	}
	for _, e := range elems {
		verdict, err := elementVerdict(e)
		if len(e.Key) != alen+8 || err != nil {
			*unknown = append(*unknown, fmt.Sprintf("element of map %s with key %x", s.Name, e.Key))
			continue
		}
		var k MapKey
		if alen > 0 {
			k.Addr, _ = netip.AddrFromSlice(e.Key[:alen])
		}
		k.Proto = e.Key[alen]
		k.Port = binary.BigEndian.Uint16(e.Key[alen+4:])
		m.Elements = append(m.Elements, MapElement{Key: k, Verdict: verdict, Comment: e.Comment})
	}
	return m
}

// elementVerdict decodes the verdict of a map element. google/nftables
// leaves it as the raw NFTA_DATA_VERDICT attributes in Val: a verdict code
// and, for jump and goto, a chain name.
func elementVerdict(e nftables.SetElement) (Verdict, error) {
	if e.VerdictData != nil {
		v, n := decodeVerdict(e.VerdictData)
		if n == 0 {
			return Verdict{}, fmt.Errorf("unknown verdict %d", e.VerdictData.Kind)
		}
		return v.(Verdict), nil
	}
	ad, err := netlink.NewAttributeDecoder(e.Val)
	if err != nil {
		return Verdict{}, err
	}
	ad.ByteOrder = binary.BigEndian
	v := &expr.Verdict{}
	found := false
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_VERDICT_CODE:
			v.Kind, found = expr.VerdictKind(int32(ad.Uint32())), true
		case unix.NFTA_VERDICT_CHAIN:
			v.Chain = ad.String()
		}
	}
	if err := ad.Err(); err != nil || !found {
		return Verdict{}, fmt.Errorf("no verdict in element data %x", e.Val)
	}
	out, n := decodeVerdict(v)
	if n == 0 {
		return Verdict{}, fmt.Errorf("unknown verdict %d", v.Kind)
	}
	return out.(Verdict), nil
}
