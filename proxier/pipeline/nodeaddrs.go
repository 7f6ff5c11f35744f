package pipeline

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	"github.com/nftproxy/nftproxy/proxier/metrics"
	"github.com/nftproxy/nftproxy/proxier/model"
)

// Why a destination is refused, as RefusedDestinations counts it.
const (
	refusedConflict = iota
	refusedNodeAddress
	numRefusals
)

// refuse counts n destinations of nn that are not programmed for reason.
func (fs *familyState) refuse(nn types.NamespacedName, reason, n int) {
	if n == 0 {
		return
	}
	r := fs.refused[nn]
	if r == nil {
		r = new([numRefusals]int32)
		fs.refused[nn] = r
	}
	r[reason] += int32(n)
}

// Refused returns the destinations the last sync did not program, by
// metrics.RefusedConflict and metrics.RefusedNodeAddress, over every
// family.
func (s *Pipeline) Refused() map[string]int {
	var sum [numRefusals]int
	for _, fs := range s.families {
		for _, r := range fs.refused {
			for i, n := range r {
				sum[i] += int(n)
			}
		}
	}
	return map[string]int{metrics.RefusedConflict: sum[refusedConflict], metrics.RefusedNodeAddress: sum[refusedNodeAddress]}
}

// SetLocalAddresses sets the addresses of the node's interfaces, which no
// Service may capture (see withoutNodeAddresses). The engine looks them up
// before every sync; a Service that names an address that became, or is
// no longer, the node's is recomputed at the next sync.
func (s *Pipeline) SetLocalAddresses(addrs []netip.Addr) {
	now := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		now[a.Unmap()] = true
	}
	if maps.Equal(now, s.local) {
		return
	}
	for a := range s.local {
		if !now[a] {
			for nn := range s.refusedAt[a] {
				s.retry[nn] = true
			}
			delete(s.refusedAt, a)
		}
	}
	added := map[netip.Addr]bool{}
	for a := range now {
		if !s.local[a] {
			added[a] = true
		}
	}
	if len(added) > 0 {
		for _, fs := range s.families {
			for d, cl := range fs.owners {
				if added[d.Key.Addr] {
					s.retry[cl.service()] = true
				}
			}
		}
	}
	s.local = now
}

// withoutNodeAddresses removes from st, a service port about to be
// generated in fs's family, the addresses that are the node's own, reports
// each and counts it, and reports false when the port cannot be programmed
// in this family at all. Such an address would capture that port of the
// node for every client (sshd, the kubelet, a DNS server on a second
// NIC):
//   - an external IP equal to any address of the node, its interfaces' or
//     its Node object's (spec.externalIPs is any Service author's);
//   - a cluster IP equal to one (a service CIDR that overlaps the node's
//     network): the port is not programmed in this family;
//   - a load balancer IP equal to an address of the Node object or a
//     primary node IP. A load balancer IP that is another address of an
//     interface is kept: status.loadBalancer is written by the load
//     balancer controller, and some (kube-vip, keepalived) put the
//     address they announce on the node's interface for kube-proxy to
//     DNAT.
func (s *Pipeline) withoutNodeAddresses(fs *familyState, nn types.NamespacedName, st *svcmodel.ServicePortState) bool {
	nodeIPs := fs.gen.Config().NodeIPs
	fam := fs.gen.Family().IPFamily()
	isNode := func(a netip.Addr) bool { return svcmodel.FamilyOf(a) == fam && slices.Contains(nodeIPs, a) }
	isLocal := func(a netip.Addr) bool { return svcmodel.FamilyOf(a) == fam && (s.local[a] || isNode(a)) }
	refuse := func(a netip.Addr, field, what string) {
		fs.refuse(nn, refusedNodeAddress, 1)
		if s.local[a] {
			if s.refusedAt[a] == nil {
				s.refusedAt[a] = map[types.NamespacedName]bool{}
			}
			s.refusedAt[a][nn] = true
		}
		s.report([]model.Problem{{Kind: "Service", Object: nn, Field: field,
			Reason: fmt.Sprintf("%s is this node's own address; %s, it would capture the node's port %d", a, what, st.Port)}})
	}
	if ip, ok := st.ClusterIP(fam); ok && isLocal(ip) {
		refuse(ip, "spec.clusterIPs", "the port is not programmed in this family")
		return false
	}
	// without returns addrs without those for which refused is true,
	// refusing each (field is the list's, with %d for the index). The
	// snapshot's lists are shared: a list with none is kept as it is.
	without := func(addrs []netip.Addr, refused func(netip.Addr) bool, field string) []netip.Addr {
		if !slices.ContainsFunc(addrs, refused) {
			return addrs
		}
		var kept []netip.Addr
		for j, ip := range addrs {
			if refused(ip) {
				refuse(ip, fmt.Sprintf(field, j), "not programmed")
				continue
			}
			kept = append(kept, ip)
		}
		return kept
	}
	st.ExternalIPs = without(st.ExternalIPs, isLocal, "spec.externalIPs[%d]")
	st.LoadBalancerIPs = without(st.LoadBalancerIPs, isNode, "status.loadBalancer.ingress[%d]")
	return true
}
