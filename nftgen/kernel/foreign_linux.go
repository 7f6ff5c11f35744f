//go:build linux

package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// ForeignChain is a chain of a table that another program owns (the nat,
// filter and mangle tables of iptables-nft), as cleanup reads it.
type ForeignChain struct {
	Name string
	// Base is true for a chain attached to a hook.
	Base  bool
	Rules []ForeignRule
}

// ForeignRule is one rule of a ForeignChain: what cleanup needs to judge
// and delete it.
type ForeignRule struct {
	Handle uint64
	// Jump is the chain a jump or goto verdict of the rule names, or "".
	Jump string
	// Comment is the rule's comment: its userdata, or the text of
	// iptables' comment match.
	Comment string
}

// ForeignTable reads the family's table named table, which nftproxy does
// not own, without dumping chains: a chain dump walks every chain of the
// family, nftproxy's own table's included, again for each buffer, which
// is quadratic (minutes at a million chains). It looks up the chains
// named in roots (the built-in and fixed chains; missing ones are left
// out), follows every jump and goto, one rule dump per chain, and checks
// the count against the table's use count. Only when the table holds
// chains nothing found (an unreferenced chain of another program) does it
// fall back to the chain dump. A missing table reads as no chains.
func (n *Netlink) ForeignTable(ctx context.Context, family nftables.TableFamily, table string, roots []string) (chains []ForeignChain, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var t *nftables.Table
	others := 0
	err = n.withConn(func(c *nftables.Conn) error {
		if t, err = c.ListTableOfFamily(table, family); err != nil {
			if errors.Is(err, unix.ENOENT) {
				t, err = nil, nil
			}
			return err
		}
		// The table's use count counts its sets and named objects too.
		sets, err := c.GetSets(t)
		if err != nil {
			return fmt.Errorf("list sets: %w", err)
		}
		objs, err := c.GetObjects(t)
		if err != nil {
			return fmt.Errorf("list objects: %w", err)
		}
		others = len(sets) + len(objs)
		return nil
	})
	if t == nil || err != nil {
		return nil, err
	}
	walk := chainWalk[ForeignRule]{decode: foreignRule}
	l, err := discoverChains(n, t, roots, nil, others, walk)
	if err != nil {
		return nil, fmt.Errorf("read table %s: %w", table, err)
	}
	if !l.complete {
		if l, err = listAll(n, t, walk); err != nil {
			return nil, fmt.Errorf("list table %s: %w", table, err)
		}
	}
	found, names, rules := l.found, l.names, l.rules
	base := map[string]bool{}
	for _, ch := range found {
		base[ch.Name] = ch.Hooknum != nil
	}
	chains = make([]ForeignChain, len(names))
	for i, name := range names {
		chains[i] = ForeignChain{Name: name, Base: base[name], Rules: rules[i]}
	}
	return chains, nil
}

// foreignRule reads a rule's handle, jump and comment.
func foreignRule(r *parsedRule) ForeignRule {
	out := ForeignRule{Handle: r.handle}
	out.Comment, _ = userdata.GetString(r.userData, userdata.TypeComment)
	for _, x := range r.exprs {
		if v, ok := x.e.(*expr.Verdict); ok && (v.Kind == expr.VerdictJump || v.Kind == expr.VerdictGoto) {
			out.Jump = v.Chain
		}
		if x.unknown == "match" {
			if c, ok := commentMatch(x.data); ok {
				out.Comment = c
			}
		}
	}
	return out
}

// commentMatch returns the text of an xtables "comment" match expression
// (struct xt_comment_info: the NUL-terminated comment).
func commentMatch(data []byte) (string, bool) {
	var name string
	var info []byte
	a := attrs{b: data}
	for t, v, ok := a.next(); ok; t, v, ok = a.next() {
		switch t {
		case unix.NFTA_MATCH_NAME:
			name = cstring(v)
		case unix.NFTA_MATCH_INFO:
			info = v
		}
	}
	if name != "comment" || a.err != nil {
		return "", false
	}
	if i := bytes.IndexByte(info, 0); i >= 0 {
		info = info[:i]
	}
	return string(info), true
}
