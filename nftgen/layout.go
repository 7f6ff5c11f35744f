package nftgen

import "strings"

// This file is the one description of how nftproxy's table stands for
// kube-proxy's iptables rules: which iptables table and chain each chain
// and map is, which chains kube-proxy writes, and the comment formats that
// name a Service. The generator names its chains and writes its comments
// with it; the compat view, the rule count, diff and the cleanup of
// kube-proxy's rules read it.

// ChainRole is what a chain of nftproxy's table stands for.
type ChainRole struct {
	// Table and Chain are the iptables table and chain.
	Table, Chain string
	// Base is set for a base chain: it holds kube-proxy's jump rules of
	// the built-in chain Chain.
	Base bool
}

// RoleOf returns what the chain called name stands for. ok is false for a
// helper with no iptables counterpart (ChainReject) and for chains
// nftproxy does not write.
func RoleOf(name string) (role ChainRole, ok bool) {
	switch name {
	case ChainNATPrerouting:
		return ChainRole{Table: "nat", Chain: "PREROUTING", Base: true}, true
	case ChainNATOutput:
		return ChainRole{Table: "nat", Chain: "OUTPUT", Base: true}, true
	case ChainNATPostrouting:
		return ChainRole{Table: "nat", Chain: "POSTROUTING", Base: true}, true
	case ChainFilterInput:
		return ChainRole{Table: "filter", Chain: "INPUT", Base: true}, true
	case ChainFilterForward:
		return ChainRole{Table: "filter", Chain: "FORWARD", Base: true}, true
	case ChainFilterOutput, ChainFilterOutputPostNAT:
		// iptables' filter OUTPUT is two chains here, before and after
		// DNAT.
		return ChainRole{Table: "filter", Chain: "OUTPUT", Base: true}, true
	}
	if rest, isFilter := strings.CutPrefix(name, FilterChainPrefix); isFilter && strings.HasPrefix(rest, "KUBE-") {
		return ChainRole{Table: "filter", Chain: rest}, true
	}
	if strings.HasPrefix(name, "KUBE-") {
		return ChainRole{Table: "nat", Chain: name}, true
	}
	return ChainRole{}, false
}

// MapRoleOf returns the iptables table and chain whose rules, one per
// element, a named map stands for (see the Map constants).
func MapRoleOf(m string) (table, chain string) {
	switch m {
	case MapServiceIPs:
		return "nat", ChainServices
	case MapServiceNodePorts:
		return "nat", ChainNodePorts
	case MapNoEndpointServices:
		return "filter", "KUBE-SERVICES"
	case MapNoEndpointExternal, MapNoEndpointNodePorts:
		return "filter", "KUBE-EXTERNAL-SERVICES"
	case MapFirewallIPs:
		return "filter", "KUBE-PROXY-FIREWALL"
	case MapHealthCheckNodePorts:
		return "filter", "KUBE-NODEPORTS"
	}
	return "filter", ""
}

// IsKubeProxyChain reports whether an iptables chain is one kube-proxy's
// iptables mode writes: its fixed chains, and the per-Service and
// per-endpoint ones by their prefixes.
func IsKubeProxyChain(chain string) bool {
	switch chain {
	case "KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ",
		"KUBE-FORWARD", "KUBE-PROXY-FIREWALL", "KUBE-PROXY-CANARY", "KUBE-FIREWALL":
		return true
	}
	for _, p := range [...]string{PrefixService, PrefixLocal, PrefixExternal, PrefixFirewall, PrefixEndpoint} {
		if strings.HasPrefix(chain, p) {
			return true
		}
	}
	return false
}

// Comments of the rules that name a Service port but not at their start,
// as kube-proxy writes them; %s is the port's name ("ns/svc:port").
const (
	commentMasqExternal      = "masquerade traffic for %s external destinations"
	commentPodExternal       = "pod traffic for %s external destinations"
	commentMasqLocalExternal = "masquerade LOCAL traffic for %s external destinations"
	commentRouteLocal        = "route LOCAL traffic for %s external destinations"
	commentOtherDropped      = "other traffic to %s will be dropped by KUBE-PROXY-FIREWALL"
)

// ServiceOfComment returns the service port ("ns/name" or "ns/name:port")
// that a rule comment of kube-proxy's, or of nftproxy's, names, or false.
func ServiceOfComment(c string) (string, bool) {
	for _, f := range []string{commentMasqExternal, commentPodExternal, commentMasqLocalExternal, commentRouteLocal, commentOtherDropped} {
		pre, _, _ := strings.Cut(f, "%s")
		if rest, ok := strings.CutPrefix(c, pre); ok {
			c = rest
			break
		}
	}
	name, _, _ := strings.Cut(c, " ")
	ns, svc, ok := strings.Cut(name, "/")
	if !ok || !isDNSLabelish(ns) {
		return "", false
	}
	if base, _, _ := strings.Cut(svc, ":"); !isDNSLabelish(base) {
		return "", false
	}
	return name, true
}

// isDNSLabelish reports whether s looks like a namespace or Service name:
// lower-case letters, digits, '-' and '.', starting with a letter or digit.
func isDNSLabelish(s string) bool {
	if s == "" || s[0] == '-' || s[0] == '.' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// CountedMap returns the map whose keys a rule counts the packets of, if
// it is such a rule: kube-proxy writes an nfacct rule per element of that
// map (the localhost node ports), so each element stands for two rules.
func CountedMap(r Rule) (string, bool) {
	var m string
	counted := false
	for _, s := range r.Stmts {
		switch s := s.(type) {
		case ProtoPortIn:
			m = s.Map
		case CounterRef:
			counted = true
		}
	}
	return m, m != "" && counted
}

// AffinityRecord returns the update of a rule that only records the client
// in a session affinity set. Such a rule precedes an endpoint chain's DNAT
// rule and stands for no iptables rule of its own: kube-proxy's
// "-m recent --set" is a match of its DNAT rule. nftproxy keeps the two
// apart because the kernel's update of a full set (65,535 entries) fails
// the rule it is in: a client that cannot be recorded is still DNATed, as
// the recent match, which evicts its oldest entry, never refuses one.
func AffinityRecord(r Rule) (AffinityUpdate, bool) {
	if len(r.Stmts) != 1 {
		return AffinityUpdate{}, false
	}
	u, ok := r.Stmts[0].(AffinityUpdate)
	return u, ok
}
