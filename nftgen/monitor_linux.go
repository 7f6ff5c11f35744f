//go:build linux

package nftgen

import (
	"context"
	"fmt"
	"os"

	"github.com/google/nftables"
)

// Change is a committed nftables transaction made by another process that
// touched nftproxy's tables, or may have (element changes do not name
// their table).
type Change struct {
	// Process is the name and PID of the process that committed it.
	Process string
	// Ours is true when a table, chain, rule or set of nftproxy's table
	// changed; false when only set elements somewhere changed.
	Ours bool
	// What describes the first change.
	What string
}

// Watch reports, until ctx ends, every transaction committed by another
// process that touches nftproxy's tables, through a netlink monitor. This
// is how drift is found within milliseconds instead of at the next periodic
// resync. The channel is closed when the monitor stops.
func (n *Netlink) Watch(ctx context.Context) (<-chan Change, error) {
	c, err := n.conn()
	if err != nil {
		return nil, err
	}
	mon := nftables.NewMonitor(nftables.WithMonitorEventBuffer(1024))
	events, err := c.AddGenerationalMonitor(mon)
	if err != nil {
		return nil, fmt.Errorf("nftables monitor: %w", err)
	}
	out := make(chan Change, 16)
	self := uint32(os.Getpid())
	go func() {
		defer close(out)
		go func() { <-ctx.Done(); _ = mon.Close() }()
		for evs := range events {
			gen, _ := evs.GeneratedBy.Data.(*nftables.Gen)
			if gen == nil || gen.ProcPID == self || ownThread(gen.ProcPID) {
				continue
			}
			if ch, ok := classify(evs.Changes); ok {
				ch.Process = fmt.Sprintf("%s[%d]", gen.ProcComm, gen.ProcPID)
				select {
				case out <- ch:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// ownThread reports whether tid is a thread of this process: the kernel
// names the committing thread, and Go commits from any of its threads.
func ownThread(tid uint32) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid))
	return err == nil
}

func classify(changes []*nftables.MonitorEvent) (Change, bool) {
	var elements bool
	for _, e := range changes {
		var table *nftables.Table
		var what string
		switch d := e.Data.(type) {
		case *nftables.Table:
			table, what = d, "table"
		case *nftables.Chain:
			table, what = d.Table, "chain "+d.Name
		case *nftables.Rule:
			table, what = d.Table, "rule in chain "+chainName(d)
		case *nftables.Set:
			table, what = d.Table, "set "+d.Name
		case []nftables.SetElement:
			elements = true
			continue
		default:
			continue
		}
		if table != nil && table.Name == TableName && (table.Family == nftables.TableFamilyIPv4 || table.Family == nftables.TableFamilyIPv6) {
			verb := "added"
			if e.Type == nftables.MonitorEventTypeDelTable || e.Type == nftables.MonitorEventTypeDelChain ||
				e.Type == nftables.MonitorEventTypeDelRule || e.Type == nftables.MonitorEventTypeDelSet {
				verb = "deleted"
			}
			return Change{Ours: true, What: what + " " + verb}, true
		}
	}
	if elements {
		return Change{What: "set elements changed"}, true
	}
	return Change{}, false
}

func chainName(r *nftables.Rule) string {
	if r.Chain != nil {
		return r.Chain.Name
	}
	return "?"
}

// ElementCounts returns the number of elements of each named map of the
// family's table, for telling whether a foreign element change hit them.
func (n *Netlink) ElementCounts(f Family) (map[string]int, error) {
	c, err := n.conn()
	if err != nil {
		return nil, err
	}
	table := &nftables.Table{Name: TableName, Family: tableFamily(f)}
	sets, err := c.GetSets(table)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, s := range sets {
		if s.Anonymous || !s.IsMap || isEndpointMap(s.Name) {
			continue
		}
		els, err := c.GetSetElements(s)
		if err != nil {
			return nil, err
		}
		out[s.Name] = len(els)
	}
	return out, nil
}
