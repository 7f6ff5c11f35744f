package pipeline

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
	// frag is the fragment key of the service port; it names the Service
	// too (service), which the owners map so holds once.
	frag string
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
	rank int8
	// held is set when the service port held the destination before this
	// sync (see incumbents), and since is when its Service was created
	// (Unix nanoseconds; 0 when unknown): between claims of one rank the
	// first holder keeps the destination, so that a newcomer can take no
	// established Service's address, whatever its name.
	held  bool
	since int64
}

// service returns the Service whose port made the claim.
func (c claim) service() types.NamespacedName { return nftgen.ServiceOfKey(c.frag) }

// beats reports whether c wins the destination over o: the lower rank,
// then the one that held it before this sync, then the older Service, then
// the lower fragment key. The rank, the age and the key depend only on the
// objects, and who held a destination only on what the kernel holds, so
// incremental and full syncs and a restart agree. Ports of one Service
// that share a health check node port resolve the same way, silently.
func (c claim) beats(o claim) bool {
	switch {
	case c.rank != o.rank:
		return c.rank < o.rank
	case c.held != o.held:
		return c.held
	case c.since != o.since:
		return c.since < o.since
	}
	return c.frag < o.frag
}

// incumbents tells who held each destination before a sync: the owners
// the pipeline applied last, or, when it knows none (after a restart or a
// failed sync), the chains the kernel's map elements jump to. Without
// either (a new table, render), nobody held anything.
type incumbents struct {
	// frag returns the fragment key that held d, or "".
	frag func(d destination) string
	// chains maps a destination to the chain its element jumps to.
	chains map[destination]string
}

// holds reports whether c held d before the sync.
func (in *incumbents) holds(c *candidate, d destination) bool {
	if in == nil {
		return false
	}
	if in.frag != nil {
		return in.frag(d) == c.claim.frag
	}
	want, ok := in.chains[d]
	return ok && want == c.verdictChain(d)
}

// kernelIncumbents returns who holds each destination in the maps of a
// table read back from the kernel, by the chain its element jumps to (a
// service port's own chain: KUBE-SVC-, KUBE-EXT-, KUBE-FW-).
func kernelIncumbents(live *nftgen.TableState, domains claimDomains) *incumbents {
	in := &incumbents{chains: map[destination]string{}}
	for _, m := range live.Maps {
		for _, e := range m.Elements {
			if e.Verdict.Chain != "" && e.Verdict.Chain != nftgen.ChainReject {
				in.chains[domains.of(m.Spec.Name, e.Key)] = e.Verdict.Chain
			}
		}
	}
	return in
}

// appliedIncumbents returns who held each destination in owners, the
// owners the pipeline applied.
func appliedIncumbents(owners map[destination]claim) *incumbents {
	return &incumbents{frag: func(d destination) string { return owners[d].frag }}
}

// candidate is a service port's fragment before its claims are decided.
type candidate struct {
	claim
	svc  types.NamespacedName
	frag *nftgen.Fragment
	// domains are the claim domains of the generator that made frag.
	domains    claimDomains
	clusterIPs []netip.Addr
	lbIPs      []netip.Addr
	// inc tells which destinations the port held before the sync.
	inc *incumbents
	// fam is the family state it was made for.
	fam *familyState
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
	cl.held = c.inc.holds(c, d)
	return cl
}

// verdictChain returns the chain that c's element of destination d jumps
// to, or "".
func (c *candidate) verdictChain(d destination) string {
	for m, els := range c.frag.Elements {
		for _, e := range els {
			if c.domains.of(m, e.Key) == d {
				return e.Verdict.Chain
			}
		}
	}
	return ""
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
			if o.service() != c.svc {
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
	why := "which held it first"
	switch {
	case l.owner.rank == 0:
		why = "whose cluster IP it is; a cluster IP always wins over another Service's external or load balancer IP"
	case l.owner.rank == 1 && !slices.Contains(c.lbIPs, l.key.Addr):
		why = "whose load balancer IP it is (status.loadBalancer); a load balancer IP wins over another Service's external IP"
	case l.owner.since < c.since:
		why = "which is older; the first holder keeps a destination"
	case l.owner.since == c.since && l.owner.frag < c.claim.frag:
		why = "which was created at the same time and comes first by name"
	}
	reason := fmt.Sprintf("service port %s: %s is already used by %s, %s; only that destination is skipped", c.claim.frag, what, l.owner.frag, why)
	return model.Problem{Kind: "Service", Object: c.svc, Reason: reason}
}

// ownerJournal changes an owner index in place and remembers, for each
// destination it changed, who held it before: an incremental sync asks
// who held a destination without copying the index.
type ownerJournal struct {
	owners map[destination]claim
	prior  map[destination]string
}

func (j *ownerJournal) note(d destination) {
	if _, ok := j.prior[d]; !ok {
		j.prior[d] = j.owners[d].frag
	}
}

func (j *ownerJournal) set(d destination, cl claim) { j.note(d); j.owners[d] = cl }

func (j *ownerJournal) del(d destination) { j.note(d); delete(j.owners, d) }

// heldBefore returns the fragment key that held d before the journal
// changed anything.
func (j *ownerJournal) heldBefore(d destination) string {
	if p, ok := j.prior[d]; ok {
		return p
	}
	return j.owners[d].frag
}
