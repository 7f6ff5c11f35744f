package main

import (
	"fmt"
	"net/netip"
	"slices"

	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/proxier"
	"github.com/nftproxy/nftproxy/proxier/host/conntrack"
	"github.com/nftproxy/nftproxy/proxier/host/netns"
)

// runInitOnly does what needs privilege before the daemon runs, as
// kube-proxy's --init-only does: the conntrack sysctls, and route_localnet
// when node ports are served on 127.0.0.0/8. It needs neither the API
// server nor the Node, and exits.
func runInitOnly(opts *options) error {
	if err := netns.Do(opts.netns, func() error { return conntrack.Apply(opts.conntrackSettings()) }); err != nil {
		return fmt.Errorf("conntrack settings: %w", err)
	}
	var local []netip.Addr
	if err := netns.Do(opts.netns, func() (err error) { local, err = proxier.LocalAddresses(); return err }); err != nil {
		return err
	}
	// As the generator decides: node ports on 127.0.0.1 unless
	// --nodeport-addresses leaves loopback out (no Node here, so
	// "primary" names no address).
	np, err := proxier.ResolveNodePortAddresses(opts.nodePortAddresses, local, nil, true)
	if err != nil {
		return usageError{err}
	}
	if opts.localhostNodePorts && (np.All || slices.ContainsFunc(np.Addrs, netip.Addr.IsLoopback)) {
		klog.InfoS("Setting route_localnet=1 to allow node-ports on localhost")
		if err := netns.Do(opts.netns, proxier.EnableRouteLocalnet); err != nil {
			return fmt.Errorf("route_localnet: %w", err)
		}
	}
	klog.InfoS("System initialized and --init-only specified")
	return nil
}
