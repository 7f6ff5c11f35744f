//go:build linux

package cleanup

import (
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/google/nftables/xt"
	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/kernel"
)

// CleanupNFT removes kube-proxy's rules from the iptables-nft backend (the
// nftables tables "nat", "filter" and "mangle" that iptables-nft manages)
// and the tables of earlier nftproxy versions, in both families, in one
// transaction, in the current network namespace. What is kube-proxy's is
// decided by PlanTable. kube-proxy's nftables-mode table is not touched
// here: it has nftproxy's table's name, and the daemon's first sync
// replaces it; --cleanup deletes both as nftproxy's table.
func CleanupNFT() (Result, error) {
	c, err := kernel.NewConn()
	if err != nil {
		return Result{}, err
	}
	defer c.CloseLasting()
	var res Result
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
		chains, err := c.ListChainsOfTableFamily(fam)
		if err != nil {
			return res, fmt.Errorf("list chains: %w", err)
		}
		byTable := map[string][]*nftables.Chain{}
		for _, ch := range chains {
			byTable[ch.Table.Name] = append(byTable[ch.Table.Name], ch)
		}
		for _, name := range []string{"nat", "filter", "mangle"} {
			r, err := cleanupNFTTable(c, name, byTable[name])
			if err != nil {
				return res, fmt.Errorf("%s table: %w", name, err)
			}
			res.Add(r)
		}
		// The table of an earlier nftproxy version. kube-proxy's
		// nftables-mode table has nftproxy's own table's name: the first
		// sync replaced it (nftgen.Inventory.Foreign).
		if t, err := c.ListTableOfFamily(nftgen.FormerTableName, fam); err == nil {
			c.DelTable(t)
			res.Chains += len(byTable[nftgen.FormerTableName])
		} else if !errors.Is(err, unix.ENOENT) {
			return res, fmt.Errorf("look for the table of an earlier nftproxy: %w", err)
		}
	}
	if res.Chains == 0 && res.Rules == 0 {
		return res, nil
	}
	if err := c.Flush(); err != nil {
		return Result{}, fmt.Errorf("remove kube-proxy's iptables-nft rules: %w", err)
	}
	return res, nil
}

// cleanupNFTTable queues what PlanTable removes from one iptables-nft
// table: kube-proxy's jumps, then its chains, flushed and deleted. The
// rules of kube-proxy's own chains (hundreds of thousands in a large
// cluster, one dump each) are read only for a chain another program's
// rule keeps, whose own jumps keep more.
func cleanupNFTTable(c *nftables.Conn, table string, chains []*nftables.Chain) (Result, error) {
	var res Result
	view := make([]Chain, len(chains))
	rules := make([][]*nftables.Rule, len(chains))
	read := make([]bool, len(chains))
	index := map[string]int{}
	named := false
	for i, ch := range chains {
		view[i] = Chain{Name: ch.Name, Base: ch.Hooknum != nil}
		index[ch.Name] = i
		named = named || KubeProxyChain(table, ch.Name)
	}
	if !named {
		return res, nil // no rule needs reading
	}
	readRules := func(i int) error {
		rs, err := c.GetRules(chains[i].Table, chains[i])
		if err != nil {
			return fmt.Errorf("list rules of %s: %w", chains[i].Name, err)
		}
		rules[i], read[i] = rs, true
		for _, r := range rs {
			view[i].Rules = append(view[i].Rules, nftRuleView(r))
		}
		return nil
	}
	for i, ch := range chains {
		if view[i].Base || !KubeProxyChain(table, ch.Name) {
			if err := readRules(i); err != nil {
				return res, err
			}
		}
	}
	plan := PlanTable(table, view)
	for again := true; again; {
		again = false
		for _, name := range plan.Kept {
			if i := index[name]; !read[i] {
				if err := readRules(i); err != nil {
					return res, err
				}
				again = true
			}
		}
		if again {
			plan = PlanTable(table, view)
		}
	}
	for i, ch := range chains {
		for _, pos := range plan.Rules[ch.Name] {
			if err := c.DelRule(rules[i][pos]); err != nil {
				return res, err
			}
			res.Rules++
		}
	}
	for _, name := range plan.Chains {
		c.FlushChain(chains[index[name]])
	}
	for _, name := range plan.Chains {
		c.DelChain(chains[index[name]])
		res.Chains++
	}
	res.Kept = plan.Kept
	return res, nil
}

// nftRuleView reads the jump and the comment of an nftables rule: the
// comment of iptables-nft's comment match, or the rule's own comment.
func nftRuleView(r *nftables.Rule) Rule {
	var v Rule
	if s, ok := userdata.GetString(r.UserData, userdata.TypeComment); ok {
		v.Comment = s
	}
	for _, e := range r.Exprs {
		switch e := e.(type) {
		case *expr.Verdict:
			if e.Kind == expr.VerdictJump || e.Kind == expr.VerdictGoto {
				v.Jump = e.Chain
			}
		case *expr.Match:
			if c, ok := e.Info.(*xt.Comment); ok && e.Name == "comment" {
				v.Comment = string(*c)
			}
		}
	}
	return v
}
