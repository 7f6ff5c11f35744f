package pipeline

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/host/conntrack"
)

// This file is the one resolved view of who owns which destination, as the
// last sync decided it (see claim): every path that acts per destination
// after a sync (UDP conntrack cleanup, health check node ports, the
// handover table) asks it, instead of reading the Service, so that a
// Service that lost a destination, or whose address was refused (the
// node's own), never acts on it.

// owner returns the Service whose port owns key in map m of family f after
// the last successful sync, and whether one does.
func (s *Pipeline) owner(f nftgen.Family, m string, key nftgen.MapKey) (types.NamespacedName, bool) {
	fs := s.families[f]
	if fs == nil || fs.owners == nil {
		return types.NamespacedName{}, false
	}
	cl, ok := fs.owners[fs.domains.of(m, key)]
	return cl.service(), ok
}

// owns reports whether nn owns key in family f: in the dispatch map (its
// DNAT), or, where no Service DNATs it, in the map of destinations
// without endpoints (m's counterpart, noEndpoints).
func (s *Pipeline) owns(f nftgen.Family, nn types.NamespacedName, dispatch, noEndpoints string, key nftgen.MapKey) bool {
	if o, ok := s.owner(f, dispatch, key); ok {
		return o == nn
	}
	o, ok := s.owner(f, noEndpoints, key)
	return ok && o == nn
}

// OwnedUDP returns the destinations and node port of nn's UDP service
// ports in list that nn owns in family f (a UDP service port whose every
// destination is another's, or refused, is left out).
func (s *Pipeline) OwnedUDP(f nftgen.Family, nn types.NamespacedName, list []conntrack.UDPService) []conntrack.UDPService {
	const udp = 17
	var out []conntrack.UDPService
	for _, u := range list {
		own := conntrack.UDPService{Endpoints: u.Endpoints}
		for _, d := range u.Destinations {
			if s.owns(f, nn, nftgen.MapServiceIPs, nftgen.MapNoEndpointExternal, nftgen.MapKey{Addr: d.Addr(), Proto: udp, Port: d.Port()}) {
				own.Destinations = append(own.Destinations, d)
			}
		}
		if u.NodePort != 0 && s.owns(f, nn, nftgen.MapServiceNodePorts, nftgen.MapNoEndpointNodePorts, nftgen.MapKey{Proto: udp, Port: u.NodePort}) {
			own.NodePort = u.NodePort
		}
		if len(own.Destinations) > 0 || own.NodePort != 0 {
			out = append(out, own)
		}
	}
	return out
}

// OwnsHealthCheckPort reports whether no other Service owns health check
// node port port in any family (a Service with no port of a family claims
// nothing there).
func (s *Pipeline) OwnsHealthCheckPort(nn types.NamespacedName, port uint16) bool {
	const tcp = 6
	for _, f := range s.Families() {
		if o, ok := s.owner(f, nftgen.MapHealthCheckNodePorts, nftgen.MapKey{Proto: tcp, Port: port}); ok && o != nn {
			return false
		}
	}
	return true
}
