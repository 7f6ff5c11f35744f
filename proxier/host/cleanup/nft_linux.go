//go:build linux

package cleanup

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/kernel"
)

// CleanupNFT removes kube-proxy's rules from the iptables-nft backend (the
// nftables tables "nat", "filter" and "mangle" that iptables-nft manages)
// and the tables of earlier nftproxy versions, in both families, in one
// transaction, in the network namespace at nsPath ("": this process's).
// What is
// kube-proxy's is decided by PlanTable. kube-proxy's nftables-mode table
// is not touched here: it has nftproxy's table's name, and the daemon's
// first sync replaces it; --cleanup deletes both as nftproxy's table.
//
// No chain list is dumped (see kernel.Netlink.ForeignTable): a dump walks
// nftproxy's own table too, and at a million chains that took minutes.
func CleanupNFT(ctx context.Context, nsPath string) (Result, error) {
	// The reader opens sockets from goroutines on any OS thread, so the
	// namespace is given by its file, never by the calling thread's.
	// Entering one needs CAP_SYS_ADMIN, which the DaemonSet does not
	// grant: this process's own namespace is used as it is.
	n := kernel.NewNetlink()
	var opts []nftables.ConnOption
	if nsPath != "" {
		var ns *os.File
		var err error
		if n, ns, err = kernel.NewNetlinkInNamespace(nsPath); err != nil {
			return Result{}, err
		}
		defer ns.Close()
		opts = append(opts, nftables.WithNetNSFd(int(ns.Fd())))
	}
	defer n.Close()
	c, err := kernel.NewConn(opts...)
	if err != nil {
		return Result{}, err
	}
	defer c.CloseLasting()
	var res Result
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
		for _, name := range []string{"nat", "filter", "mangle"} {
			chains, err := n.ForeignTable(ctx, fam, name, rootChains(name))
			if err != nil {
				return res, err
			}
			r, err := cleanupNFTTable(c, &nftables.Table{Name: name, Family: fam}, chains)
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
			res.Tables++
		} else if !errors.Is(err, unix.ENOENT) {
			return res, fmt.Errorf("look for the table of an earlier nftproxy: %w", err)
		}
	}
	if res.Chains == 0 && res.Rules == 0 && res.Tables == 0 {
		return res, nil
	}
	if err := c.Flush(); err != nil {
		return Result{}, fmt.Errorf("remove kube-proxy's iptables-nft rules: %w", err)
	}
	return res, nil
}

// cleanupNFTTable queues what PlanTable removes from one iptables-nft
// table: kube-proxy's jumps, then its chains, flushed and deleted.
func cleanupNFTTable(c *nftables.Conn, table *nftables.Table, chains []kernel.ForeignChain) (Result, error) {
	var res Result
	view := make([]Chain, len(chains))
	for i, ch := range chains {
		view[i] = Chain{Name: ch.Name, Base: ch.Base, Rules: make([]Rule, len(ch.Rules))}
		for j, r := range ch.Rules {
			view[i].Rules[j] = Rule{Jump: r.Jump, Comment: r.Comment}
		}
	}
	plan := PlanTable(table.Name, view)
	for _, ch := range chains {
		chain := &nftables.Chain{Name: ch.Name, Table: table}
		for _, pos := range plan.Rules[ch.Name] {
			if err := c.DelRule(&nftables.Rule{Table: table, Chain: chain, Handle: ch.Rules[pos].Handle}); err != nil {
				return res, fmt.Errorf("delete rule %d of %s: %w", ch.Rules[pos].Handle, ch.Name, err)
			}
			res.Rules++
		}
	}
	for _, name := range plan.Chains {
		c.FlushChain(&nftables.Chain{Name: name, Table: table})
	}
	for _, name := range plan.Chains {
		c.DelChain(&nftables.Chain{Name: name, Table: table})
		res.Chains++
	}
	res.Kept = plan.Kept
	return res, nil
}
