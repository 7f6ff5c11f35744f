//go:build linux

package kernel

import (
	"fmt"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// quiet makes the drift monitor (Watch), if one runs, leave the nftables
// multicast group for the length of one commit, so that the kernel builds
// no notification for nftproxy's own objects: with a listener on the host
// it builds one per rule and element and holds them all until the commit
// ends. The generation id is read before and after; if it moved by more
// than this commit, another process committed meanwhile, and Watch reports
// a Change with Lost set so that the caller checks the table. The returned
// function rejoins; call it with whether the commit succeeded.
func (n *Netlink) quiet() func(committed bool) {
	n.monMu.Lock()
	if n.monitor == nil {
		n.monMu.Unlock()
		return func(bool) {}
	}
	before, err := n.generation()
	if err == nil {
		err = n.monitor.LeaveGroup(unix.NFNLGRP_NFTABLES)
	}
	if err != nil {
		// Without a generation or out of the group nothing can be told
		// for sure: commit while listening, as before.
		n.monMu.Unlock()
		return func(bool) {}
	}
	return func(committed bool) {
		defer n.monMu.Unlock()
		rejoin := n.monitor.JoinGroup(unix.NFNLGRP_NFTABLES)
		after, err := n.generation()
		want := before
		if committed {
			want++
		}
		switch {
		case rejoin != nil:
			n.reportMissed(fmt.Sprintf("could not rejoin the nftables monitor group: %v", rejoin))
		case err != nil:
			n.reportMissed(fmt.Sprintf("could not read the generation after a commit: %v", err))
		case after != want:
			n.reportMissed(fmt.Sprintf("%d other commits happened while nftproxy committed (generation %d -> %d)", after-want, before, after))
		}
	}
}

// generation returns the nftables generation id of the namespace.
func (n *Netlink) generation() (id uint32, err error) {
	err = n.withConn(func(c *nftables.Conn) error {
		g, err := c.GetGen()
		if err != nil {
			return fmt.Errorf("get generation: %w", err)
		}
		id = g.ID
		return nil
	})
	return id, err
}

// reportMissed tells Watch that changes may have been missed; a report
// that is already waiting covers this one.
func (n *Netlink) reportMissed(what string) {
	select {
	case n.missed <- what:
	default:
	}
}
