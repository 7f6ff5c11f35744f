package conntrack

import "net/netip"

// UDPService is what a UDP service port accepts and where it may send.
type UDPService struct {
	// Destinations are the service's IP:port pairs (cluster, external and
	// load balancer IPs).
	Destinations []netip.AddrPort
	// NodePort is the node port, or 0; it matches any destination address.
	NodePort uint16
	// Endpoints are the endpoints traffic may currently reach.
	Endpoints []netip.AddrPort
}

// Flow is the part of a conntrack entry that staleness depends on.
type Flow struct {
	Proto    uint8
	OrigDst  netip.AddrPort
	ReplySrc netip.AddrPort
}

const protoUDP = 17

// Stale returns the positions in flows of the flows that belong to one of services (by destination
// IP:port, or by node port) but whose reply comes from an address that is
// not one of its endpoints: a deleted endpoint, or the service address
// itself when the flow started before there were endpoints.
// Several clients' flows to one deleted endpoint are as many positions.
func Stale(flows []Flow, services []UDPService) []int {
	type target struct{ endpoints map[netip.AddrPort]bool }
	byDest := map[netip.AddrPort]*target{}
	byNodePort := map[uint16]*target{}
	for _, svc := range services {
		t := &target{endpoints: map[netip.AddrPort]bool{}}
		for _, e := range svc.Endpoints {
			t.endpoints[e] = true
		}
		for _, d := range svc.Destinations {
			byDest[d] = t
		}
		// As kube-proxy: a node port's flows only once it has endpoints
		// (a node port matches any destination address, so without
		// endpoints every flow to that port number would go).
		if svc.NodePort != 0 && len(svc.Endpoints) > 0 {
			byNodePort[svc.NodePort] = t
		}
	}
	var out []int
	for i, f := range flows {
		if f.Proto != protoUDP {
			continue
		}
		t := byDest[f.OrigDst]
		if t == nil {
			t = byNodePort[f.OrigDst.Port()]
		}
		if t != nil && !t.endpoints[f.ReplySrc] {
			out = append(out, i)
		}
	}
	return out
}
