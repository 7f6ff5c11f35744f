package cleanup

import (
	"slices"
	"strings"

	"github.com/nftproxy/nftproxy/nftgen"
)

// fixedChains are the chains kube-proxy's iptables and IPVS modes create
// under a fixed name, per iptables table (cmd/kube-proxy's iptables and
// ipvs proxiers, v1.37). kubelet's KUBE-FIREWALL is not among them.
var fixedChains = map[string][]string{
	"nat": {"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ", "KUBE-PROXY-CANARY",
		"KUBE-EXT-SERVICES", "KUBE-NODE-PORT", "KUBE-LOAD-BALANCER", "KUBE-MARK-DROP"},
	"filter": {"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-FORWARD", "KUBE-NODEPORTS", "KUBE-PROXY-FIREWALL",
		"KUBE-PROXY-CANARY", "KUBE-NODE-PORT", "KUBE-SOURCE-RANGES-FIREWALL", "KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER"},
	"mangle": {"KUBE-PROXY-CANARY"},
}

// otherFixedChains are chains that kubelet creates under a fixed name and
// that nothing may jump to (the canaries and the backend hint): looked up
// by name, since no jump leads to them.
var otherFixedChains = []string{"KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT", "KUBE-FIREWALL"}

// builtinChains are the chains iptables attaches to hooks, per table.
var builtinChains = map[string][]string{
	"nat":    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	"filter": {"INPUT", "FORWARD", "OUTPUT"},
	"mangle": {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
}

// rootChains are the chains of the iptables table named table that the
// cleanup looks up by name; every other chain it needs is reached by
// following jumps from them.
func rootChains(table string) []string {
	return slices.Concat(builtinChains[table], fixedChains[table], otherFixedChains)
}

// perServicePrefixes start the nat chains kube-proxy makes per Service
// port and endpoint; a hash of 16 base32 characters follows.
var perServicePrefixes = [...]string{nftgen.PrefixService, nftgen.PrefixLocal, nftgen.PrefixExternal, nftgen.PrefixFirewall, nftgen.PrefixEndpoint}

// jumpComments are the comments of the rules with which kube-proxy's
// iptables and IPVS modes jump from the built-in chains to theirs.
var jumpComments = []string{
	"kubernetes service portals", "kubernetes externally-visible service portals", "kubernetes health check service ports",
	"kubernetes forwarding rules", "kubernetes load balancer firewall", "kubernetes postrouting rules",
	"kubernetes health check rules", "kube-proxy firewall rules", "kubernetes ipvs access filter",
}

// KubeProxyChain reports whether chain, a user chain of the iptables table
// named table, is one kube-proxy creates.
func KubeProxyChain(table, chain string) bool {
	if slices.Contains(fixedChains[table], chain) {
		return true
	}
	if table != "nat" {
		return false
	}
	for _, p := range perServicePrefixes {
		if rest, ok := strings.CutPrefix(chain, p); ok {
			return isChainHash(rest)
		}
	}
	return false
}

// isChainHash reports whether s looks like kube-proxy's chain hash: 16
// characters of the standard base32 alphabet.
func isChainHash(s string) bool {
	if len(s) != 16 {
		return false
	}
	for _, c := range s {
		if (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// Chain is one chain of an iptables table as the cleanup sees it.
type Chain struct {
	Name string
	// Base is set for a built-in chain (PREROUTING, INPUT, ...).
	Base  bool
	Rules []Rule
}

// Rule is what the cleanup needs of one rule.
type Rule struct {
	// Jump is the chain the rule jumps or goes to, "" if none.
	Jump string
	// Comment is the rule's comment, "" if none.
	Comment string
}

// Plan says what to remove from one table.
type Plan struct {
	// Chains are kube-proxy's chains to flush and delete.
	Chains []string
	// Rules lists, per chain that stays, the positions of the rules to
	// delete (kube-proxy's jumps).
	Rules map[string][]int
	// Kept are kube-proxy's chains that stay because a rule kube-proxy did
	// not write jumps to them (directly or through another kept chain).
	Kept []string
}

// Empty reports whether the plan removes nothing.
func (p Plan) Empty() bool { return len(p.Chains) == 0 && len(p.Rules) == 0 }

// PlanTable decides what to remove from the iptables table named table,
// whose chains are chains.
func PlanTable(table string, chains []Chain) Plan {
	byName := map[string]*Chain{}
	kube := map[string]bool{}
	for i := range chains {
		c := &chains[i]
		byName[c.Name] = c
		if !c.Base && KubeProxyChain(table, c.Name) {
			kube[c.Name] = true
		}
	}
	plan := Plan{Rules: map[string][]int{}}
	var pending []string // kube-proxy chains a foreign rule reaches
	for _, c := range chains {
		if kube[c.Name] {
			continue
		}
		for i, r := range c.Rules {
			if !kube[r.Jump] {
				continue
			}
			if slices.Contains(jumpComments, r.Comment) {
				plan.Rules[c.Name] = append(plan.Rules[c.Name], i)
			} else {
				pending = append(pending, r.Jump)
			}
		}
	}
	kept := map[string]bool{}
	for len(pending) > 0 {
		name := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		if kept[name] {
			continue
		}
		kept[name] = true
		for _, r := range byName[name].Rules {
			if kube[r.Jump] && !kept[r.Jump] {
				pending = append(pending, r.Jump)
			}
		}
	}
	for _, c := range chains {
		switch {
		case kept[c.Name]:
			plan.Kept = append(plan.Kept, c.Name)
		case kube[c.Name]:
			plan.Chains = append(plan.Chains, c.Name)
		}
	}
	if len(plan.Rules) == 0 {
		plan.Rules = nil
	}
	return plan
}

// Result counts what was removed.
type Result struct {
	Chains, Rules int
	// Tables counts the whole tables deleted (an earlier nftproxy's).
	Tables int
	// Kept names kube-proxy's chains left in place because another
	// program's rule jumps to them.
	Kept []string
}

// Add adds o to r.
func (r *Result) Add(o Result) {
	r.Chains += o.Chains
	r.Rules += o.Rules
	r.Tables += o.Tables
	r.Kept = append(r.Kept, o.Kept...)
}
