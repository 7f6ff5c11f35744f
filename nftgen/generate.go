package nftgen

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"

	v1 "k8s.io/api/core/v1"
)

// Config holds the flags and node facts that shape the rules of one family.
type Config struct {
	Family Family
	// ClusterCIDRs are the pod CIDRs of this family (--cluster-cidr). They
	// tell pod traffic from the rest: traffic to a cluster IP from outside
	// them is masqueraded, and pod traffic to an external destination of a
	// Local-policy Service is short-circuited to all endpoints.
	ClusterCIDRs []netip.Prefix
	// PodInterface, when set and ClusterCIDRs is not, tells pod traffic
	// by the interface it comes in on instead (--detect-local-mode
	// BridgeInterface: that bridge; InterfaceNamePrefix, with
	// PodInterfacePrefix: every interface whose name starts so).
	PodInterface       string
	PodInterfacePrefix bool
	// MasqueradeAll masquerades all traffic to cluster IPs.
	MasqueradeAll bool
	// MasqueradeBit is the mark bit of KUBE-MARK-MASQ
	// (--iptables-masquerade-bit); nil means DefaultMasqueradeBit, as in
	// kube-proxy's configuration.
	MasqueradeBit *int
	// Node is this node: its name decides which endpoints are local, its
	// zone label drives topology.
	Node svcmodel.Node
	// NodeIP is kube-proxy's "node IP" of this family (the Node's first
	// address of it, or --bind-address; loopback when unknown): a load
	// balancer source range that holds it lets the node reach the load
	// balancer IP.
	NodeIP netip.Addr
	// NodeIPs are every address this node reports in this family; an
	// external IP equal to one is not programmed.
	NodeIPs []netip.Addr
	// RestrictNodePorts limits node ports to NodePortAddresses
	// (--nodeport-addresses, resolved); otherwise every local address
	// serves them.
	RestrictNodePorts bool
	NodePortAddresses []netip.Addr
	// LocalhostNodePorts serves node ports on 127.0.0.0/8 (IPv4 only;
	// --iptables-localhost-nodeports, default true). It needs the
	// route_localnet sysctl, which the caller sets.
	LocalhostNodePorts bool
	// ConntrackTCPLiberal drops the ct state invalid rule
	// (--conntrack-tcp-be-liberal).
	ConntrackTCPLiberal bool
	// LargeCluster drops the per-endpoint comments, as kube-proxy does
	// when the family has more than LargeClusterEndpoints endpoints.
	LargeCluster bool
}

// LargeClusterEndpoints is kube-proxy's largeClusterEndpointsThreshold.
const LargeClusterEndpoints = 1000

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
	bit := DefaultMasqueradeBit
	if cfg.MasqueradeBit != nil {
		bit = *cfg.MasqueradeBit
	}
	if bit < 0 || bit > 31 {
		return nil, fmt.Errorf("masquerade bit %d is outside 0..31", bit)
	}
	is4 := cfg.Family == FamilyIPv4
	for _, c := range cfg.ClusterCIDRs {
		if c.Addr().Is4() != is4 {
			return nil, fmt.Errorf("cluster CIDR %s does not belong to family %s", c, cfg.Family)
		}
	}
	if !cfg.NodeIP.IsValid() {
		cfg.NodeIP = netip.IPv6Loopback()
		if is4 {
			cfg.NodeIP = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		}
	}
	for _, a := range append(append([]netip.Addr{cfg.NodeIP}, cfg.NodeIPs...), cfg.NodePortAddresses...) {
		if a.Is4() != is4 {
			return nil, fmt.Errorf("node address %s does not belong to family %s", a, cfg.Family)
		}
	}
	if !is4 {
		cfg.LocalhostNodePorts = false
	}
	// As in kube-proxy, localhost NodePorts need the node port addresses
	// to include IPv4 loopback.
	if cfg.RestrictNodePorts && !slices.ContainsFunc(cfg.NodePortAddresses, netip.Addr.IsLoopback) {
		cfg.LocalhostNodePorts = false
	}
	return &Generator{cfg: cfg, markBits: 1 << bit}, nil
}

// WithLargeCluster returns a generator like g with LargeCluster set to on.
func (g *Generator) WithLargeCluster(on bool) *Generator {
	cfg := g.cfg
	cfg.LargeCluster = on
	return &Generator{cfg: cfg, markBits: g.markBits}
}

// Family returns the generator's family.
func (g *Generator) Family() Family { return g.cfg.Family }

// Config returns the generator's configuration.
func (g *Generator) Config() Config { return g.cfg }

func (g *Generator) modelFamily() svcmodel.IPFamily { return g.cfg.Family.IPFamily() }

// Maps returns the named maps of the ruleset.
func (g *Generator) Maps() []MapSpec {
	return []MapSpec{
		{Name: MapServiceIPs, Key: KeyAddrProtoPort, Comment: "service IP . protocol . port to its KUBE-SVC-, KUBE-EXT- or KUBE-FW- chain"},
		{Name: MapServiceNodePorts, Key: KeyProtoPort, Comment: "node port to its KUBE-EXT- chain"},
		// The cluster IPs without endpoints are checked before DNAT on
		// the output hook: they share the dispatch map's owners. The
		// other filter maps are consulted after DNAT, as kube-proxy's
		// filter chains are, so a reject there never stops another
		// Service's DNAT of that destination and each keeps its owner.
		{Name: MapNoEndpointServices, Key: KeyAddrProtoPort, Comment: "cluster IPs without endpoints", Domain: MapServiceIPs},
		{Name: MapNoEndpointExternal, Key: KeyAddrProtoPort, Comment: "external and load balancer IPs without endpoints"},
		{Name: MapNoEndpointNodePorts, Key: KeyProtoPort, Comment: "node ports without endpoints"},
		{Name: MapFirewallIPs, Key: KeyAddrProtoPort, Comment: "load balancer IPs with source ranges"},
		{Name: MapHealthCheckNodePorts, Key: KeyProtoPort, Comment: "health check node ports"},
	}
}

func jump(chain string) Verdict  { return Verdict{Kind: VerdictJump, Chain: chain} }
func gotoV(chain string) Verdict { return Verdict{Kind: VerdictGoto, Chain: chain} }

var (
	accept = Verdict{Kind: VerdictAccept}
	drop   = Verdict{Kind: VerdictDrop}
)

// ForwardRules returns kube-proxy's KUBE-FORWARD accepts for the
// masquerade mark bits (KUBE-MARK-MASQ's): what the KUBE-FORWARD chain of
// nftproxy's table ends with, and what nftproxy writes into iptables' own
// filter tables where their FORWARD chain drops (proxier/host/forward).
func ForwardRules(markBits uint32) []Rule {
	return []Rule{
		NewRule("kubernetes forwarding rules", MatchMark{Mask: markBits}, accept),
		NewRule("kubernetes forwarding conntrack rule", MatchCtState{Mask: CtEstablished | CtRelated}, accept),
	}
}

// IptablesForwardChain is kube-proxy's forwarding chain in iptables'
// filter tables.
const IptablesForwardChain = "KUBE-FORWARD"

// ForwardJump returns the jump to kube-proxy's forwarding chain called
// chain that a FORWARD chain starts with.
func ForwardJump(chain string) Rule { return NewRule("kubernetes forwarding rules", jump(chain)) }

// HostForward is kube-proxy's forwarding rules as iptables' own filter
// tables hold them: FORWARD's first rule, Jump, to IptablesForwardChain,
// which holds Accepts.
type HostForward struct {
	Jump    Rule
	Accepts []Rule
}

// NewHostForward returns kube-proxy's forwarding rules of iptables' filter
// tables for the masquerade mark bits (KUBE-MARK-MASQ's).
func NewHostForward(markBits uint32) HostForward {
	return HostForward{Jump: ForwardJump(IptablesForwardChain), Accepts: ForwardRules(markBits)}
}

func hostPrefix(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// Top returns the base chains and shared chains, which do not depend on any
// Service. The base chains jump to the kube-proxy chains in the order in
// which iptables mode's jump rules end up in the built-in chains.
func (g *Generator) Top() *Fragment {
	base := func(name string, t ChainType, h Hook, prio int32, rules ...Rule) *Chain {
		compat := IptablesFilter
		if t == NATType {
			compat = IptablesNAT
		}
		return &Chain{Name: name, Base: &BaseChain{Type: t, Hook: h, Priority: prio}, Rules: rules, Compat: compat}
	}
	// filter and nat chains stand for kube-proxy's chains of that
	// iptables table; a helper for none.
	filter := func(name string, rules ...Rule) *Chain {
		return &Chain{Name: name, Rules: rules, Compat: IptablesFilter}
	}
	nat := func(name string, rules ...Rule) *Chain { return &Chain{Name: name, Rules: rules, Compat: IptablesNAT} }
	helper := func(name string, rules ...Rule) *Chain { return &Chain{Name: name, Rules: rules} }
	ctNew := MatchCtState{Mask: CtNew}
	localnetGuard := g.cfg.Family == FamilyIPv4 && g.cfg.LocalhostNodePorts

	// kubelet's KUBE-FIREWALL chain and its jumps exist in every family;
	// it holds the localnet guard only where localhost NodePorts are on.
	// In the output hook it is jumped to after DNAT, as from iptables'
	// filter OUTPUT: its guard lets DNATed packets pass, and a local
	// connection to 127.0.0.1 that another program's nat OUTPUT rule
	// DNATs (a CNI portmap host port on 127.0.0.1) is DNATed only then.
	input := []Rule{NewRule("", jump(ChainFilterKubeletFirewall))}
	var output []Rule
	input = append(input,
		NewRule("kubernetes load balancer firewall", ctNew, jump(ChainFilterProxyFirewall)),
		NewRule("kubernetes health check service ports", jump(ChainFilterNodePorts)),
		NewRule("kubernetes externally-visible service portals", ctNew, jump(ChainFilterExternalServices)))
	output = append(output,
		NewRule("kubernetes service portals", ctNew, jump(ChainFilterServices)))
	forward := []Rule{
		NewRule("kubernetes load balancer firewall", ctNew, jump(ChainFilterProxyFirewall)),
		ForwardJump(ChainFilterForwardRules),
		NewRule("kubernetes service portals", ctNew, jump(ChainFilterServices)),
		NewRule("kubernetes externally-visible service portals", ctNew, jump(ChainFilterExternalServices)),
	}

	var fwd []Rule
	if !g.cfg.ConntrackTCPLiberal {
		fwd = append(fwd, NewRule("", MatchCtState{Mask: CtInvalid}, CounterRef{Name: CounterCTStateInvalid}, drop))
	}
	fwd = append(fwd, ForwardRules(g.markBits)...)

	chains := []*Chain{
		base(ChainFilterInput, FilterType, HookInput, PriorityDstNAT-10, input...),
		base(ChainFilterForward, FilterType, HookForward, PriorityDstNAT-10, forward...),
		base(ChainFilterOutput, FilterType, HookOutput, PriorityDstNAT-10, output...),
		// The output hook's firewall check must see the packet after DNAT,
		// as iptables' filter OUTPUT does.
		base(ChainFilterOutputPostNAT, FilterType, HookOutput, PriorityDstNAT+10,
			NewRule("", jump(ChainFilterKubeletFirewall)),
			NewRule("kubernetes load balancer firewall", ctNew, jump(ChainFilterProxyFirewall))),
		base(ChainNATPrerouting, NATType, HookPrerouting, PriorityDstNAT,
			NewRule("kubernetes service portals", jump(ChainServices))),
		base(ChainNATOutput, NATType, HookOutput, PriorityDstNAT,
			NewRule("kubernetes service portals", jump(ChainServices))),
		base(ChainNATPostrouting, NATType, HookPostrouting, PrioritySrcNAT,
			NewRule("kubernetes postrouting rules", jump(ChainPostrouting))),
		filter(ChainFilterServices, NewRule("", DispatchMap{Map: MapNoEndpointServices})),
		filter(ChainFilterExternalServices,
			NewRule("", DispatchMap{Map: MapNoEndpointExternal}),
			NewRule("", MatchFibLocal{Dir: Daddr}, ProtoPortMap{Map: MapNoEndpointNodePorts})),
		filter(ChainFilterForwardRules, fwd...),
		filter(ChainFilterNodePorts, NewRule("", ProtoPortMap{Map: MapHealthCheckNodePorts})),
		filter(ChainFilterProxyFirewall, NewRule("", DispatchMap{Map: MapFirewallIPs})),
	}
	guard := filter(ChainFilterKubeletFirewall)
	if localnetGuard {
		loopback := netip.MustParsePrefix("127.0.0.0/8")
		guard.Rules = []Rule{NewRule("block incoming localnet connections",
			MatchAddr{Dir: Daddr, Prefix: loopback}, MatchAddr{Dir: Saddr, Prefix: loopback, Negate: true},
			MatchCtState{Mask: CtEstablished | CtRelated, None: true}, MatchCtStatusDNAT{Not: true}, drop)}
	}
	chains = append(chains, guard)
	chains = append(chains,
		helper(ChainReject, NewRule("", Reject{})),
		nat(ChainServices, append([]Rule{NewRule("", DispatchMap{Map: MapServiceIPs})}, g.nodePortsJumps()...)...),
		nat(ChainNodePorts, g.nodePortRules()...),
		nat(ChainMarkMasq, NewRule("", MarkOr{Bits: g.markBits})),
		nat(ChainPostrouting,
			NewRule("", MatchMark{Mask: g.markBits, Zero: true}, Verdict{Kind: VerdictReturn}),
			NewRule("", MarkXor{Bits: g.markBits}),
			NewRule("kubernetes service traffic requiring SNAT", Masquerade{FullyRandom: true})),
	)
	counters := []string{CounterCTStateInvalid}
	if localnetGuard {
		counters = append(counters, CounterLocalhostNodePorts)
	}
	return &Fragment{Chains: chains, Counters: counters}
}

// nodePortRules are the rules of KUBE-NODEPORTS. Where node ports are
// served on 127.0.0.0/8, packets to them are first counted, as kube-proxy
// counts them in an nfacct counter with a copy of each node port's rule
// for 127.0.0.0/8.
func (g *Generator) nodePortRules() []Rule {
	dispatch := NewRule("", ProtoPortMap{Map: MapServiceNodePorts})
	if g.cfg.Family != FamilyIPv4 || !g.cfg.LocalhostNodePorts {
		return []Rule{dispatch}
	}
	count := NewRule("", MatchAddr{Dir: Daddr, Prefix: netip.MustParsePrefix("127.0.0.0/8")},
		ProtoPortIn{Map: MapServiceNodePorts}, CounterRef{Name: CounterLocalhostNodePorts})
	return []Rule{count, dispatch}
}

// nodePortsJumps returns the last rules of KUBE-SERVICES, which send
// traffic for the node's own addresses to KUBE-NODEPORTS.
func (g *Generator) nodePortsJumps() []Rule {
	const comment = "kubernetes service nodeports; NOTE: this must be the last rule in this chain"
	v4 := g.cfg.Family == FamilyIPv4
	if !g.cfg.RestrictNodePorts {
		stmts := []Stmt{MatchFibLocal{Dir: Daddr}}
		switch {
		case !v4:
			stmts = append(stmts, MatchAddr{Dir: Daddr, Prefix: netip.MustParsePrefix("::1/128"), Negate: true})
		case !g.cfg.LocalhostNodePorts:
			stmts = append(stmts, MatchAddr{Dir: Daddr, Prefix: netip.MustParsePrefix("127.0.0.0/8"), Negate: true})
		}
		return []Rule{NewRule(comment, append(stmts, jump(ChainNodePorts))...)}
	}
	var rules []Rule
	for _, a := range g.cfg.NodePortAddresses {
		if a.IsLoopback() && (!v4 || !g.cfg.LocalhostNodePorts) {
			continue
		}
		rules = append(rules, NewRule(comment, MatchAddr{Dir: Daddr, Prefix: hostPrefix(a)}, jump(ChainNodePorts)))
	}
	return rules
}

// Ruleset builds the whole ruleset for a set of service ports.
func (g *Generator) Ruleset(ports []svcmodel.ServicePortState) *Ruleset {
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
