package proxier

import (
	"fmt"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/model"
)

// claim is a service port's claim on one destination (an IP, protocol and
// port, or a protocol and node port) of the dispatch maps. Two Services can
// name the same destination (an external IP equal to another Service's
// cluster IP, two Services sharing a load balancer IP and port); a verdict
// map can hold only one of them. The conflict is decided per destination,
// never per Service, so that a Service loses only the destination it shares
// and keeps everything else.
type claim struct {
	// frag is the fragment key of the service port.
	frag string
	svc  types.NamespacedName
	// rank is 0 when the destination is one of the Service's own cluster
	// IPs, 1 when it is one of its load balancer IPs and 2 otherwise (an
	// external IP, a node port). A cluster IP is allocated to one Service
	// by the API server, so it always wins: another Service's external or
	// load balancer IP can never take it over (the CVE-2020-8554 class). A
	// load balancer IP is written into status by the load balancer
	// controller, while any user who may create a Service can write
	// spec.externalIPs: so a load balancer IP wins over an external IP, and
	// an external IP can never take over (and bypass the source ranges of)
	// another Service's load balancer address.
	rank int
}

// beats reports whether c wins the destination over o: the lower rank, then
// the lower fragment key, so that the winner depends only on the objects,
// not on the order in which they arrived. Ports of one Service that share a
// health check node port resolve the same way, silently.
func (c claim) beats(o claim) bool {
	if c.rank != o.rank {
		return c.rank < o.rank
	}
	return c.frag < o.frag
}

// candidate is a service port's fragment before its claims are decided.
type candidate struct {
	claim
	frag *nftgen.Fragment
	// domains are the claim domains of the generator that made frag.
	domains    claimDomains
	clusterIPs []netip.Addr
	lbIPs      []netip.Addr
}

func (c *candidate) claimOn(d destination) claim {
	cl := c.claim
	k := d.Key
	switch {
	case k.Addr.IsValid() && slices.Contains(c.clusterIPs, k.Addr):
		cl.rank = 0
	case k.Addr.IsValid() && slices.Contains(c.lbIPs, k.Addr):
		cl.rank = 1
	default:
		cl.rank = 2
	}
	return cl
}

// destination is one key of one claim domain (see claimDomains).
type destination struct {
	Map string
	Key nftgen.MapKey
}

// claimDomains names, per map, the domain among whose maps one key can have
// only one owner, as the generator declared it (nftgen.MapSpec.Domain): the
// dispatch map decides which Service's DNAT a packet gets, as the first
// matching rule of kube-proxy's KUBE-SERVICES does, and the maps checked
// before DNAT share its domain.
type claimDomains map[string]string

// newClaimDomains returns the domains of maps.
func newClaimDomains(maps []nftgen.MapSpec) claimDomains {
	d := claimDomains{}
	for _, m := range maps {
		if m.Domain != "" {
			d[m.Name] = m.Domain
		}
	}
	return d
}

// of returns the destination of key k in map m.
func (d claimDomains) of(m string, k nftgen.MapKey) destination {
	if dom, ok := d[m]; ok {
		return destination{Map: dom, Key: k}
	}
	return destination{Map: m, Key: k}
}

// destinations returns the distinct destinations of a fragment's elements.
// Their order does not matter: beats decides every key on its own.
func (d claimDomains) destinations(f *nftgen.Fragment) []destination {
	seen := map[destination]bool{}
	var out []destination
	for m, els := range f.Elements {
		for _, e := range els {
			d := d.of(m, e.Key)
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	return out
}

// withoutLost returns f without the elements of destinations it does not
// own, and the destinations it lost to another Service.
func withoutLost(c *candidate, owners map[destination]claim) (*nftgen.Fragment, []lostDestination) {
	var lost []lostDestination
	lostKey := map[destination]bool{}
	for _, k := range c.domains.destinations(c.frag) {
		if o := owners[k]; o.frag != c.claim.frag {
			lostKey[k] = true
			if o.svc != c.svc {
				lost = append(lost, lostDestination{key: k.Key, owner: o})
			}
		}
	}
	if len(lostKey) == 0 {
		return c.frag, nil
	}
	out := *c.frag
	out.Elements = map[string][]nftgen.MapElement{}
	for m, els := range c.frag.Elements {
		var kept []nftgen.MapElement
		for _, e := range els {
			if !lostKey[c.domains.of(m, e.Key)] {
				kept = append(kept, e)
			}
		}
		if len(kept) > 0 {
			out.Elements[m] = kept
		}
	}
	return &out, lost
}

// lostDestination is a destination a service port did not get.
type lostDestination struct {
	key   nftgen.MapKey
	owner claim
}

func (l lostDestination) problem(c *candidate) model.Problem {
	what := fmt.Sprintf("%s %s/%d", l.key.Addr, nftgen.ProtoName(l.key.Proto), l.key.Port)
	if !l.key.Addr.IsValid() {
		what = fmt.Sprintf("node port %s/%d", nftgen.ProtoName(l.key.Proto), l.key.Port)
	}
	why := "which comes first by name"
	switch l.owner.rank {
	case 0:
		why = "whose cluster IP it is; a cluster IP always wins over another Service's external or load balancer IP"
	case 1:
		why = "whose load balancer IP it is (status.loadBalancer); a load balancer IP wins over another Service's external IP"
	}
	reason := fmt.Sprintf("service port %s: %s is already used by %s, %s; only that destination is skipped", c.claim.frag, what, l.owner.frag, why)
	return model.Problem{Kind: "Service", Object: c.svc, Reason: reason}
}
