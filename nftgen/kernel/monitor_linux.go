//go:build linux

package kernel

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"

	"github.com/nftproxy/nftproxy/nftgen"
)

// Watch implements Dataplane. It reports, until ctx ends, every transaction committed by another
// process that touches nftproxy's tables, through a netlink monitor. This
// is how drift is found within milliseconds instead of at the next periodic
// resync. When the kernel drops notifications, Watch resubscribes and
// sends a Change with Lost set. The channel is closed when ctx ends or the
// monitor cannot be restarted.
func (n *Netlink) Watch(ctx context.Context) (<-chan nftgen.Change, error) {
	events, closeMon, err := n.subscribe()
	if err != nil {
		return nil, err
	}
	out := make(chan nftgen.Change, 16)
	self := uint32(os.Getpid())
	send := func(ch nftgen.Change) bool {
		select {
		case out <- ch:
			return true
		case <-ctx.Done():
			return false
		}
	}
	go func() {
		defer close(out)
		for {
			stop := context.AfterFunc(ctx, closeMon)
			var lost error
		read:
			for {
				var evs *nftables.MonitorEvents
				select {
				case what := <-n.missed:
					if !send(nftgen.Change{Lost: true, Missed: true, What: what}) {
						stop()
						return
					}
					continue
				case e, ok := <-events:
					if !ok {
						break read
					}
					evs = e
				}
				if evs.GeneratedBy == nil {
					continue
				}
				if evs.GeneratedBy.Error != nil {
					lost = evs.GeneratedBy.Error
					continue
				}
				gen, _ := evs.GeneratedBy.Data.(*nftables.Gen)
				if gen == nil || gen.ProcPID == self || ownThread(gen.ProcPID) {
					continue
				}
				if ch, ok := classify(evs.Changes); ok {
					ch.Process = fmt.Sprintf("%s[%d]", gen.ProcComm, gen.ProcPID)
					if !send(ch) {
						stop()
						return
					}
				}
			}
			stop()
			closeMon()
			// The monitor ended on a receive error: after a pause (so that
			// a persistent error does not spin), subscribe again, then say
			// that changes may have been missed.
			select {
			case <-ctx.Done():
				return
			case <-time.After(resubscribeDelay):
			}
			if events, closeMon, err = n.subscribe(); err != nil {
				send(nftgen.Change{Lost: true, What: fmt.Sprintf("monitor stopped (%v) and could not resubscribe: %v", lost, err)})
				return
			}
			if !send(nftgen.Change{Lost: true, What: fmt.Sprintf("monitor lost notifications: %v", lost)}) {
				closeMon()
				return
			}
		}
	}()
	return out, nil
}

// defaultMonitorReadBuffer is the receive buffer of the monitor's socket:
// room for bursts of other processes' changes. nftproxy's own full sync
// of a large table still overflows it, which Watch survives.
const defaultMonitorReadBuffer = 4 << 20

// resubscribeDelay is the pause before a monitor that stopped on an error
// is started again.
const resubscribeDelay = 100 * time.Millisecond

// subscribe starts a generational nftables monitor on a socket of its own
// and returns its events and a function that closes both (safe to call
// twice). The socket is closed here rather than by the monitor, which
// leaves it open when it stops on a receive error.
func (n *Netlink) subscribe() (chan *nftables.MonitorEvents, func(), error) {
	var sock *netlink.Conn
	setBuffer := func(c *netlink.Conn) error { sock = c; return c.SetReadBuffer(n.monitorReadBuffer) }
	c, err := nftables.New(append(n.connOptions(), nftables.AsLasting(), nftables.WithSockOptions(setBuffer))...)
	if err != nil {
		return nil, nil, fmt.Errorf("open netlink: %w", err)
	}
	mon := nftables.NewMonitor(nftables.WithMonitorEventBuffer(1024))
	events, err := c.AddGenerationalMonitor(mon)
	if err != nil {
		_ = c.CloseLasting()
		return nil, nil, fmt.Errorf("nftables monitor: %w", err)
	}
	n.monMu.Lock()
	n.monitor = sock
	n.monMu.Unlock()
	var once sync.Once
	return events, func() {
		once.Do(func() {
			n.monMu.Lock()
			if n.monitor == sock {
				n.monitor = nil
			}
			n.monMu.Unlock()
			_ = mon.Close()
			_ = c.CloseLasting()
		})
	}, nil
}

// ownThread reports whether tid is a thread of this process: the kernel
// names the committing thread, and Go commits from any of its threads.
func ownThread(tid uint32) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid))
	return err == nil
}

func classify(changes []*nftables.MonitorEvent) (nftgen.Change, bool) {
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
		if table != nil && table.Name == nftgen.TableName && (table.Family == nftables.TableFamilyIPv4 || table.Family == nftables.TableFamilyIPv6) {
			verb := "added"
			if e.Type == nftables.MonitorEventTypeDelTable || e.Type == nftables.MonitorEventTypeDelChain ||
				e.Type == nftables.MonitorEventTypeDelRule || e.Type == nftables.MonitorEventTypeDelSet {
				verb = "deleted"
			}
			return nftgen.Change{Ours: true, What: what + " " + verb}, true
		}
	}
	if elements {
		return nftgen.Change{What: "set elements changed"}, true
	}
	return nftgen.Change{}, false
}

func chainName(r *nftables.Rule) string {
	if r.Chain != nil {
		return r.Chain.Name
	}
	return "?"
}

// ElementCounts implements Dataplane.
func (n *Netlink) ElementCounts(ctx context.Context, f nftgen.Family) (out map[string]int, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	err = n.withConn(func(c *nftables.Conn) error {
		table := &nftables.Table{Name: nftgen.TableName, Family: tableFamily(f)}
		sets, err := c.GetSets(table)
		if err != nil {
			return err
		}
		out = map[string]int{}
		for _, s := range sets {
			if s.Anonymous || !s.IsMap || nftgen.IsEndpointMap(s.Name) {
				continue
			}
			els, err := c.GetSetElements(s)
			if err != nil {
				return err
			}
			out[s.Name] = len(els)
		}
		return nil
	})
	return out, err
}
