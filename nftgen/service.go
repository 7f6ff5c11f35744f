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
	cat := svcmodel.Categorize(&sp.ServicePort, g.familyEndpoints(sp.Endpoints), g.cfg.Node)
	b.sharedAffinity = sp.AffinityTimeoutSeconds > 0 && len(cat.Reachable) > CascadeMaxEndpoints
	b.sepNames = make(map[netip.AddrPort]string, len(cat.Reachable))
	p := b.decide(vip, cat)
	b.elements(p)
	b.chains(p)
	b.frag.Place = placeOf(b.frag, vip, sp.Name.NamespacedName.String())
	return b.frag
}

// portPlan is what Service decides for one service port before it writes
// anything: its chains, which of them it uses, and what the filter side
// does with traffic that has no endpoint to go to.
type portPlan struct {
	vip                                   netip.Addr
	cat                                   svcmodel.Categorized
	svcChain, svlChain, extChain, fwChain string
	// internalChain and externalPolicyChain are the chains internal and
	// external traffic go to (KUBE-SVC- or KUBE-SVL- by the policies);
	// lbChain is where load balancer traffic goes (KUBE-EXT- or KUBE-FW-).
	internalChain, externalPolicyChain, lbChain string
	hasInternal, hasExternal, usesExt, usesFW   bool
	ranges                                      []netip.Prefix
	internalFilter, externalFilter              Verdict
	internalComment, externalComment            string
}

// decide makes the port's plan from its endpoints' categories.
func (b *svcBuild) decide(vip netip.Addr, cat svcmodel.Categorized) portPlan {
	sp := b.sp
	p := portPlan{vip: vip, cat: cat}
	p.svcChain, p.svlChain, p.extChain, p.fwChain = portChainNames(sp.Name)
	ranges, closed := b.g.sourceRanges(sp)
	p.ranges = ranges
	p.internalChain, p.hasInternal = p.svcChain, cat.Any
	if sp.InternalPolicyLocal {
		p.internalChain = p.svlChain
		p.hasInternal = p.hasInternal && len(cat.Local) > 0
	}
	p.externalPolicyChain, p.hasExternal = p.svcChain, cat.Any
	if sp.ExternalPolicyLocal {
		p.externalPolicyChain = p.svlChain
		p.hasExternal = p.hasExternal && len(cat.Local) > 0
	}
	p.usesExt = cat.Any && sp.ExternallyAccessible()
	p.lbChain = p.extChain
	p.usesFW = cat.Any && len(sp.LoadBalancerIPs) > 0 && (len(ranges) > 0 || closed)
	if p.usesFW {
		p.lbChain = p.fwChain
	}
	reject := gotoV(ChainReject)
	p.internalFilter, p.externalFilter = reject, reject
	p.internalComment = b.name + " has no endpoints"
	p.externalComment = p.internalComment
	if cat.Any {
		if !p.hasInternal {
			p.internalFilter, p.internalComment = drop, b.name+" has no local endpoints"
		}
		if !p.hasExternal {
			p.externalFilter, p.externalComment = drop, b.name+" has no local endpoints"
		}
	}
	return p
}

// elements adds the port's map elements: what iptables mode writes into
// KUBE-SERVICES, KUBE-NODEPORTS, KUBE-EXTERNAL-SERVICES and
// KUBE-PROXY-FIREWALL.
func (b *svcBuild) elements(p portPlan) {
	sp := b.sp
	key := func(a netip.Addr, port uint16) MapKey { return MapKey{Addr: a, Proto: b.proto, Port: port} }
	if p.hasInternal {
		b.element(MapServiceIPs, key(p.vip, sp.Port), gotoV(p.internalChain), b.name+" cluster IP")
	} else {
		b.element(MapNoEndpointServices, key(p.vip, sp.Port), p.internalFilter, p.internalComment)
	}
	for _, ip := range sp.ExternalIPs {
		if p.cat.Any {
			b.element(MapServiceIPs, key(ip, sp.Port), gotoV(p.extChain), b.name+" external IP")
		}
		if !p.hasExternal {
			b.element(MapNoEndpointExternal, key(ip, sp.Port), p.externalFilter, p.externalComment)
		}
	}
	for _, ip := range sp.LoadBalancerIPs {
		if p.cat.Any {
			b.element(MapServiceIPs, key(ip, sp.Port), gotoV(p.lbChain), b.name+" loadbalancer IP")
		}
		if p.usesFW {
			b.element(MapFirewallIPs, key(ip, sp.Port), drop, b.name+" traffic not accepted by "+p.fwChain)
		}
		if !p.hasExternal {
			b.element(MapNoEndpointExternal, key(ip, sp.Port), p.externalFilter, p.externalComment)
		}
	}
	if sp.NodePort != 0 {
		npKey := MapKey{Proto: b.proto, Port: sp.NodePort}
		if p.cat.Any {
			b.element(MapServiceNodePorts, npKey, gotoV(p.extChain), b.name)
		}
		if !p.hasExternal {
			b.element(MapNoEndpointNodePorts, npKey, p.externalFilter, p.externalComment)
		}
	}
	if sp.HealthCheckNodePort != 0 {
		comment, rules := HealthCheckComment(b.name, sp.HealthCheckPorts)
		b.element(MapHealthCheckNodePorts, MapKey{Proto: ProtoTCP, Port: sp.HealthCheckNodePort}, accept, comment)
		b.frag.HealthCheckRules = rules
	}
}

// chains adds the port's chains: KUBE-EXT-, KUBE-FW-, KUBE-SVC- and
// KUBE-SVL- as used, then one KUBE-SEP- per reachable endpoint.
func (b *svcBuild) chains(p portPlan) {
	if p.usesExt {
		b.frag.Chains = append(b.frag.Chains, b.externalChain(p.extChain, p.svcChain, p.externalPolicyChain, p.hasExternal))
	}
	if p.usesFW {
		b.frag.Chains = append(b.frag.Chains, b.firewallChain(p.fwChain, p.extChain, p.ranges, b.sp.LoadBalancerIPs))
	}
	masq := b.masqueradeRule(p.vip)
	// pickChain is KUBE-SVC- or KUBE-SVL-: the masquerade mark when it is
	// the internal traffic's chain, then the choice among eps.
	pickChain := func(name string, eps []svcmodel.Endpoint) {
		c := &Chain{Name: name, Compat: IptablesNAT}
		if p.internalChain == name && p.hasInternal && masq != nil {
			c.Rules = append(c.Rules, *masq)
		}
		c.Rules = append(c.Rules, b.endpointRules(name, eps)...)
		b.frag.Chains = append(b.frag.Chains, c)
	}
	if len(p.cat.Cluster) > 0 && b.sp.UsesClusterEndpoints() {
		pickChain(p.svcChain, p.cat.Cluster)
	}
	if len(p.cat.Local) > 0 && b.sp.UsesLocalEndpoints() {
		pickChain(p.svlChain, p.cat.Local)
	}
	for _, e := range p.cat.Reachable {
		b.frag.Chains = append(b.frag.Chains, b.endpointChain(e))
	}
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
