//go:build linux

package cleanup

import (
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// CleanupNFT removes kube-proxy's rules from the iptables-nft backend (the
// nftables tables "nat" and "filter" that iptables-nft manages) and the
// tables of kube-proxy's nftables mode ("kube-proxy"), in both families,
// in one transaction, in the current network namespace.
func CleanupNFT() (Result, error) {
	c, err := nftables.New()
	if err != nil {
		return Result{}, err
	}
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
		for _, name := range []string{"nat", "filter"} {
			r, err := cleanupNFTTable(c, byTable[name])
			if err != nil {
				return res, err
			}
			res.Add(r)
		}
		if t, err := c.ListTableOfFamily("kube-proxy", fam); err == nil {
			c.DelTable(t)
			res.Chains += len(byTable["kube-proxy"])
		} else if !errors.Is(err, unix.ENOENT) {
			return res, fmt.Errorf("look for kube-proxy's nftables table: %w", err)
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

// cleanupNFTTable queues the deletion of kube-proxy's chains of one
// iptables-nft table and of every rule elsewhere that jumps to them.
func cleanupNFTTable(c *nftables.Conn, chains []*nftables.Chain) (Result, error) {
	var res Result
	kube := map[string]*nftables.Chain{}
	for _, ch := range chains {
		if owned(ch.Name) {
			kube[ch.Name] = ch
		}
	}
	if len(kube) == 0 {
		return res, nil
	}
	for _, ch := range chains {
		if kube[ch.Name] != nil {
			continue
		}
		rules, err := c.GetRules(ch.Table, ch)
		if err != nil {
			return res, fmt.Errorf("list rules of %s: %w", ch.Name, err)
		}
		for _, r := range rules {
			for _, e := range r.Exprs {
				if v, ok := e.(*expr.Verdict); ok && kube[v.Chain] != nil {
					if err := c.DelRule(r); err != nil {
						return res, err
					}
					res.Rules++
					break
				}
			}
		}
	}
	for _, ch := range kube {
		c.FlushChain(ch)
	}
	for _, ch := range kube {
		c.DelChain(ch)
		res.Chains++
	}
	return res, nil
}
