//go:build linux

package kernel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/nftgen"
)

// Watch implements Dataplane. It reports, until ctx ends, every transaction committed by another
// process that touches nftproxy's tables, through a netlink monitor. This
// is how drift is found within milliseconds instead of at the next periodic
// resync. When the kernel drops notifications, Watch resubscribes and
// sends a Change with Lost set. The channel is closed when ctx ends or the
// monitor cannot be restarted.
func (n *Netlink) Watch(ctx context.Context) (<-chan nftgen.Change, error) {
	sock, closeMon, err := n.subscribe()
	if err != nil {
		return nil, err
	}
	w := &watcher{n: n, ctx: ctx, out: make(chan nftgen.Change, 16), self: uint32(os.Getpid())}
	go w.run(sock, closeMon)
	return w.out, nil
}

// watcher is one Watch: it follows the monitor's subscriptions until ctx
// ends, sending what other processes changed to out.
type watcher struct {
	n    *Netlink
	ctx  context.Context
	out  chan nftgen.Change
	self uint32
}

// send sends ch; false when ctx ended first.
func (w *watcher) send(ch nftgen.Change) bool {
	select {
	case w.out <- ch:
		return true
	case <-w.ctx.Done():
		return false
	}
}

// run follows subscriptions, subscribing again after a socket fails, and
// closes out when it stops.
func (w *watcher) run(sock *netlink.Conn, closeMon func()) {
	defer close(w.out)
	for {
		lost, more := w.follow(sock, closeMon)
		if !more || w.ctx.Err() != nil {
			return
		}
		// The socket failed: after a pause (so that a persistent error
		// does not spin), subscribe again, then say that changes may have
		// been missed.
		select {
		case <-w.ctx.Done():
			return
		case <-time.After(resubscribeDelay):
		}
		var err error
		if sock, closeMon, err = w.n.subscribe(); err != nil {
			w.send(nftgen.Change{Lost: true, What: fmt.Sprintf("monitor stopped (%v) and could not resubscribe: %v", lost, err)})
			return
		}
		if !w.send(nftgen.Change{Lost: true, What: fmt.Sprintf("monitor lost notifications: %v", lost)}) {
			closeMon()
			return
		}
	}
}

// follow reads one subscription until its socket fails (the error) or ctx
// ends or a send is not taken (more false), and ends its reader and socket.
func (w *watcher) follow(sock *netlink.Conn, closeMon func()) (lost error, more bool) {
	done := make(chan struct{})
	reads := receiveAll(sock, done)
	stop := context.AfterFunc(w.ctx, func() { close(done); closeMon() })
	defer func() {
		if stop() {
			close(done)
		}
		closeMon()
	}()
	var pending []notification
	for {
		var r received
		select {
		case what := <-w.n.missed:
			if !w.send(nftgen.Change{Lost: true, Missed: true, What: what}) {
				return nil, false
			}
			continue
		case r = <-reads:
		}
		switch {
		case errors.Is(r.err, unix.ENOBUFS):
			// The kernel dropped notifications; the socket goes on.
			pending = nil
			if !w.send(nftgen.Change{Lost: true, What: fmt.Sprintf("monitor lost notifications: %v", r.err)}) {
				return nil, false
			}
			continue
		case r.err != nil:
			return r.err, true
		}
		if !w.deliver(r.msgs, &pending) {
			return nil, false
		}
	}
}

// deliver decodes msgs and sends each transaction another process
// committed, which ends with its generation message; pending holds a
// transaction's notifications until then. False when a send is not taken.
func (w *watcher) deliver(msgs []netlink.Message, pending *[]notification) bool {
	for _, m := range msgs {
		note, ok, err := decodeNotification(m)
		if err != nil || !ok {
			continue
		}
		if !note.gen {
			*pending = append(*pending, note)
			continue
		}
		changes := *pending
		*pending = nil
		if note.pid == w.self || ownThread(note.pid) {
			continue
		}
		if ch, ok := classify(changes); ok {
			ch.Process = fmt.Sprintf("%s[%d]", note.comm, note.pid)
			if !w.send(ch) {
				return false
			}
		}
	}
	return true
}

// received is one Receive of the monitor's socket.
type received struct {
	msgs []netlink.Message
	err  error
}

// receiveAll reads sock until it fails for good (closed) or done is
// closed, sending each read on the returned channel; ENOBUFS is passed on
// and reading goes on.
func receiveAll(sock *netlink.Conn, done <-chan struct{}) <-chan received {
	ch := make(chan received)
	go func() {
		for {
			msgs, err := sock.Receive()
			select {
			case ch <- received{msgs, err}:
			case <-done:
				return
			}
			if err != nil && !errors.Is(err, unix.ENOBUFS) {
				return
			}
		}
	}()
	return ch
}

// defaultMonitorReadBuffer is the receive buffer of the monitor's socket:
// room for bursts of other processes' changes. nftproxy's own full sync
// of a large table still overflows it, which Watch survives.
const defaultMonitorReadBuffer = 4 << 20

// resubscribeDelay is the pause before a monitor that stopped on an error
// is started again.
const resubscribeDelay = 100 * time.Millisecond

// subscribe opens a socket of its own in the nftables notification group
// and returns it and a function that closes it (safe to call twice).
func (n *Netlink) subscribe() (*netlink.Conn, func(), error) {
	sock, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: max(n.netnsFd, 0)})
	if err != nil {
		return nil, nil, fmt.Errorf("open netlink: %w", err)
	}
	if err := sock.SetReadBuffer(n.monitorReadBuffer); err != nil {
		sock.Close()
		return nil, nil, fmt.Errorf("monitor read buffer: %w", err)
	}
	if err := sock.JoinGroup(unix.NFNLGRP_NFTABLES); err != nil {
		sock.Close()
		return nil, nil, fmt.Errorf("join the nftables notification group: %w", err)
	}
	n.monMu.Lock()
	n.monitor = sock
	n.monMu.Unlock()
	var once sync.Once
	return sock, func() {
		once.Do(func() {
			n.monMu.Lock()
			if n.monitor == sock {
				n.monitor = nil
			}
			n.monMu.Unlock()
			_ = sock.Close()
		})
	}, nil
}

func ownThread(tid uint32) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid))
	return err == nil
}

// ElementCounts implements Dataplane.
func (n *Netlink) ElementCounts(ctx context.Context, f nftgen.Family) (out map[string]int, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var maps []*nftables.Set
	err = n.withConn(func(c *nftables.Conn) error {
		shards, err := shardTables(c, f)
		if err != nil {
			return err
		}
		// A sharded family's dispatch maps are counted over its tables.
		for _, name := range append([]string{nftgen.TableName}, shards...) {
			sets, err := c.GetSets(&nftables.Table{Name: name, Family: tableFamily(f)})
			for _, s := range sets {
				if !s.Anonymous && s.IsMap && !nftgen.IsEndpointMap(s.Name) {
					maps = append(maps, s)
				}
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	elements, err := n.setElements(maps)
	if err != nil {
		return nil, err
	}
	out = map[string]int{}
	for i, s := range maps {
		out[s.Name] += len(elements[i])
	}
	return out, nil
}
