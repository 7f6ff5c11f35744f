package nftgen

import (
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"

	"github.com/nftproxy/nftproxy/proxier/model"
)

// Config holds the flags that shape the rules.
type Config struct {
	Family Family
	// ClusterCIDRs are the pod CIDRs of this family (--cluster-cidr).
	// Traffic to a cluster IP from outside them is masqueraded.
	ClusterCIDRs []netip.Prefix
	// MasqueradeAll masquerades all traffic to cluster IPs.
	MasqueradeAll bool
	// MasqueradeBit is the mark bit of KUBE-MARK-MASQ (default 14).
	MasqueradeBit int
}

// DefaultMasqueradeBit is kube-proxy's default --iptables-masquerade-bit.
const DefaultMasqueradeBit = 14

// Generator builds the ruleset of one family from the model. It is pure and
// safe for concurrent use.
type Generator struct {
	cfg      Config
	markBits uint32
}

// NewGenerator validates cfg and returns a Generator.
func NewGenerator(cfg Config) (*Generator, error) {
	if cfg.Family != FamilyIPv4 && cfg.Family != FamilyIPv6 {
		return nil, fmt.Errorf("unknown family %q", cfg.Family)
	}
	if cfg.MasqueradeBit < 0 || cfg.MasqueradeBit > 31 {
		return nil, fmt.Errorf("masquerade bit %d is outside 0..31", cfg.MasqueradeBit)
	}
	for _, c := range cfg.ClusterCIDRs {
		if c.Addr().Is4() != (cfg.Family == FamilyIPv4) {
			return nil, fmt.Errorf("cluster CIDR %s does not belong to family %s", c, cfg.Family)
		}
	}
	return &Generator{cfg: cfg, markBits: 1 << cfg.MasqueradeBit}, nil
}

// Family returns the generator's family.
func (g *Generator) Family() Family { return g.cfg.Family }

func (g *Generator) modelFamily() model.IPFamily {
	if g.cfg.Family == FamilyIPv6 {
		return model.IPv6
	}
	return model.IPv4
}

// Maps returns the named maps of the ruleset.
func (g *Generator) Maps() []MapSpec {
	return []MapSpec{
		{Name: MapServiceIPs, Comment: "cluster IP . protocol . port to KUBE-SVC- chain"},
		{Name: MapNoEndpointServices, Comment: "service ports without endpoints"},
	}
}

// Top returns the base chains and shared chains, which do not depend on any
// Service.
func (g *Generator) Top() *Fragment {
	base := func(name string, t ChainType, h Hook, prio int32, rules ...Rule) *Chain {
		return &Chain{Name: name, Base: &BaseChain{Type: t, Hook: h, Priority: prio}, Rules: rules}
	}
	regular := func(name string, rules ...Rule) *Chain { return &Chain{Name: name, Rules: rules} }
	jump := func(chain string) Verdict { return Verdict{Kind: VerdictJump, Chain: chain} }
	return &Fragment{Chains: []*Chain{
		base(ChainFilterForward, FilterType, HookForward, PriorityDstNAT-10,
			NewRule("kubernetes service portals", MatchCtStateNew{}, jump(ChainFilterServices))),
		base(ChainFilterOutput, FilterType, HookOutput, PriorityDstNAT-10,
			NewRule("kubernetes service portals", MatchCtStateNew{}, jump(ChainFilterServices))),
		base(ChainNATPrerouting, NATType, HookPrerouting, PriorityDstNAT,
			NewRule("kubernetes service portals", jump(ChainServices))),
		base(ChainNATOutput, NATType, HookOutput, PriorityDstNAT,
			NewRule("kubernetes service portals", jump(ChainServices))),
		base(ChainNATPostrouting, NATType, HookPostrouting, PrioritySrcNAT,
			NewRule("kubernetes postrouting rules", jump(ChainPostrouting))),
		regular(ChainFilterServices, NewRule("", DispatchMap{Map: MapNoEndpointServices})),
		regular(ChainReject, NewRule("", Reject{})),
		regular(ChainServices, NewRule("", DispatchMap{Map: MapServiceIPs})),
		regular(ChainMarkMasq, NewRule("", MarkOr{Bits: g.markBits})),
		regular(ChainPostrouting,
			NewRule("", MatchMark{Mask: g.markBits, Zero: true}, Verdict{Kind: VerdictReturn}),
			NewRule("", MarkXor{Bits: g.markBits}),
			NewRule("kubernetes service traffic requiring SNAT", Masquerade{FullyRandom: true})),
	}}
}

// Service returns the fragment of one service port, or nil if the port has
// nothing to program in this family (no cluster IP of the family).
func (g *Generator) Service(sp *model.ServicePortState) *Fragment {
	vip, ok := sp.ClusterIP(g.modelFamily())
	if !ok {
		return nil
	}
	name := sp.Name.String()
	proto := protoNumber(sp.Name.Protocol)
	key := MapKey{Addr: vip, Proto: proto, Port: sp.Port}
	frag := &Fragment{Elements: map[string][]MapElement{}}

	var eps []model.Endpoint
	for _, e := range model.UsableEndpoints(sp.Endpoints) {
		if model.FamilyOf(e.Addr) == g.modelFamily() {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		frag.Elements[MapNoEndpointServices] = []MapElement{{
			Key: key, Verdict: Verdict{Kind: VerdictGoto, Chain: ChainReject},
			Comment: TruncateComment(name + " has no endpoints"),
		}}
		return frag
	}

	svcChain := ServiceChainName(sp.Name)
	frag.Elements[MapServiceIPs] = []MapElement{{
		Key: key, Verdict: Verdict{Kind: VerdictGoto, Chain: svcChain},
		Comment: TruncateComment(name + " cluster IP"),
	}}

	svc := &Chain{Name: svcChain}
	vipMatch := []Stmt{MatchAddr{Dir: Daddr, Prefix: netip.PrefixFrom(vip, vip.BitLen())}, MatchProto{Proto: proto}, MatchDport{Port: sp.Port}}
	masqJump := Verdict{Kind: VerdictJump, Chain: ChainMarkMasq}
	switch {
	case g.cfg.MasqueradeAll:
		svc.Rules = append(svc.Rules, NewRule(name+" cluster IP", append(vipMatch, masqJump)...))
	case len(g.cfg.ClusterCIDRs) > 0:
		stmts := append([]Stmt(nil), vipMatch...)
		for _, c := range g.cfg.ClusterCIDRs {
			stmts = append(stmts, MatchAddr{Dir: Saddr, Prefix: c, Negate: true})
		}
		svc.Rules = append(svc.Rules, NewRule(name+" cluster IP", append(stmts, masqJump)...))
	}

	targets := make([]string, len(eps))
	frag.Chains = append(frag.Chains, svc)
	for i, e := range eps {
		sepName := EndpointChainName(sp.Name, e.String())
		targets[i] = sepName
		frag.Chains = append(frag.Chains, &Chain{Name: sepName, Rules: []Rule{
			NewRule(name, MatchAddr{Dir: Saddr, Prefix: netip.PrefixFrom(e.Addr, e.Addr.BitLen())}, masqJump),
			NewRule(name, MatchProto{Proto: proto}, DNAT{Addr: e.Addr, Port: e.Port}),
		}})
	}
	if len(targets) == 1 {
		svc.Rules = append(svc.Rules, NewRule(name+" -> "+eps[0].String(), Verdict{Kind: VerdictGoto, Chain: targets[0]}))
	} else {
		svc.Rules = append(svc.Rules, NewRule(name, NumgenVmap{Targets: targets}))
	}
	return frag
}

// Ruleset builds the whole ruleset for a set of service ports.
func (g *Generator) Ruleset(ports []model.ServicePortState) *Ruleset {
	rs := &Ruleset{Family: g.cfg.Family, Maps: g.Maps(), Top: g.Top(), Services: map[string]*Fragment{}}
	for i := range ports {
		if f := g.Service(&ports[i]); f != nil {
			rs.Services[ServiceKey(ports[i].Name)] = f
		}
	}
	return rs
}

func protoNumber(p v1.Protocol) uint8 {
	switch p {
	case v1.ProtocolUDP:
		return ProtoUDP
	case v1.ProtocolSCTP:
		return ProtoSCTP
	}
	return ProtoTCP
}
