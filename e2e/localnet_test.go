//go:build linux

package e2e

import (
	"errors"
	"github.com/nftproxy/nftproxy/e2e/harness"
	"io"
	"net"
	"syscall"
	"testing"
)

// TestLocalnetGuardAfterOtherProgramsDNAT: another program on the node
// (here a table like CNI portmap's, for a host port on 127.0.0.1) DNATs a
// local connection to 127.0.0.1 in its own nat output chain. The localnet
// guard (kubelet's KUBE-FIREWALL, which iptables mode checks in filter
// OUTPUT, after every DNAT) must let that DNATed connection through, from a
// non-loopback source as well, and still drop one to 127.0.0.1 that
// nothing DNATs.
func TestLocalnetGuardAfterOtherProgramsDNAT(t *testing.T) {
	c, pods := featureCluster(t)
	c.sync()
	server := pods["a1"].IP.String() + ":8080"
	// The other program's table, in the test's node namespace only.
	c.Node.MustRun(t, "nft", "add", "table", "ip", "hostport-test")
	c.Node.MustRun(t, "nft", "add", "chain", "ip", "hostport-test", "out", "{ type nat hook output priority -100; }")
	c.Node.MustRun(t, "nft", "add", "rule", "ip", "hostport-test", "out", "ip", "daddr", "127.0.0.1", "tcp", "dport", "54323", "dnat", "to", server)
	if r, err := dialFrom(c, harness.NodeIP, "127.0.0.1:54323"); err != nil || r.Server == "" {
		t.Errorf("from %s to the DNATed 127.0.0.1:54323: %+v, %v; want the pod behind it to answer", harness.NodeIP, r, err)
	}
	// Nothing DNATs this one: the guard drops it (a listener on the node
	// would otherwise answer).
	var ln net.Listener
	if err := c.Node.Do(func() (err error) { ln, err = net.Listen("tcp", "127.0.0.1:54324"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	if _, err := dialFrom(c, harness.NodeIP, "127.0.0.1:54324"); err == nil {
		t.Errorf("a connection from %s to 127.0.0.1 that nothing DNATs was let through", harness.NodeIP)
	}
	if _, err := dialFrom(c, "127.0.0.1", "127.0.0.1:54324"); err != nil && !isEOF(err) {
		t.Errorf("from 127.0.0.1 to a local listener on 127.0.0.1: %v, want it connected", err)
	}
}

// dialFrom connects from the node with the local address src to addr and
// exchanges one line.
func dialFrom(c *cluster, src, addr string) (harness.Reply, error) {
	conn, err := harness.DialTCPFrom(c.Node, src, addr, timeout)
	if err != nil {
		return harness.Reply{}, err
	}
	defer conn.Close()
	return harness.Exchange(conn, "hello", timeout)
}

// isEOF reports whether err says the peer closed the connection (the
// listener above accepts and closes).
func isEOF(err error) bool {
	return err != nil && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET))
}
