package nftgen

import (
	"net/netip"
	"slices"

	"github.com/nftproxy/nftproxy/nftgen/svcmodel"
)

// TableName is the name of nftproxy's table in each family: kube-proxy's
// nftables-mode name, so that kube-proxy, started again in iptables or
// IPVS mode (a rollback), deletes it as it deletes its own nftables
// leftovers (and kube-proxy --cleanup does too). A table of that name that
// is not nftproxy's (kube-proxy's nftables mode ran before) is replaced in
// the first full sync's transaction (Inventory.Foreign). nftproxy never
// touches any other table but FormerTableName's.
const TableName = "kube-proxy"

// FormerTableName is the name earlier nftproxy versions gave their table;
// the start-up cleanup deletes such a table, so that an upgrade leaves no
// second copy of the rules acting.
const FormerTableName = "nftproxy"

// Family is an nftables address family.
type Family string

const (
	// FamilyIPv4 is the "ip" family.
	FamilyIPv4 Family = "ip"
	// FamilyIPv6 is the "ip6" family.
	FamilyIPv6 Family = "ip6"
)

// IPFamily returns the model's IP family of f.
func (f Family) IPFamily() svcmodel.IPFamily {
	if f == FamilyIPv6 {
		return svcmodel.IPv6
	}
	return svcmodel.IPv4
}

// ChainType is the type of a base chain.
type ChainType string

const (
	// NATType chains may do dnat, snat and masquerade.
	NATType ChainType = "nat"
	// FilterType chains filter.
	FilterType ChainType = "filter"
)

// Hook is a netfilter hook.
type Hook string

// The netfilter hooks nftproxy attaches to.
const (
	HookPrerouting  Hook = "prerouting"
	HookInput       Hook = "input"
	HookForward     Hook = "forward"
	HookOutput      Hook = "output"
	HookPostrouting Hook = "postrouting"
)

// Standard chain priorities.
const (
	PriorityDstNAT int32 = -100
	PrioritySrcNAT int32 = 100
)

// BaseChain holds the hook of a base chain.
type BaseChain struct {
	Type     ChainType
	Hook     Hook
	Priority int32
	// Drop is set when the chain's policy is drop. nftproxy writes accept;
	// only a chain read back from the kernel, changed by another process,
	// has it.
	Drop bool
}

// IptablesTable is the iptables table whose rules a chain of nftproxy's
// table stands for in the compat view.
type IptablesTable uint8

const (
	// NoIptablesTable marks a helper chain with no iptables counterpart
	// (ChainReject), and a chain read back from the kernel, whose role
	// comes from its name (RoleOf).
	NoIptablesTable IptablesTable = iota
	// IptablesNAT is iptables' nat table.
	IptablesNAT
	// IptablesFilter is iptables' filter table.
	IptablesFilter
)

// String returns "nat", "filter" or "".
func (t IptablesTable) String() string {
	switch t {
	case IptablesNAT:
		return "nat"
	case IptablesFilter:
		return "filter"
	}
	return ""
}

// Chain is a chain with its rules.
type Chain struct {
	Name string
	// Base is nil for a regular chain.
	Base  *BaseChain
	Rules []Rule
	// Compat is the iptables table the generator made the chain for: its
	// rules are counted there. It is not part of the chain in the kernel
	// (Equal ignores it).
	Compat IptablesTable
}

// Equal reports whether two chains have the same name, hook and rules.
func (c *Chain) Equal(o *Chain) bool {
	if c == o {
		return true
	}
	if c == nil || o == nil || c.Name != o.Name || len(c.Rules) != len(o.Rules) {
		return false
	}
	if (c.Base == nil) != (o.Base == nil) || (c.Base != nil && *c.Base != *o.Base) {
		return false
	}
	for i := range c.Rules {
		if !c.Rules[i].Equal(&o.Rules[i]) {
			return false
		}
	}
	return true
}

// MaxCommentLen is the longest comment the kernel accepts, minus the
// terminating NUL. Longer comments are truncated by NewRule; a longer
// comment makes the kernel reject the whole transaction.
const MaxCommentLen = 127

// Rule is a list of statements with an optional comment.
type Rule struct {
	Stmts   []Stmt
	Comment string
	// Handle is the kernel's handle of a rule read back from the kernel
	// (0 in a desired ruleset). Equal ignores it.
	Handle uint64
}

// NewRule builds a rule, truncating the comment to MaxCommentLen bytes.
func NewRule(comment string, stmts ...Stmt) Rule {
	return Rule{Stmts: stmts, Comment: TruncateComment(comment)}
}

// TruncateComment cuts s to at most MaxCommentLen bytes without splitting a
// UTF-8 sequence.
func TruncateComment(s string) string {
	if len(s) <= MaxCommentLen {
		return s
	}
	cut := MaxCommentLen
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}

// Equal reports whether two rules are the same.
func (r *Rule) Equal(o *Rule) bool {
	if r.Comment != o.Comment || len(r.Stmts) != len(o.Stmts) {
		return false
	}
	for i := range r.Stmts {
		if !stmtEqual(r.Stmts[i], o.Stmts[i]) {
			return false
		}
	}
	return true
}

// VerdictKind is what a verdict does.
type VerdictKind string

// The verdicts nftproxy uses.
const (
	VerdictAccept VerdictKind = "accept"
	VerdictDrop   VerdictKind = "drop"
	VerdictReturn VerdictKind = "return"
	VerdictJump   VerdictKind = "jump"
	VerdictGoto   VerdictKind = "goto"
)

// Verdict is a verdict, with a target chain for jump and goto.
type Verdict struct {
	Kind  VerdictKind
	Chain string
}

// KeyKind is the key shape of a named verdict map.
type KeyKind string

const (
	// KeyAddrProtoPort maps "daddr . l4proto . dport".
	KeyAddrProtoPort KeyKind = "addr-proto-port"
	// KeyProtoPort maps "l4proto . dport" (node ports).
	KeyProtoPort KeyKind = "proto-port"
)

// MapSpec declares a named verdict map.
type MapSpec struct {
	Name    string
	Key     KeyKind
	Comment string
	// Domain names the maps among whose elements one key has one owning
	// Service: the same key in two maps of one domain is one
	// destination. Empty stands for the map's own name. Only the
	// generator sets it; a map read back from the kernel has none.
	Domain string
}

// SetSpec declares a named dynamic set of session affinity entries with a
// timeout: clients of one endpoint, or, with ByEndpoint, "client .
// endpoint address . port" entries of a whole Service port.
type SetSpec struct {
	Name           string
	TimeoutSeconds int32
	ByEndpoint     bool
}

// MapKey is the key of a map element: destination address (invalid for
// KeyProtoPort maps), IP protocol number and destination port.
type MapKey struct {
	Addr  netip.Addr
	Proto uint8
	Port  uint16
}

// MapElement is one element of a named verdict map.
type MapElement struct {
	Key     MapKey
	Verdict Verdict
	Comment string
}

// Fragment is a part of the ruleset that is owned by one service port (or
// by the top level): its chains and the elements it adds to shared maps.
type Fragment struct {
	Chains []*Chain
	// Sets are the dynamic sets this fragment owns.
	Sets []SetSpec
	// Elements maps a map name to the elements this fragment adds to it.
	Elements map[string][]MapElement
	// Counters are the named counters this fragment's rules count in
	// (only the top level has any).
	Counters []string
	// HealthCheckRules is the number of kube-proxy rules the fragment's
	// health check node port element stands for: one per port it names
	// (see HealthCheckComment); 0 without one.
	HealthCheckRules int
	// Place decides the fragment's shard (TableLayout.ShardOf).
	Place Place
}

// Equal reports whether two fragments hold the same chains and elements.
func (f *Fragment) Equal(o *Fragment) bool {
	if f == o {
		return true
	}
	if f == nil || o == nil || len(f.Chains) != len(o.Chains) || len(f.Elements) != len(o.Elements) || f.HealthCheckRules != o.HealthCheckRules || f.Place != o.Place || !slices.Equal(f.Sets, o.Sets) || !slices.Equal(f.Counters, o.Counters) {
		return false
	}
	for i := range f.Chains {
		if !f.Chains[i].Equal(o.Chains[i]) {
			return false
		}
	}
	for name, els := range f.Elements {
		if !slices.Equal(els, o.Elements[name]) {
			return false
		}
	}
	return true
}

// Ruleset is the desired content of one family's nftproxy table.
type Ruleset struct {
	Family Family
	// Table is the table's name: empty for TableName, a shard's name
	// (ShardTable) in a part of SplitRuleset.
	Table string
	// Maps are the named maps, declared before any chain uses them.
	Maps []MapSpec
	// Top holds the base chains and the shared regular chains.
	Top *Fragment
	// Services holds one fragment per service port, keyed by a stable
	// string (the service port name and protocol).
	Services map[string]*Fragment
}

// Chains returns every chain of the ruleset: the top-level ones first, then
// the services' in key order.
func (r *Ruleset) Chains() []*Chain {
	out := append([]*Chain(nil), r.Top.Chains...)
	for _, k := range r.serviceKeys() {
		out = append(out, r.Services[k].Chains...)
	}
	return out
}

// ChainNames returns the names of every chain of the ruleset, top level
// first.
func (r *Ruleset) ChainNames() []string {
	var out []string
	for _, c := range r.Top.Chains {
		out = append(out, c.Name)
	}
	for _, f := range r.Services {
		for _, c := range f.Chains {
			out = append(out, c.Name)
		}
	}
	return out
}

// Sets returns every dynamic set of the ruleset, top level first.
func (r *Ruleset) Sets() []SetSpec {
	out := append([]SetSpec(nil), r.Top.Sets...)
	for _, k := range r.serviceKeys() {
		out = append(out, r.Services[k].Sets...)
	}
	return out
}

// Elements returns every element of map name, top level first, then the
// services' in key order.
func (r *Ruleset) Elements(name string) []MapElement {
	out := append([]MapElement(nil), r.Top.Elements[name]...)
	for _, k := range r.serviceKeys() {
		out = append(out, r.Services[k].Elements[name]...)
	}
	return out
}

func (r *Ruleset) serviceKeys() []string {
	keys := make([]string, 0, len(r.Services))
	for k := range r.Services {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ObjectCounts are the nftables objects of a fragment, by kind.
type ObjectCounts struct {
	Chains, Rules, Elements, Sets int
}

// Add adds o to c.
func (c *ObjectCounts) Add(o ObjectCounts, sign int) {
	c.Chains += sign * o.Chains
	c.Rules += sign * o.Rules
	c.Elements += sign * o.Elements
	c.Sets += sign * o.Sets
}

// Objects counts the fragment's chains, rules, map elements and sets.
func (f *Fragment) Objects() ObjectCounts {
	var c ObjectCounts
	if f == nil {
		return c
	}
	c.Chains, c.Sets = len(f.Chains), len(f.Sets)
	for _, ch := range f.Chains {
		c.Rules += len(ch.Rules)
	}
	for _, els := range f.Elements {
		c.Elements += len(els)
	}
	return c
}

// keyType is the nft type of the set's key.
func (s SetSpec) keyType(f Family) string {
	a := addrType(f)
	if s.ByEndpoint {
		return a + " . " + a + " . inet_service"
	}
	return a
}
