package main

import (
	"fmt"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier"
	"github.com/nftproxy/nftproxy/proxier/netns"
)

// currentGenerators builds the generators for node and the node's
// current addresses: when node ports are restricted to some of them
// (--nodeport-addresses), the addresses are looked up again, as kube-proxy
// does on every sync. While neither changed, the last generators are
// returned as they are. The engine calls it with its lock held.
func (o *options) currentGenerators(st *setup, node *v1.Node) ([]*nftgen.Generator, error) {
	local := st.local
	if restrictsNodePorts(o.nodePortAddresses) {
		if err := netns.Do(o.netns, func() (err error) { local, err = proxier.LocalAddresses(); return err }); err != nil {
			return nil, fmt.Errorf("list the node's addresses: %w", err)
		}
	}
	if slices.Equal(local, st.local) && node == st.nodeObj && st.gens != nil {
		return st.gens, nil
	}
	st.local, st.nodeObj = local, node
	gens, err := o.generatorsFor(st, node)
	if err != nil {
		return nil, err
	}
	st.gens = gens
	return gens, nil
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
