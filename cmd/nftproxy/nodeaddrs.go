package main

import (
	"net/netip"
	"slices"

	"k8s.io/klog/v2"

	"github.com/nftproxy/nftproxy/proxier"
	"github.com/nftproxy/nftproxy/proxier/netns"
)

// followNodePortAddresses looks the node's interface addresses up again
// before a sync, as kube-proxy does on every sync, when node ports are
// restricted to some of them (--nodeport-addresses). If the addresses in
// those ranges changed (an interface came up, a DHCP lease moved), the
// generators are rebuilt and the sync is a full one. Called with mu held.
func (d *daemon) followNodePortAddresses() {
	if !restrictsNodePorts(d.opts.nodePortAddresses) {
		return
	}
	var local []netip.Addr
	if err := netns.Do(d.opts.netns, func() (err error) { local, err = proxier.LocalAddresses(); return err }); err != nil {
		klog.ErrorS(err, "Cannot list the node's addresses; keeping the node port addresses as they were")
		return
	}
	if slices.Equal(local, d.st.local) {
		return
	}
	before := nodePortAddressesOf(d.st)
	d.st.local = local
	gens, err := d.opts.generatorsFor(d.st, d.node)
	if err != nil {
		klog.ErrorS(err, "Cannot rebuild the rules for the node's new addresses")
		return
	}
	d.st.gens = gens
	if after := nodePortAddressesOf(d.st); !slices.Equal(before, after) {
		klog.InfoS("The node's addresses changed; node ports now answer on the new ones", "before", before, "after", after)
		d.p.Syncer.SetGenerators(gens...)
		if d.st.serviceHealth != nil {
			d.st.serviceHealth.SetAddresses(healthCheckAddresses(d.st))
		}
	}
}

// restrictsNodePorts reports whether --nodeport-addresses limits node
// ports to some of the node's addresses.
func restrictsNodePorts(spec []string) bool {
	for _, s := range spec {
		if s != "" && s != "all" && s != "0.0.0.0/0" && s != "::/0" {
			return true
		}
	}
	return false
}

// nodePortAddressesOf returns the node port addresses of every family of
// st's generators.
func nodePortAddressesOf(st *setup) []netip.Addr {
	var out []netip.Addr
	for _, g := range st.gens {
		out = append(out, g.Config().NodePortAddresses...)
	}
	return out
}

// healthCheckAddresses are the addresses the health check node ports
// listen on: the node port addresses when --nodeport-addresses restricts
// them (kube-proxy does the same), otherwise every address (nil).
func healthCheckAddresses(st *setup) []netip.Addr {
	for _, g := range st.gens {
		if g.Config().RestrictNodePorts {
			return append([]netip.Addr{}, nodePortAddressesOf(st)...)
		}
	}
	return nil
}
