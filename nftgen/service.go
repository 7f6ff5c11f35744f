package nftgen

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"
)

// svcBuild holds what one service port's fragment is built from.
type svcBuild struct {
	g     *Generator
	sp    *svcmodel.ServicePortState
	name  string // "ns/svc:port"
	proto uint8
	frag  *Fragment
	seen  map[elementKey]bool
	// sharedAffinity: the port's session affinity entries go into one set
	// keyed "client . endpoint", not one set per endpoint (see
	// affinitySet).
	sharedAffinity bool
	// sepNames holds the KUBE-SEP- chain name of each endpoint, hashed
	// once for the rules that pick it and the chain itself.
	sepNames map[netip.AddrPort]string
}

// sepName returns the KUBE-SEP- chain of endpoint e.
func (b *svcBuild) sepName(e svcmodel.Endpoint) string {
	ap := netip.AddrPortFrom(e.Addr, e.Port)
	if name, ok := b.sepNames[ap]; ok {
		return name
	}
	name := EndpointChainName(b.sp.Name, ap.String())
	b.sepNames[ap] = name
	return name
}

type elementKey struct {
	m string
	k MapKey
}

func (b *svcBuild) element(m string, k MapKey, v Verdict, comment string) {
	if b.seen[elementKey{m, k}] {
		return // the same IP listed twice (e.g. as external and LB IP)
	}
	b.seen[elementKey{m, k}] = true
	b.frag.Elements[m] = append(b.frag.Elements[m], MapElement{Key: k, Verdict: v, Comment: TruncateComment(comment)})
}

func (g *Generator) familyAddrs(in []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range in {
		if svcmodel.FamilyOf(a) == g.modelFamily() {
			out = append(out, a)
		}
	}
	return out
}

// familyEndpoints returns the endpoints of this family: in, when they all
// are (as the snapshot's are), else a copy of those that are.
func (g *Generator) familyEndpoints(in []svcmodel.Endpoint) []svcmodel.Endpoint {
	fam := g.modelFamily()
	i := slices.IndexFunc(in, func(e svcmodel.Endpoint) bool { return svcmodel.FamilyOf(e.Addr) != fam })
	if i < 0 {
		return in
	}
	out := slices.Clone(in[:i])
	for _, e := range in[i:] {
		if svcmodel.FamilyOf(e.Addr) == fam {
			out = append(out, e)
		}
	}
	return out
}

// Service returns the fragment of one service port in this family: its
// chains, affinity sets and map elements. It follows the structure of
// kube-proxy's iptables mode rule for rule; see docs/ruleset.md for the mapping.
// It returns nil if the port has no cluster IP of this family.
func (g *Generator) Service(sp *svcmodel.ServicePortState) *Fragment {
	vip, ok := sp.ClusterIP(g.modelFamily())
	if !ok {
		return nil
	}
	// The port as this family sees it: external and load balancer IPs of
	// other families do not make it externally accessible here (kube-proxy
	// builds its service info per family the same way).
	own := *sp
	own.ExternalIPs, own.LoadBalancerIPs = g.familyAddrs(sp.ExternalIPs), g.familyAddrs(sp.LoadBalancerIPs)
	sp = &own
	b := &svcBuild{g: g, sp: sp, name: sp.Name.String(), proto: protoNumber(sp.Name.Protocol),
		frag: &Fragment{Elements: map[string][]MapElement{}}, seen: map[elementKey]bool{}}
	eps := g.familyEndpoints(sp.Endpoints)
	cat := svcmodel.Categorize(&sp.ServicePort, eps, g.cfg.Node)
	b.sharedAffinity = sp.AffinityTimeoutSeconds > 0 && len(cat.Reachable) > CascadeMaxEndpoints
	b.sepNames = make(map[netip.AddrPort]string, len(cat.Reachable))
	n := sp.Name
	svcChain, svlChain, extChain, fwChain := portChainNames(n)
	externalIPs, lbIPs := sp.ExternalIPs, sp.LoadBalancerIPs
	ranges, closed := g.sourceRanges(sp)

	usesClusterChain := len(cat.Cluster) > 0 && sp.UsesClusterEndpoints()
	usesLocalChain := len(cat.Local) > 0 && sp.UsesLocalEndpoints()
	internalChain, hasInternal := svcChain, cat.Any
	if sp.InternalPolicyLocal {
		internalChain = svlChain
		hasInternal = hasInternal && len(cat.Local) > 0
	}
	externalPolicyChain, hasExternal := svcChain, cat.Any
	if sp.ExternalPolicyLocal {
		externalPolicyChain = svlChain
		hasExternal = hasExternal && len(cat.Local) > 0
	}
	usesExt := cat.Any && sp.ExternallyAccessible()
	lbChain := extChain
	usesFW := cat.Any && len(lbIPs) > 0 && (len(ranges) > 0 || closed)
	if usesFW {
		lbChain = fwChain
	}
	reject := gotoV(ChainReject)
	internalFilter, externalFilter := reject, reject
	internalComment := b.name + " has no endpoints"
	externalComment := internalComment
	if cat.Any {
		if !hasInternal {
			internalFilter, internalComment = drop, b.name+" has no local endpoints"
		}
		if !hasExternal {
			externalFilter, externalComment = drop, b.name+" has no local endpoints"
		}
	}

	// Map elements: what iptables mode writes into KUBE-SERVICES,
	// KUBE-NODEPORTS, KUBE-EXTERNAL-SERVICES and KUBE-PROXY-FIREWALL.
	key := func(a netip.Addr, port uint16) MapKey { return MapKey{Addr: a, Proto: b.proto, Port: port} }
	if hasInternal {
		b.element(MapServiceIPs, key(vip, sp.Port), gotoV(internalChain), b.name+" cluster IP")
	} else {
		b.element(MapNoEndpointServices, key(vip, sp.Port), internalFilter, internalComment)
	}
	for _, ip := range externalIPs {
		if cat.Any {
			b.element(MapServiceIPs, key(ip, sp.Port), gotoV(extChain), b.name+" external IP")
		}
		if !hasExternal {
			b.element(MapNoEndpointExternal, key(ip, sp.Port), externalFilter, externalComment)
		}
	}
	for _, ip := range lbIPs {
		if cat.Any {
			b.element(MapServiceIPs, key(ip, sp.Port), gotoV(lbChain), b.name+" loadbalancer IP")
		}
		if usesFW {
			b.element(MapFirewallIPs, key(ip, sp.Port), drop, b.name+" traffic not accepted by "+fwChain)
		}
		if !hasExternal {
			b.element(MapNoEndpointExternal, key(ip, sp.Port), externalFilter, externalComment)
		}
	}
	if sp.NodePort != 0 {
		npKey := MapKey{Proto: b.proto, Port: sp.NodePort}
		if cat.Any {
			b.element(MapServiceNodePorts, npKey, gotoV(extChain), b.name)
		}
		if !hasExternal {
			b.element(MapNoEndpointNodePorts, npKey, externalFilter, externalComment)
		}
	}
	if sp.HealthCheckNodePort != 0 {
		comment, rules := HealthCheckComment(b.name, sp.HealthCheckPorts)
		b.element(MapHealthCheckNodePorts, MapKey{Proto: ProtoTCP, Port: sp.HealthCheckNodePort}, accept, comment)
		b.frag.HealthCheckRules = rules
	}

	if usesExt {
		b.frag.Chains = append(b.frag.Chains, b.externalChain(extChain, svcChain, externalPolicyChain, hasExternal))
	}
	if usesFW {
		b.frag.Chains = append(b.frag.Chains, b.firewallChain(fwChain, extChain, ranges, lbIPs))
	}
	masq := b.masqueradeRule(vip)
	// pickChain is KUBE-SVC- or KUBE-SVL-: the masquerade mark when it is
	// the internal traffic's chain, then the choice among eps.
	pickChain := func(name string, eps []svcmodel.Endpoint) {
		c := &Chain{Name: name, Compat: IptablesNAT}
		if internalChain == name && hasInternal && masq != nil {
			c.Rules = append(c.Rules, *masq)
		}
		c.Rules = append(c.Rules, b.endpointRules(name, eps)...)
		b.frag.Chains = append(b.frag.Chains, c)
	}
	if usesClusterChain {
		pickChain(svcChain, cat.Cluster)
	}
	if usesLocalChain {
		pickChain(svlChain, cat.Local)
	}
	for _, e := range cat.Reachable {
		b.frag.Chains = append(b.frag.Chains, b.endpointChain(e))
	}
	return b.frag
}

// masqueradeRule is the first rule of the internal traffic chain: mark for
// masquerade what does not come from a pod (or everything with
// --masquerade-all). It is nil when neither applies.
func (b *svcBuild) masqueradeRule(vip netip.Addr) *Rule {
	stmts := []Stmt{MatchAddr{Dir: Daddr, Prefix: hostPrefix(vip)}, MatchProto{Proto: b.proto}, MatchDport{Port: b.sp.Port}}
	switch {
	case b.g.cfg.MasqueradeAll:
	case len(b.g.cfg.ClusterCIDRs) > 0:
		for _, c := range b.g.cfg.ClusterCIDRs {
			stmts = append(stmts, MatchAddr{Dir: Saddr, Prefix: c, Negate: true})
		}
	case b.g.cfg.PodInterface != "":
		stmts = append(stmts, b.g.podInterface(true))
	default:
		return nil
	}
	r := NewRule(b.name+" cluster IP", append(stmts, jump(ChainMarkMasq))...)
	return &r
}

// podInterface matches pod traffic by its input interface, or with not
// everything else.
func (g *Generator) podInterface(not bool) MatchIifname {
	return MatchIifname{Name: g.cfg.PodInterface, Prefix: g.cfg.PodInterfacePrefix, Negate: not}
}

// externalChain is KUBE-EXT-: masquerade and go to the cluster chain, or
// for Local policy short-circuit pods and the node and go to KUBE-SVL-.
func (b *svcBuild) externalChain(ext, svc, policy string, hasExternal bool) *Chain {
	c := &Chain{Name: ext, Compat: IptablesNAT}
	if !b.sp.ExternalPolicyLocal {
		c.Rules = append(c.Rules, NewRule(fmt.Sprintf(commentMasqExternal, b.name), jump(ChainMarkMasq)))
	} else {
		for _, cidr := range b.g.cfg.ClusterCIDRs {
			c.Rules = append(c.Rules, NewRule(fmt.Sprintf(commentPodExternal, b.name), MatchAddr{Dir: Saddr, Prefix: cidr}, jump(svc)))
		}
		if len(b.g.cfg.ClusterCIDRs) == 0 && b.g.cfg.PodInterface != "" {
			c.Rules = append(c.Rules, NewRule(fmt.Sprintf(commentPodExternal, b.name), b.g.podInterface(false), jump(svc)))
		}
		c.Rules = append(c.Rules,
			NewRule(fmt.Sprintf(commentMasqLocalExternal, b.name), MatchFibLocal{Dir: Saddr}, jump(ChainMarkMasq)),
			NewRule(fmt.Sprintf(commentRouteLocal, b.name), MatchFibLocal{Dir: Saddr}, jump(svc)))
	}
	if hasExternal {
		c.Rules = append(c.Rules, NewRule("", jump(policy)))
	}
	return c
}

// sourceRanges returns the service port's loadBalancerSourceRanges of this
// family. A range of length 0 means every source, as no range does
// (kube-proxy writes no firewall then). closed is true when the Service had
// a range that did not parse and this family has none that does: nftproxy
// then builds a firewall that lets nothing through, where kube-proxy would
// build none and accept every source.
func (g *Generator) sourceRanges(sp *svcmodel.ServicePortState) (ranges []netip.Prefix, closed bool) {
	for _, r := range sp.LoadBalancerSourceRanges {
		if svcmodel.FamilyOf(r.Addr()) != g.modelFamily() {
			continue
		}
		if r.Bits() == 0 {
			return nil, false
		}
		ranges = append(ranges, r)
	}
	return ranges, len(ranges) == 0 && sp.SourceRangesInvalid
}

// firewallChain is KUBE-FW-: let allowed sources on to KUBE-EXT-; the rest
// falls through and is dropped by KUBE-PROXY-FIREWALL.
func (b *svcBuild) firewallChain(fw, ext string, ranges []netip.Prefix, lbIPs []netip.Addr) *Chain {
	c := &Chain{Name: fw, Compat: IptablesNAT}
	allowFromNode := false
	for _, r := range ranges {
		c.Rules = append(c.Rules, NewRule(b.name+" loadbalancer IP", MatchAddr{Dir: Saddr, Prefix: r}, jump(ext)))
		allowFromNode = allowFromNode || r.Contains(b.g.cfg.NodeIP)
	}
	if allowFromNode {
		// A node that reaches a load balancer IP configured on itself
		// does so with that IP as the source.
		for _, ip := range lbIPs {
			c.Rules = append(c.Rules, NewRule(b.name+" loadbalancer IP", MatchAddr{Dir: Saddr, Prefix: hostPrefix(ip)}, jump(ext)))
		}
	}
	c.Rules = append(c.Rules, NewRule(fmt.Sprintf(commentOtherDropped, b.name)))
	return c
}

// affinitySet names the dynamic set that holds the clients of endpoint
// chain sepChain, and returns the endpoint to key them with. Up to
// CascadeMaxEndpoints endpoints each endpoint has a set of its own, as
// kube-proxy has a recent list of its own ("client" keys). Above it the
// port has one set keyed "client . endpoint": the kernel finds a set by
// walking the table's sets, so a set per endpoint made a cold sync of one
// Service quadratic in its endpoints (3.8 s of kernel time at 8,000).
func (b *svcBuild) affinitySet(sepChain string, e svcmodel.Endpoint) (string, netip.AddrPort) {
	if b.sharedAffinity {
		return PrefixAffinity + ServiceChainName(b.sp.Name), netip.AddrPortFrom(e.Addr, e.Port)
	}
	return PrefixAffinity + sepChain, netip.AddrPort{}
}

// pickComment is the comment of the rule that picks endpoint e, which
// large clusters go without (and do not build).
func (b *svcBuild) pickComment(e svcmodel.Endpoint) string {
	if b.g.cfg.LargeCluster {
		return ""
	}
	return b.name + " -> " + e.String()
}

// epComment is a per-endpoint comment, which large clusters go without.
func (b *svcBuild) epComment(s string) string {
	if b.g.cfg.LargeCluster {
		return ""
	}
	return s
}

// CascadeMaxEndpoints is the most endpoints a service chain picks from with
// a cascade of MatchRandom rules; above it, one numgen lookup in a named
// verdict map picks in O(1). A cascade costs about (N+1)/2 rule evaluations
// per new connection (at 100 endpoints 1.6-3.4 us, as iptables mode's own
// statistic cascade for that Service) but needs no set, so a cold sync stays
// linear: the kernel finds sets by name by walking the table's list of
// sets, and only Services larger than this get one.
const CascadeMaxEndpoints = 100

// endpointRules are the rules of chain that pick one of eps: first the
// affinity checks, then a random choice.
func (b *svcBuild) endpointRules(chain string, eps []svcmodel.Endpoint) []Rule {
	n := 1 // the numgen map
	if len(eps) <= CascadeMaxEndpoints {
		n = len(eps)
	}
	if b.sp.AffinityTimeoutSeconds > 0 {
		n += len(eps)
	}
	rules := make([]Rule, 0, n)
	targets := make([]string, len(eps))
	for i, e := range eps {
		targets[i] = b.sepName(e)
	}
	if b.sp.AffinityTimeoutSeconds > 0 {
		for i, e := range eps {
			set, key := b.affinitySet(targets[i], e)
			rules = append(rules, NewRule(b.pickComment(e), AffinityCheck{Set: set, Chain: targets[i], Endpoint: key}))
		}
	}
	if len(eps) <= CascadeMaxEndpoints {
		// One rule per endpoint, as iptables mode: numgen random mod
		// (N-i) == 0 picks endpoint i, the last rule takes what is left.
		for i, e := range eps {
			stmts := make([]Stmt, 0, 2)
			if n := len(eps) - i; n > 1 {
				stmts = append(stmts, MatchRandom{Mod: uint32(n)})
			}
			rules = append(rules, NewRule(b.pickComment(e), append(stmts, gotoV(targets[i]))...))
		}
		return rules
	}
	var comments []string
	if !b.g.cfg.LargeCluster {
		for _, e := range eps {
			comments = append(comments, TruncateComment(b.name+" -> "+e.String()))
		}
	}
	return append(rules, NewRule(b.epComment(b.name), NumgenVmap{Map: EndpointMapName(chain), Targets: targets, Comments: comments}))
}

// endpointChain is KUBE-SEP-: hairpin masquerade, then DNAT, after
// recording the client for affinity in a rule of its own (see
// AffinityRecord): an update of a full set fails, and had it been part of
// the DNAT rule, the packet would have left un-NATed.
func (b *svcBuild) endpointChain(e svcmodel.Endpoint) *Chain {
	name := b.sepName(e)
	rules := []Rule{NewRule(b.epComment(b.name), MatchAddr{Dir: Saddr, Prefix: hostPrefix(e.Addr)}, jump(ChainMarkMasq))}
	if b.sp.AffinityTimeoutSeconds > 0 {
		set, key := b.affinitySet(name, e)
		if !slices.ContainsFunc(b.frag.Sets, func(s SetSpec) bool { return s.Name == set }) {
			b.frag.Sets = append(b.frag.Sets, SetSpec{Name: set, TimeoutSeconds: b.sp.AffinityTimeoutSeconds, ByEndpoint: b.sharedAffinity})
		}
		rules = append(rules, NewRule(b.epComment(b.name), AffinityUpdate{Set: set, Endpoint: key}))
	}
	rules = append(rules, NewRule(b.epComment(b.name), MatchProto{Proto: b.proto}, DNAT{Addr: e.Addr, Port: e.Port}))
	return &Chain{Name: name, Compat: IptablesNAT, Rules: rules}
}
