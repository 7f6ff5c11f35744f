//go:build linux

package e2e

import (
	"errors"
	"fmt"
	"os"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/e2e/testns"
	"github.com/nftproxy/nftproxy/nftgen"
)

// nfacct's netlink message type and attribute (linux/netfilter/nfnetlink_acct.h).
const (
	nfnlSubsysAcct = 7
	nfnlMsgAcctNew = 0
	nfacctName     = 1
)

// createNfacctCounters creates, in ns, the nfacct counters that kube-proxy
// creates before it writes rules that count in them (its
// ct_state_invalid_dropped_pkts and localhost_nps_accepted_pkts), so that
// kube-proxy's rules, or nftproxy's compat view of its own table, load
// into iptables as they would on a node where kube-proxy runs.
func createNfacctCounters(ns *testns.NS) error {
	f, err := os.Open(ns.Path())
	if err != nil {
		return err
	}
	defer f.Close()
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: int(f.Fd())})
	if err != nil {
		return fmt.Errorf("netfilter socket: %w", err)
	}
	defer c.Close()
	for _, name := range []string{nftgen.CounterCTStateInvalid, nftgen.CounterLocalhostNodePorts} {
		ae := netlink.NewAttributeEncoder()
		ae.String(nfacctName, name)
		attrs, err := ae.Encode()
		if err != nil {
			return err
		}
		msg := netlink.Message{
			Header: netlink.Header{Type: netlink.HeaderType(nfnlSubsysAcct<<8 | nfnlMsgAcctNew), Flags: netlink.Request | netlink.Create | netlink.Acknowledge},
			// nfgenmsg: family, version, resource id.
			Data: append([]byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0}, attrs...),
		}
		if _, err := c.Execute(msg); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("create nfacct counter %s: %w", name, err)
		}
	}
	return nil
}
