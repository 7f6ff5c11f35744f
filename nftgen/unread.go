package nftgen

import (
	"context"
	"strings"
)

// A view of a large table (the compat view that `save` prints) need not
// hold every rule at once. A leaving read (Dataplane.ReadLeaving) keeps the
// rules of the layout's chains and only the names of the Services'
// chains: the endpoint chains, nine in ten of a table's, jump only to
// KUBE-MARK-MASQ and are not read at all; the others are read to find
// what they jump to and let go. The view then reads them a few thousand at
// a time, in the order it prints them.

// ChainRef names a chain and the table that holds it (TableName or a
// shard table).
type ChainRef struct {
	Table, Chain string
}

// ChainRules reads the rules of chains that a read left unread
// (TableState.Unread): rules[i] are those of chains[i]. A chain that no
// longer exists has none.
type ChainRules func(ctx context.Context, chains []ChainRef) (rules [][]Rule, err error)

// IsServiceChain reports whether the chain called name is one of a
// Service's or an endpoint's chains (KUBE-SVC-, KUBE-SVL-, KUBE-EXT-,
// KUBE-FW-, KUBE-SEP-), which a leaving read leaves unread.
func IsServiceChain(name string) bool {
	for _, p := range []string{PrefixEndpoint, PrefixService, PrefixLocal, PrefixExternal, PrefixFirewall} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// IsLeafChain reports whether the chain called name is an endpoint chain,
// which jumps only to chains of the layout (KUBE-MARK-MASQ): reading it
// finds no other chain, so a leaving read does not.
func IsLeafChain(name string) bool { return strings.HasPrefix(name, PrefixEndpoint) }

// LeaveServiceChains moves the Service chains of s (the regular chains
// IsServiceChain names) from Chains to the end of *unread, named with
// table, and returns them, rules and all.
func (s *TableState) LeaveServiceChains(table string, unread *[]ChainRef) []*Chain {
	kept := s.Chains[:0:0]
	var moved []*Chain
	for _, c := range s.Chains {
		if c.Base != nil || !IsServiceChain(c.Name) {
			kept = append(kept, c)
			continue
		}
		*unread = append(*unread, ChainRef{Table: table, Chain: c.Name})
		moved = append(moved, c)
	}
	s.Chains = kept
	return moved
}

// LeaveUnread moves the Service chains of st (and of its shards) from
// Chains to Unread, in their order, and returns a ChainRules that gives
// their rules back. The Fake's ReadLeaving is this; tests use it to build
// the state a leaving read returns.
func LeaveUnread(st *TableState) ChainRules {
	held := map[ChainRef][]Rule{}
	for _, s := range append([]*TableState{st}, st.Shards...) {
		table := s.Name
		if table == "" {
			table = TableName
		}
		for _, c := range s.LeaveServiceChains(table, &s.Unread) {
			held[ChainRef{Table: table, Chain: c.Name}] = c.Rules
		}
	}
	return func(ctx context.Context, chains []ChainRef) ([][]Rule, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out := make([][]Rule, len(chains))
		for i, ref := range chains {
			out[i] = held[ref]
		}
		return out, nil
	}
}
