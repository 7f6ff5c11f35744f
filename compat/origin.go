package compat

import (
	"fmt"

	"github.com/nftproxy/nftproxy/nftgen"
)

// Origin names one nftables object of a table: rule Rule (from 0) of
// Chain, or, when Element is set, one element of the map that rule looks
// up (ElementKey) or one target of its random choice (TargetKey).
type Origin struct {
	Chain   string
	Rule    int
	Element string
}

// Line is one rule of the compat view: "-A Chain Rule" in iptables table
// Table.
type Line struct {
	Table string `json:"table"`
	Chain string `json:"chain"`
	Rule  string `json:"rule"`
}

// String prints the line as iptables-save does, with its table.
func (l Line) String() string { return fmt.Sprintf("-t %s -A %s %s", l.Table, l.Chain, l.Rule) }

// ElementKey names a map element by its key, as nft prints it
// ("10.96.0.1 . tcp . 80", or "tcp . 30080" for node-port maps).
func ElementKey(k nftgen.MapKey) string {
	if k.Addr.IsValid() {
		return fmt.Sprintf("%s . %s . %d", k.Addr, nftgen.ProtoName(k.Proto), k.Port)
	}
	return fmt.Sprintf("%s . %d", nftgen.ProtoName(k.Proto), k.Port)
}

// TargetKey names target i of a random choice between endpoint chains.
func TargetKey(i int) string { return fmt.Sprintf("#%d", i) }

// Origins renders st as Build does and says which compat-view rules each
// nftables rule, map element and random target became. An object that
// the view cannot express has no lines.
func Origins(st *nftgen.TableState) map[Origin][]Line {
	b := newBuilder(st, chainCount(st))
	b.origins = map[Origin][]Line{}
	if st != nil {
		b.build()
	}
	return b.origins
}
