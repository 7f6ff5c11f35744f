package nftgen

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// This file decides which table each object of a family's ruleset lives
// in. The kernel validates a table from its base chains at every commit
// that adds a jump, so the cost of one Service change grows with the table
// it lands in (see docs/performance.md). A sharded layout spreads the
// Services over Shards tables of their own: a change validates the main
// table (small: the filter side and the shared chains) and one shard.
//
// The main table (TableName) keeps everything it holds in the single
// layout, Service chains and the nat dispatch elements excepted: the
// filter side, postrouting, the named counters, and empty copies of the
// dispatch maps. Shard i (ShardTable(i)) holds the Services whose key
// ShardOf puts there: their chains, sets and the elements of the two nat
// dispatch maps (ShardMaps), with its own copies of the chains they reach
// (ShardTop). Jumps cannot cross tables, so all of a Service's entry points
// are in its shard: a Service is placed by its namespace and name, never
// by port or address.

// TableLayout is how a family's ruleset is spread over tables.
type TableLayout struct {
	// Shards is the number of shard tables; 0 or 1 is the single table.
	Shards int
}

// Automatic layouts (ChooseLayout with no configured count): one table up
// to ShardFromServices Services, above that one shard per
// ServicesPerShard, at most MaxAutoShards.
const (
	ShardFromServices = 2000
	ServicesPerShard  = 500
	MaxAutoShards     = 64
)

// ChooseLayout is the one place that decides a family's table layout, at
// each full sync: configured shards when set (1 is the single table), else
// by the number of Services. An automatic layout changes only when the
// count it wants is at least twice or at most half the current one, so that
// a cluster near a boundary is not moved back and forth: each move rewrites
// every table.
func ChooseLayout(configured, services int, current TableLayout) TableLayout {
	if configured > 0 {
		return TableLayout{Shards: min(configured, MaxShards)}
	}
	want := 0
	if services > ShardFromServices {
		want = min(max((services+ServicesPerShard-1)/ServicesPerShard, 2), MaxAutoShards)
	}
	cur := current.Shards
	if !current.Sharded() {
		cur = 0
	}
	switch {
	case want == cur:
	case want == 0 && services > ShardFromServices/2 && cur > 0:
		want = cur // just below the boundary: stay sharded
	case want > 0 && cur > 0 && want < 2*cur && 2*want > cur:
		want = cur
	}
	return TableLayout{Shards: want}
}

// MaxShards bounds TableLayout.Shards: each shard adds its base chains to
// the nat hooks, which every new connection passes.
const MaxShards = 256

// Sharded reports whether the layout has shard tables.
func (l TableLayout) Sharded() bool { return l.Shards > 1 }

// Validate reports a shard count outside 0..MaxShards.
func (l TableLayout) Validate() error {
	if l.Shards < 0 || l.Shards > MaxShards {
		return fmt.Errorf("%d table shards is outside 0..%d", l.Shards, MaxShards)
	}
	return nil
}

// ShardTablePrefix starts the name of every shard table.
const ShardTablePrefix = TableName + "-shard-"

// ShardTable returns the name of table i: TableName for 0, a shard's name
// for 1..Shards.
func ShardTable(i int) string {
	if i == 0 {
		return TableName
	}
	return fmt.Sprintf("%s%03d", ShardTablePrefix, i)
}

// IsShardTable reports whether name is a shard table's name.
func IsShardTable(name string) bool {
	_, ok := ShardIndex(name)
	return ok
}

// ShardIndex returns the index i of the shard table called name
// (ShardTable(i) == name).
func ShardIndex(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, ShardTablePrefix)
	if !ok || len(rest) != 3 {
		return 0, false
	}
	i := 0
	for _, c := range rest {
		if c < '0' || c > '9' {
			return 0, false
		}
		i = i*10 + int(c-'0')
	}
	return i, i > 0
}

// ShardOf returns the table index of the Service fragment key (see
// ServiceKey): 0 in the single layout, else 1..Shards by a hash of the
// Service's namespace and name, so that every port of a Service, and with
// it every entry point, shares one shard.
func (l TableLayout) ShardOf(key string) int { return l.ShardOfService(serviceOfKey(key)) }

// ShardOfService returns the table index of the Service called
// namespacedName ("namespace/name"): the table of all its fragments.
func (l TableLayout) ShardOfService(namespacedName string) int {
	if !l.Sharded() {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(namespacedName))
	return int(h.Sum32()%uint32(l.Shards)) + 1
}

// serviceOfKey returns the "namespace/name" part of a fragment key
// ("ns/name:port/proto" or "ns/name/proto").
func serviceOfKey(key string) string {
	if i := strings.IndexByte(key, ':'); i >= 0 {
		return key[:i]
	}
	if i := strings.LastIndexByte(key, '/'); i > 0 {
		return key[:i]
	}
	return key
}

// IsShardMap reports whether the elements of map name live in the shard of
// the Service that adds them: the nat dispatch maps, whose elements jump
// to the Service's chains. The other maps' elements name only shared
// chains and stay in the main table.
func IsShardMap(name string) bool {
	return name == MapServiceIPs || name == MapServiceNodePorts
}

// Names of the base chains that only shard tables have: the node port
// stage, one priority after every table's service IP stage, so that a
// service IP is matched before a node port as in kube-proxy's
// KUBE-SERVICES whichever shard either is in.
const (
	ChainNATPreroutingNodePorts = "nat-prerouting-nodeports"
	ChainNATOutputNodePorts     = "nat-output-nodeports"
)

// PriorityNodePorts is the priority of a shard's node port stage.
const PriorityNodePorts = PriorityDstNAT + 1

// ShardTop returns the shared chains of a shard table: its nat base
// chains, KUBE-SERVICES with its dispatch map, the node port stage (a
// guard on the shard's own node ports, then the same tests as
// KUBE-SERVICES' last rules), KUBE-NODEPORTS and KUBE-MARK-MASQ, which
// the Services' chains reach. Their rules are the main table's, so that
// the compat view shows a sharded node as it shows a single table.
func (g *Generator) ShardTop() *Fragment {
	base := func(name string, h Hook, prio int32, rules ...Rule) *Chain {
		return &Chain{Name: name, Base: &BaseChain{Type: NATType, Hook: h, Priority: prio}, Rules: rules, Compat: IptablesNAT}
	}
	nat := func(name string, rules ...Rule) *Chain { return &Chain{Name: name, Rules: rules, Compat: IptablesNAT} }
	var nodePorts []Rule
	for _, r := range g.nodePortsJumps() {
		nodePorts = append(nodePorts, NewRule(r.Comment, append([]Stmt{ProtoPortIn{Map: MapServiceNodePorts}}, r.Stmts...)...))
	}
	chains := []*Chain{
		base(ChainNATPrerouting, HookPrerouting, PriorityDstNAT, NewRule("kubernetes service portals", jump(ChainServices))),
		base(ChainNATOutput, HookOutput, PriorityDstNAT, NewRule("kubernetes service portals", jump(ChainServices))),
		base(ChainNATPreroutingNodePorts, HookPrerouting, PriorityNodePorts, nodePorts...),
		base(ChainNATOutputNodePorts, HookOutput, PriorityNodePorts, nodePorts...),
		nat(ChainServices, NewRule("", DispatchMap{Map: MapServiceIPs})),
		nat(ChainNodePorts, g.nodePortRules()...),
		nat(ChainMarkMasq, NewRule("", MarkOr{Bits: g.markBits})),
	}
	var counters []string
	if g.cfg.Family == FamilyIPv4 && g.cfg.LocalhostNodePorts {
		counters = []string{CounterLocalhostNodePorts}
	}
	return &Fragment{Chains: chains, Counters: counters}
}

// ShardMaps returns the map declarations of a shard table.
func (g *Generator) ShardMaps() []MapSpec {
	var out []MapSpec
	for _, m := range g.Maps() {
		if IsShardMap(m.Name) {
			out = append(out, m)
		}
	}
	return out
}

// IsShardTopChain reports whether name is one of ShardTop's chains: copies
// of the main table's shared chains (or the node port stage), which a
// merged view of the tables shows once.
func IsShardTopChain(name string) bool {
	switch name {
	case ChainNATPrerouting, ChainNATOutput, ChainNATPreroutingNodePorts, ChainNATOutputNodePorts,
		ChainServices, ChainNodePorts, ChainMarkMasq:
		return true
	}
	return false
}
