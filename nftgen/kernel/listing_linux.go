//go:build linux

package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// dump sends one dump request per attribute list and returns every
// answer's messages, request by request (see request).
func (n *Netlink) dump(msgType uint16, family nftables.TableFamily, requests [][]netlink.Attribute) ([][]netlink.Message, error) {
	return n.request(msgType, netlink.Request|netlink.Dump, family, requests, nil)
}

// decodeChains decodes the chain messages of a listing or of lookups by
// name (NFT_MSG_NEWCHAIN answers; others are skipped) into the library's
// Chain type, with the fields google/nftables' own listing fills (name,
// table, type, policy, hook and priority): a decoder of nftproxy's own,
// tested against the library's (TestChainDecodingMatchesLibrary).
func decodeChains(family nftables.TableFamily, msgs []netlink.Message) ([]*nftables.Chain, error) {
	newChain := netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWCHAIN)
	var out []*nftables.Chain
	for _, m := range msgs {
		if m.Header.Type != newChain || len(m.Data) < 4 {
			continue
		}
		c, err := decodeChain(nftables.TableFamily(m.Data[0]), m.Data[4:])
		if err != nil {
			return nil, fmt.Errorf("decode chain: %w", err)
		}
		if c.Table != nil && c.Table.Family == family {
			out = append(out, c)
		}
	}
	return out, nil
}

// decodeChain decodes the attributes of one chain message.
func decodeChain(family nftables.TableFamily, attrs []byte) (*nftables.Chain, error) {
	ad, err := netlink.NewAttributeDecoder(attrs)
	if err != nil {
		return nil, err
	}
	ad.ByteOrder = binary.BigEndian
	var c nftables.Chain
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_CHAIN_NAME:
			c.Name = ad.String()
		case unix.NFTA_CHAIN_TABLE:
			c.Table = &nftables.Table{Name: ad.String(), Family: family}
		case unix.NFTA_CHAIN_TYPE:
			c.Type = nftables.ChainType(ad.String())
		case unix.NFTA_CHAIN_POLICY:
			policy := nftables.ChainPolicy(ad.Uint32())
			c.Policy = &policy
		case unix.NFTA_CHAIN_HOOK:
			ad.Nested(func(hd *netlink.AttributeDecoder) error {
				hd.ByteOrder = binary.BigEndian
				var hook nftables.ChainHook
				var prio nftables.ChainPriority
				for hd.Next() {
					switch hd.Type() {
					case unix.NFTA_HOOK_HOOKNUM:
						hook = nftables.ChainHook(hd.Uint32())
					case unix.NFTA_HOOK_PRIORITY:
						prio = nftables.ChainPriority(hd.Uint32())
					}
				}
				c.Hooknum, c.Priority = &hook, &prio
				return nil
			})
		}
	}
	if err := ad.Err(); err != nil {
		return nil, err
	}
	return &c, nil
}

// listingMaxChains is the number of chains found by following jumps above
// which Read and Inventory do not list every chain of nftproxy's table to
// find the ones nothing reaches: the kernel restarts a chain listing from
// the first chain for every buffer of a few hundred, so at a million
// chains (100,000 Services) one listing takes more than ten minutes.
const listingMaxChains = 20000

// listable reports whether a table in which chains were found by
// following jumps may still be listed whole: at most listingMaxChains, or
// the limit a test set.
func (n *Netlink) listable(chains int) bool {
	limit := listingMaxChains
	if n.listingLimit > 0 {
		limit = n.listingLimit
	}
	return chains <= limit
}

// tableChains lists the chains of table in one dump.
func (n *Netlink) tableChains(table *nftables.Table) ([]*nftables.Chain, error) {
	answers, err := n.dump(unix.NFT_MSG_GETCHAIN, table.Family, [][]netlink.Attribute{{{Type: unix.NFTA_CHAIN_TABLE, Data: []byte(table.Name + "\x00")}}})
	if err != nil {
		return nil, fmt.Errorf("dump chains: %w", err)
	}
	chains, err := decodeChains(table.Family, answers[0])
	// A kernel that does not filter the dump by table answers with the
	// chains of every table of the family.
	return slices.DeleteFunc(chains, func(c *nftables.Chain) bool { return c.Table.Name != table.Name }), err
}

// chainRules dumps the rules of the named chains of table, one dump per
// chain, and gives each rule of chains[i] to each(i, r) as it arrives (r
// and what it points to are only valid during the call), then calls
// end(i), if not nil, once the chain's last rule was given; a dump that
// fails with an error for which skip (if not nil) is true gives no rules.
// each and end are called from several goroutines, never at once for one
// chain. The kernel finds a chain named in a rule dump through its hash,
// so one dump per chain costs what the chain holds; a dump of the whole
// table restarts its walk over every rule for each 32 KB buffer, which is
// quadratic (26 s against 8.5 s at 3,000 Services).
func (n *Netlink) chainRules(table *nftables.Table, chains []string, skip func(error) bool, each func(i int, r *parsedRule) error, end func(i int)) error {
	return n.dumpRules(table.Family, len(chains), func(i int) (string, string) { return table.Name, chains[i] }, skip, each, end)
}

// dumpRules is chainRules of count chains, chain i named by target, each
// in a table of its own (of one family): the chains of many tables share
// the sockets and buffers of one run of dumps.
func (n *Netlink) dumpRules(family nftables.TableFamily, count int, target func(i int) (table, chain string), skip func(error) bool, each func(i int, r *parsedRule) error, end func(i int)) error {
	body := func(i int, dst []byte) []byte {
		table, chain := target(i)
		return appendString(appendString(dst, unix.NFTA_RULE_TABLE, table), unix.NFTA_RULE_CHAIN, chain)
	}
	newRule := netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWRULE)
	// Each rule is parsed into a parsedRule taken from scratch and given
	// back after each: a listing parses millions of rules.
	scratch := sync.Pool{New: func() any { return new(parsedRule) }}
	err := n.requestEach(unix.NFT_MSG_GETRULE, netlink.Request|netlink.Dump, family, count, body, skip, nil, func(i int, h netlink.Header, data []byte) error {
		if h.Type == netlink.Done && end != nil {
			end(i)
		}
		if h.Type != newRule {
			return nil
		}
		r := scratch.Get().(*parsedRule)
		defer scratch.Put(r)
		if err := parseRuleMsg(data, r); err != nil {
			_, chain := target(i)
			return fmt.Errorf("decode rule of %s: %w", chain, err)
		}
		return each(i, r)
	})
	if err != nil {
		return fmt.Errorf("dump rules: %w", err)
	}
	return nil
}

// chainsByName looks the named chains of table up one by one (the kernel
// finds each through its hash); names that do not exist are left out.
func (n *Netlink) chainsByName(table *nftables.Table, names []string) ([]*nftables.Chain, error) {
	answers, err := n.request(unix.NFT_MSG_GETCHAIN, netlink.Request, table.Family, chainRequests(table, names), func(err error) bool { return errors.Is(err, unix.ENOENT) })
	if err != nil {
		return nil, fmt.Errorf("get chains: %w", err)
	}
	var all []netlink.Message
	for _, a := range answers {
		all = append(all, a...)
	}
	if len(all) == 0 {
		return nil, nil
	}
	return decodeChains(table.Family, all)
}

// existingChains returns those of names that are chains of table.
func (n *Netlink) existingChains(table *nftables.Table, names []string) ([]string, error) {
	answers, err := n.request(unix.NFT_MSG_GETCHAIN, netlink.Request, table.Family, chainRequests(table, names), func(err error) bool { return errors.Is(err, unix.ENOENT) })
	if err != nil {
		return nil, err
	}
	var out []string
	for i, a := range answers {
		if len(a) > 0 {
			out = append(out, names[i])
		}
	}
	return out, nil
}

// chainRequests are the attributes of one GETCHAIN request per name.
func chainRequests(table *nftables.Table, names []string) [][]netlink.Attribute {
	requests := make([][]netlink.Attribute, len(names))
	for i, name := range names {
		requests[i] = []netlink.Attribute{
			{Type: unix.NFTA_CHAIN_TABLE, Data: []byte(table.Name + "\x00")},
			{Type: unix.NFTA_CHAIN_NAME, Data: []byte(name + "\x00")},
		}
	}
	return requests
}

// chainWalk says what a listing does with each chain it reads: decode
// decodes each rule as it arrives, finish (if not nil) replaces a chain's
// rules once they are all read, and leaf (if not nil) names the chains a
// listing finds but does not read (see nftgen.IsLeafChain).
type chainWalk[R any] struct {
	decode func(*parsedRule) R
	finish chainFinisher[R]
	leaf   func(chain string) bool
}

// listing is what discoverChains found: found are the layout's chains
// that exist, as the kernel describes them, names every chain read, those
// first, with rules[i] those of names[i] and omit[i] set when the walk's
// finish omitted names[i]; unread are the leaf chains found and not read.
type listing[R any] struct {
	found  []*nftables.Chain
	names  []string
	rules  [][]R
	omit   []bool
	unread []string
	// complete is false when the table holds a chain the listing did not
	// find (see discoverChains).
	complete bool
}

// discoverChains finds the chains of table and their rules without a
// chain dump, which the kernel restarts for every 32 KB buffer (quadratic:
// minutes at 300,000 chains). It looks up the chains of nftproxy's layout
// by name (they may be missing, and some are base chains), then follows
// targets (the verdict maps' chains) and every jump and goto, dumping each
// chain's rules (but a leaf's). A chain that a live rule or element jumps
// to exists and is a regular chain (the kernel refuses a jump to a missing
// chain or to a base chain, and a chain in use cannot be deleted), so
// those are not looked up: that halves the requests. The read is not
// atomic: a commit between two requests shows half (as any listing does).
// The table's use count (its chains, sets and named objects; others counts
// the sets and objects) tells whether this found every chain; the listing
// is not complete when it did not, for example when another process added
// a chain that nothing jumps to.
func discoverChains[R any](n *Netlink, table *nftables.Table, layout, targets []string, others int, walk chainWalk[R]) (*listing[R], error) {
	found, err := n.chainsByName(table, layout)
	if err != nil {
		return nil, err
	}
	l := &listing[R]{found: found}
	seen := map[string]bool{}
	var frontier []string
	for _, name := range layout {
		seen[name] = true
	}
	for _, ch := range found {
		l.names = append(l.names, ch.Name)
		frontier = append(frontier, ch.Name)
	}
	// add queues a jump target: an existing regular chain.
	add := func(name string) {
		switch {
		case name == "" || seen[name]:
		case walk.leaf != nil && walk.leaf(name):
			seen[name] = true
			l.unread = append(l.unread, name)
		default:
			seen[name] = true
			frontier = append(frontier, name)
			l.names = append(l.names, name)
		}
	}
	for _, name := range targets {
		add(name)
	}
	for len(frontier) > 0 {
		level := frontier
		frontier = nil
		start := len(l.rules)
		l.rules = append(l.rules, make([][]R, len(level))...)
		l.omit = append(l.omit, make([]bool, len(level))...)
		jumps := make([][]string, len(level))
		err := n.chainRules(table, level, nil, func(i int, r *parsedRule) error {
			for _, x := range r.exprs {
				if v, ok := x.e.(*expr.Verdict); ok && v.Chain != "" {
					jumps[i] = append(jumps[i], v.Chain)
				}
			}
			l.rules[start+i] = append(l.rules[start+i], walk.decode(r))
			return nil
		}, walk.finish.end(level, l.rules[start:], l.omit[start:]))
		if err != nil {
			return nil, err
		}
		for _, js := range jumps {
			for _, j := range js {
				add(j)
			}
		}
	}
	l.complete = uint32(len(l.names)+len(l.unread)+others) == table.Use
	return l, nil
}

// listAll lists every chain of table in one dump and reads the rules of
// all but the leaves, for a table discoverChains did not find whole.
func listAll[R any](n *Netlink, table *nftables.Table, walk chainWalk[R]) (*listing[R], error) {
	n.fullListings.Add(1)
	found, err := n.tableChains(table)
	if err != nil {
		return nil, err
	}
	l := &listing[R]{found: found, complete: true}
	for _, ch := range found {
		if ch.Hooknum == nil && walk.leaf != nil && walk.leaf(ch.Name) {
			l.unread = append(l.unread, ch.Name)
		} else {
			l.names = append(l.names, ch.Name)
		}
	}
	l.rules, l.omit, err = allRules(n, table, l.names, walk.decode, walk.finish)
	return l, err
}

// allRules dumps the rules of every chain of table named in names,
// decoded by decode; rules[i] are those of names[i], or what finish (if
// not nil) returned for them, and omit[i] whether it omitted names[i].
func allRules[R any](n *Netlink, table *nftables.Table, names []string, decode func(*parsedRule) R, finish chainFinisher[R]) (rules [][]R, omit []bool, err error) {
	rules, omit = make([][]R, len(names)), make([]bool, len(names))
	err = n.chainRules(table, names, nil, func(i int, r *parsedRule) error {
		rules[i] = append(rules[i], decode(r))
		return nil
	}, finish.end(names, rules, omit))
	return rules, omit, err
}

// chainFinisher is given the rules of a chain once they are all read and
// returns what the listing keeps of them, and whether it omits the chain
// (a full sync keeps only a digest of the chains outside the top level,
// see nftgen.LiveDigests), so that the decoded rules of a large table are
// garbage as soon as each chain is read.
type chainFinisher[R any] func(chain string, rules []R) ([]R, bool)

// end returns the end callback of chainRules that replaces rules[i], those
// of chains[i], by what f returns for them and sets omit[i] when f omits
// chains[i]; nil when f is.
func (f chainFinisher[R]) end(chains []string, rules [][]R, omit []bool) func(i int) {
	if f == nil {
		return nil
	}
	return func(i int) { rules[i], omit[i] = f(chains[i], rules[i]) }
}
