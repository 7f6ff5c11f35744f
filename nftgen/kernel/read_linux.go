//go:build linux

package kernel

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/nftgen"
)

// layoutChains names the chains nftproxy's layout always has in family f:
// the base chains and the shared ones, from which every other chain is
// reached.
func layoutChains(f nftgen.Family) []string {
	return topChains(f, (*nftgen.Generator).Top)
}

// shardLayoutChains names the chains every shard table has (ShardTop).
func shardLayoutChains(nftgen.Family) []string { return nftgen.ShardTopChainNames() }

// topChains names the chains of a top-level fragment of family f.
func topChains(f nftgen.Family, top func(*nftgen.Generator) *nftgen.Fragment) []string {
	g, err := nftgen.NewGenerator(nftgen.Config{Family: f, LocalhostNodePorts: f == nftgen.FamilyIPv4})
	if err != nil {
		return nil
	}
	var out []string
	for _, c := range top(g).Chains {
		out = append(out, c.Name)
	}
	return out
}

// shardTables returns the names of the family's shard tables, in order.
func shardTables(c *nftables.Conn, f nftgen.Family) ([]string, error) {
	tables, err := c.ListTablesOfFamily(tableFamily(f))
	if err != nil {
		return nil, fmt.Errorf("list %s tables: %w", f, err)
	}
	var out []string
	for _, t := range tables {
		if nftgen.IsShardTable(t.Name) {
			out = append(out, t.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Read reads the family's table back from the kernel and decodes it into
// a TableState; nil and no error when the table does not exist. A sharded
// family's tables are read as one (TableState.Merged). It lists the whole
// table, so it is for the compat view and tools, not for syncs.
func (n *Netlink) Read(ctx context.Context, f nftgen.Family) (*nftgen.TableState, error) {
	st, err := n.ReadCompact(ctx, f, nil)
	return st.Merged(), err
}

// ReadCompact implements nftgen.Dataplane: Read, with the rules of each
// chain given to finish (if not nil) as soon as the chain is read, and the
// shard tables of a sharded layout read each on its own into the main
// table's state's Shards.
func (n *Netlink) ReadCompact(ctx context.Context, f nftgen.Family, finish nftgen.ChainFinish) (*nftgen.TableState, error) {
	st, _, err := n.readAll(ctx, f, readOptions{finish: finish})
	return st, err
}

// ReadLeaving implements nftgen.Dataplane: Read with the Services' chains
// left unread, and a ChainRules that reads them, decoded as the rest, one
// dump a chain. The endpoint chains are not dumped at all; the other
// Service chains are dumped to find what they jump to, and let go.
func (n *Netlink) ReadLeaving(ctx context.Context, f nftgen.Family) (*nftgen.TableState, nftgen.ChainRules, error) {
	// Every table's unread chains go to one list as they are found: at
	// 100,000 Services there are 1.1 million, and a list per table merged
	// after would hold them twice. It is made as long as the tables'
	// objects at once (one more listing, of the tables alone): grown, it
	// made save's peak 248 instead of 235 MiB at 100,000 Services.
	objects, err := n.tableObjects(f)
	if err != nil {
		return nil, nil, err
	}
	unread := make([]nftgen.ChainRef, 0, objects)
	st, decoders, err := n.readAll(ctx, f, readOptions{unread: &unread})
	if st == nil || err != nil {
		return nil, nil, err
	}
	merged := st.Merged()
	merged.Unread = unread
	return merged, n.unreadRules(f, decoders), nil
}

// tableObjects returns how many objects (chains, sets, named objects) the
// family's main and shard tables hold together, by their use counts.
func (n *Netlink) tableObjects(f nftgen.Family) (int, error) {
	objects := 0
	err := n.withConn(func(c *nftables.Conn) error {
		tables, err := c.ListTablesOfFamily(tableFamily(f))
		if err != nil {
			return fmt.Errorf("list %s tables: %w", f, err)
		}
		for _, t := range tables {
			if t.Name == nftgen.TableName || nftgen.IsShardTable(t.Name) {
				objects += int(t.Use)
			}
		}
		return nil
	})
	return objects, err
}

// unreadRules returns the ChainRules of a leaving read of family f whose
// tables decode their rules with decoders (by table name): the chains
// asked for at once share one run of dumps, whatever their tables.
func (n *Netlink) unreadRules(f nftgen.Family, decoders map[string]ruleDecoder) nftgen.ChainRules {
	return func(ctx context.Context, chains []nftgen.ChainRef) ([][]nftgen.Rule, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out := make([][]nftgen.Rule, len(chains))
		target := func(i int) (string, string) { return chains[i].Table, chains[i].Chain }
		// A chain deleted since the first read has no rules.
		gone := func(err error) bool { return errors.Is(err, unix.ENOENT) }
		err := n.dumpRules(tableFamily(f), len(chains), target, gone, func(i int, r *parsedRule) error {
			decode := decoders[chains[i].Table]
			if decode == nil {
				return fmt.Errorf("chain %s of table %s, which the read did not find", chains[i].Chain, chains[i].Table)
			}
			out[i] = append(out[i], decode(r))
			return nil
		}, nil)
		if err != nil {
			return nil, fmt.Errorf("read %d chains: %w", len(chains), err)
		}
		return out, nil
	}
}

// ReadTable implements nftgen.Dataplane: ReadCompact of table alone.
func (n *Netlink) ReadTable(ctx context.Context, f nftgen.Family, table int, finish nftgen.ChainFinish) (*nftgen.TableState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st, _, err := n.readNamed(f, nftgen.ShardTable(table), readOptions{finish: finish})
	return st, err
}

// readOptions say what a read keeps of each chain: finish as in
// chainWalk; unread, when not nil, makes the read leave the Services'
// chains unread and collects them (ReadLeaving).
type readOptions struct {
	finish nftgen.ChainFinish
	unread *[]nftgen.ChainRef
}

// walk returns the chain walk of a read of these options of table with
// decode.
func (o readOptions) walk(table string, decode ruleDecoder) chainWalk[nftgen.Rule] {
	if o.unread == nil {
		var finish chainFinisher[nftgen.Rule]
		if o.finish != nil {
			finish = func(chain string, rules []nftgen.Rule) ([]nftgen.Rule, bool) { return o.finish(table, chain, rules) }
		}
		return chainWalk[nftgen.Rule]{decode: decode, finish: finish}
	}
	drop := func(chain string, rules []nftgen.Rule) ([]nftgen.Rule, bool) {
		if nftgen.IsServiceChain(chain) {
			return nil, false
		}
		return rules, false
	}
	return chainWalk[nftgen.Rule]{decode: decode, finish: drop, leaf: nftgen.IsLeafChain}
}

// readAll reads the family's main table and its shard tables, each on its
// own into the main table's state's Shards; decoders are how each table's
// rules were decoded, by table name, for reading more of its chains.
func (n *Netlink) readAll(ctx context.Context, f nftgen.Family, opts readOptions) (*nftgen.TableState, map[string]ruleDecoder, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	main, more, err := n.readNamed(f, nftgen.TableName, opts)
	if main == nil || err != nil {
		return main, nil, err
	}
	decoders := map[string]ruleDecoder{nftgen.TableName: more}
	err = n.eachShard(ctx, f, func(name string) error {
		st, more, err := n.readNamed(f, name, opts)
		if st != nil {
			main.Shards = append(main.Shards, st)
			decoders[name] = more
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return main, decoders, nil
}

// readNamed reads the family's main table or the shard table called name
// from the chains its layout always has; a shard's state carries its name.
func (n *Netlink) readNamed(f nftgen.Family, name string, opts readOptions) (*nftgen.TableState, ruleDecoder, error) {
	roots := layoutChains(f)
	if nftgen.IsShardTable(name) {
		roots = shardLayoutChains(f)
	}
	st, more, err := n.readTable(f, name, roots, opts)
	if st != nil && nftgen.IsShardTable(name) {
		st.Name = name
	}
	return st, more, err
}

// readTable reads the family's table called name, whose chains are reached
// from roots, and returns how it decoded their rules; nil and no error
// when it does not exist.
func (n *Netlink) readTable(f nftgen.Family, name string, roots []string, opts readOptions) (*nftgen.TableState, ruleDecoder, error) {
	// One socket for the whole read: it dumps every set and every chain
	// separately, which is hundreds of thousands of dumps at 30,000
	// Services.
	c, err := NewConn(n.connOptions()...)
	if err != nil {
		return nil, nil, fmt.Errorf("open netlink: %w", err)
	}
	defer c.CloseLasting()
	table, err := findNamedTable(c, f, name)
	if table == nil || err != nil {
		return nil, nil, err
	}
	st := &nftgen.TableState{Family: f, Members: map[string][]nftgen.SetMember{}, Dormant: table.Flags&nftables.TableFlagDormant != 0}
	sets, err := c.GetSets(table)
	if err != nil {
		return nil, nil, fmt.Errorf("list sets of %s %s: %w", f, name, err)
	}
	elements, err := n.setElements(sets)
	if err != nil {
		return nil, nil, fmt.Errorf("list elements of %s %s: %w", f, name, err)
	}
	anon := decodeSets(st, sets, elements)
	var targets []string
	for _, m := range st.Maps {
		for _, e := range m.Elements {
			targets = append(targets, e.Verdict.Chain)
		}
	}
	for _, m := range anon {
		targets = append(targets, m.targets...)
	}
	dec := &exprDecoder{family: f, anon: func(name string) ([]string, []string, bool) {
		m, ok := anon[name]
		return m.targets, m.comments, ok
	}}
	var decode ruleDecoder = func(r *parsedRule) nftgen.Rule {
		comment, _ := userdata.GetString(r.userData, userdata.TypeComment)
		return nftgen.Rule{Stmts: dec.decodeRule(r), Comment: comment, Handle: r.handle}
	}
	// The table's use count counts its named objects (the counters) too.
	objs, err := c.GetObjects(table)
	if err != nil {
		return nil, nil, fmt.Errorf("list objects of %s %s: %w", f, name, err)
	}
	walk := opts.walk(name, decode)
	l, err := discoverChains(n, table, roots, targets, len(sets)+len(objs), walk)
	if err != nil {
		return nil, nil, fmt.Errorf("list chains of %s %s: %w", f, name, err)
	}
	switch {
	case l.complete:
	case !n.listable(len(l.names) + len(l.unread)):
		// Something nothing jumps to, in a table too large to list.
		st.Unreached = max(1, int(table.Use)-len(l.names)-len(l.unread)-len(sets)-len(objs))
	default:
		// Something nothing jumps to: list every chain after all.
		if l, err = listAll(n, table, walk); err != nil {
			return nil, nil, fmt.Errorf("list table %s %s: %w", f, name, err)
		}
	}
	st.Chains = chainStates(l.found, l.names, l.rules, l.omit)
	if opts.unread != nil {
		// The Service chains read only for their jumps, then the leaves
		// not read at all.
		st.LeaveServiceChains(name, opts.unread)
		for _, c := range l.unread {
			*opts.unread = append(*opts.unread, nftgen.ChainRef{Table: name, Chain: c})
		}
	}
	return st, decode, nil
}

// ruleDecoder decodes a rule message of one table (its anonymous and
// endpoint maps resolved).
type ruleDecoder func(*parsedRule) nftgen.Rule

// chainStates returns the chains called names with their rules, base
// chains with their hook as found says, but the regular chains that omit
// marks (see nftgen.ChainFinish).
func chainStates(found []*nftables.Chain, names []string, rules [][]nftgen.Rule, omit []bool) []*nftgen.Chain {
	base := make(map[string]*nftgen.BaseChain, len(found))
	for _, ch := range found {
		if ch.Hooknum != nil && ch.Priority != nil {
			base[ch.Name] = &nftgen.BaseChain{Type: nftgen.ChainType(ch.Type), Hook: hookName(*ch.Hooknum), Priority: int32(*ch.Priority),
				Drop: ch.Policy != nil && *ch.Policy == nftables.ChainPolicyDrop}
		}
	}
	listed := len(names)
	for i, name := range names {
		if omit[i] && base[name] == nil {
			listed--
		}
	}
	chains := make([]*nftgen.Chain, 0, listed)
	for i, name := range names {
		if b := base[name]; !omit[i] || b != nil {
			chains = append(chains, &nftgen.Chain{Name: name, Base: b, Rules: rules[i]})
		}
	}
	return chains
}

// anonMap is an anonymous or endpoint map's chains and comments by
// index (a numgen pick's targets).
type anonMap struct{ targets, comments []string }

// decodeSets decodes the table's sets and their elements (elements[i] are
// sets[i]'s, dropped as they are decoded) into st: named verdict maps,
// affinity sets with their members, the names of everything else it does
// not know; it returns the index maps, anonymous or endpoint maps, that
// rules read.
func decodeSets(st *nftgen.TableState, sets []*nftables.Set, elements [][]nftables.SetElement) map[string]anonMap {
	f := st.Family
	anon := map[string]anonMap{}
	for i, s := range sets {
		if !s.Anonymous {
			st.SetNames = append(st.SetNames, s.Name)
		}
		elems := elements[i]
		elements[i] = nil // decoded below; the raw elements can go
		switch {
		case (s.Anonymous || nftgen.IsEndpointMap(s.Name)) && s.IsMap:
			if m, ok := decodeIndexMap(elems); ok {
				anon[s.Name] = m
			}
		case s.Anonymous:
		case s.IsMap && s.DataType.Name == nftables.TypeVerdict.Name:
			st.Maps = append(st.Maps, decodeMap(f, s, elems, &st.Unknown))
		case s.HasTimeout && s.Dynamic:
			st.Sets = append(st.Sets, nftgen.SetSpec{Name: s.Name, TimeoutSeconds: int32(s.Timeout.Seconds()), ByEndpoint: s.Concatenation})
			var members []nftgen.SetMember
			for _, e := range elems {
				if m, ok := affinityMember(e.Key, f); ok {
					m.Expires = e.Expires
					members = append(members, m)
				}
			}
			st.Members[s.Name] = members
		default:
			st.Unknown = append(st.Unknown, fmt.Sprintf("set %s", s.Name))
		}
	}
	return anon
}

// decodeIndexMap decodes a map from a 32-bit index to a verdict; false
// when an element is not one.
func decodeIndexMap(elems []nftables.SetElement) (anonMap, bool) {
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
	return anonMap{targets, comments}, ok
}

func hookName(h nftables.ChainHook) nftgen.Hook {
	for name, p := range hooks {
		if *p == h {
			return name
		}
	}
	return nftgen.Hook(fmt.Sprint(h))
}

// decodeMap decodes a named verdict map: keys of "[addr .] proto . port".
func decodeMap(f nftgen.Family, s *nftables.Set, elems []nftables.SetElement, unknown *[]string) nftgen.MapState {
	alen := 4
	if f == nftgen.FamilyIPv6 {
		alen = 16
	}
	m := nftgen.MapState{Spec: nftgen.MapSpec{Name: s.Name, Key: nftgen.KeyAddrProtoPort, Comment: s.Comment}}
	if s.KeyType.Bytes == 8 {
		m.Spec.Key = nftgen.KeyProtoPort
		alen = 0
	}
	for _, e := range elems {
		verdict, err := elementVerdict(e)
		if len(e.Key) != alen+8 || err != nil {
			*unknown = append(*unknown, fmt.Sprintf("element of map %s with key %x", s.Name, e.Key))
			continue
		}
		var k nftgen.MapKey
		if alen > 0 {
			k.Addr, _ = netip.AddrFromSlice(e.Key[:alen])
		}
		k.Proto = e.Key[alen]
		k.Port = binary.BigEndian.Uint16(e.Key[alen+4:])
		m.Elements = append(m.Elements, nftgen.MapElement{Key: k, Verdict: verdict, Comment: e.Comment})
	}
	return m
}

// elementVerdict decodes the verdict of a map element. google/nftables
// leaves it as the raw NFTA_DATA_VERDICT attributes in Val: a verdict code
// and, for jump and goto, a chain name.
func elementVerdict(e nftables.SetElement) (nftgen.Verdict, error) {
	if e.VerdictData != nil {
		v, n := decodeVerdict(e.VerdictData)
		if n == 0 {
			return nftgen.Verdict{}, fmt.Errorf("unknown verdict %d", e.VerdictData.Kind)
		}
		return v.(nftgen.Verdict), nil
	}
	ad, err := netlink.NewAttributeDecoder(e.Val)
	if err != nil {
		return nftgen.Verdict{}, err
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
		return nftgen.Verdict{}, fmt.Errorf("no verdict in element data %x", e.Val)
	}
	out, n := decodeVerdict(v)
	if n == 0 {
		return nftgen.Verdict{}, fmt.Errorf("unknown verdict %d", v.Kind)
	}
	return out.(nftgen.Verdict), nil
}

// affinityMember decodes an affinity set's key: the client, or "client .
// endpoint address . port" (the port padded to 4 bytes).
func affinityMember(key []byte, f nftgen.Family) (nftgen.SetMember, bool) {
	n := 4
	if f == nftgen.FamilyIPv6 {
		n = 16
	}
	switch len(key) {
	case n:
		a, ok := netip.AddrFromSlice(key)
		return nftgen.SetMember{Addr: a}, ok
	case 2*n + 4:
		a, _ := netip.AddrFromSlice(key[:n])
		ep, _ := netip.AddrFromSlice(key[n : 2*n])
		return nftgen.SetMember{Addr: a, Endpoint: netip.AddrPortFrom(ep, binary.BigEndian.Uint16(key[2*n:]))}, true
	}
	return nftgen.SetMember{}, false
}
