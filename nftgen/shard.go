package nftgen

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
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
// dispatch maps. Shard i (ShardTable(i)) holds the Services ShardOf puts
// there: their chains, sets and the elements of the two nat dispatch maps
// (ShardMaps), with its own copies of the chains they reach (ShardTop).
// Jumps cannot cross tables, so all of a Service's entry points are in its
// shard (Place). A Service with only a cluster IP is placed by the low bits
// of that address, so that a packet sent to a cluster IP passes only a
// compare in the shards before its own (ShardGuard); one with node ports,
// external or load balancer IPs is placed by name in the first Named
// shards, the only ones that look those up.

// TableLayout is how a family's ruleset is spread over tables.
type TableLayout struct {
	// Shards is the number of shard tables; 0 or 1 is the single table.
	Shards int
	// Named is how many of the shards, the first ones, also hold the
	// Services placed by name (Place.ByName) and have the stages that look
	// up external and load balancer IPs and node ports: at least 1 in a
	// sharded layout.
	Named int
}

// Automatic layouts (ChooseLayout with no configured count): one table up
// to ShardFromServices Services, above that about one shard per
// ServicesPerShard, rounded up to a power of two, at most MaxAutoShards.
const (
	ShardFromServices = 2000
	ServicesPerShard  = 500
	MaxAutoShards     = 64
)

// ChooseLayout is the one place that decides a family's table layout, at
// each full sync: configured shards when set (1 is the single table; any
// other count is rounded up to a power of two, see ShardOf), else by the
// number of Services. An automatic layout grows when its shards would hold
// more than ServicesPerShard Services each and shrinks only when a quarter
// of them would do, so that a cluster near a boundary is not moved back and
// forth: each move rewrites every table. The shards that take the Services
// with node ports, external or load balancer IPs (open, of services) are
// counted the same way among them.
func ChooseLayout(configured, services, open int, current TableLayout) TableLayout {
	shards := chooseShards(configured, services, current)
	if shards <= 1 {
		return TableLayout{Shards: shards}
	}
	named := min(grown(max((open+ServicesPerShard-1)/ServicesPerShard, 1), current.Named, shards == current.Shards), shards)
	return TableLayout{Shards: shards, Named: named}
}

// chooseShards is ChooseLayout's number of shards.
func chooseShards(configured, services int, current TableLayout) int {
	if configured > 0 {
		if configured == 1 {
			return 1
		}
		return min(powerOfTwoAtLeast(configured), MaxShards)
	}
	want := 0
	if services > ShardFromServices {
		want = min(max((services+ServicesPerShard-1)/ServicesPerShard, 2), MaxAutoShards)
	}
	cur := current.Shards
	if !current.Sharded() {
		cur = 0
	}
	if want == 0 {
		if services > ShardFromServices/2 && cur > 0 && isPowerOfTwo(cur) {
			return cur // just below the boundary: stay sharded
		}
		return 0
	}
	return grown(want, cur, true)
}

// grown returns the power of two to use for a count that wants want tables
// when cur are in place (valid tells whether cur may be kept): cur while it
// is enough and no more than four times what is wanted, else want rounded
// up to a power of two.
func grown(want, cur int, valid bool) int {
	if valid && isPowerOfTwo(cur) && want <= cur && 4*want > cur {
		return cur
	}
	return powerOfTwoAtLeast(want)
}

// powerOfTwoAtLeast returns the smallest power of two not below n (n > 0).
func powerOfTwoAtLeast(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

func isPowerOfTwo(n int) bool { return n > 0 && n&(n-1) == 0 }

// MaxShards bounds TableLayout.Shards: each shard adds its base chains to
// the nat hooks, which every new connection passes.
const MaxShards = 256

// Sharded reports whether the layout has shard tables.
func (l TableLayout) Sharded() bool { return l.Shards > 1 }

// Validate reports a shard count outside 0..MaxShards, or a sharded one
// that is not a power of two (ShardOf places by the low bits of an
// address).
func (l TableLayout) Validate() error {
	if err := ValidShardCount(l.Shards); err != nil {
		return err
	}
	if l.Sharded() && !isPowerOfTwo(l.Shards) {
		return fmt.Errorf("%d table shards is not a power of two", l.Shards)
	}
	if l.Sharded() && (l.Named < 1 || l.Named > l.Shards) {
		return fmt.Errorf("%d of %d table shards take the Services placed by name, want 1 to %d", l.Named, l.Shards, l.Shards)
	}
	return nil
}

// ValidShardCount reports a configured shard count (--table-shards) outside
// 0..MaxShards; ChooseLayout rounds the others up to a power of two.
func ValidShardCount(n int) error {
	if n < 0 || n > MaxShards {
		return fmt.Errorf("%d table shards is outside 0..%d", n, MaxShards)
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

// ShardOf returns the table index of a Service whose fragments have this
// Place: 0 in the single layout, else 1 + the low bits of its cluster IP
// (Shards is a power of two), so that every port of a Service shares one
// shard and a packet sent to a cluster IP tells its shard by itself
// (ShardGuard); a Service placed by name goes to one of the first Named
// shards.
func (l TableLayout) ShardOf(p Place) int {
	if !l.Sharded() {
		return 0
	}
	if p.ByName {
		return int(p.Bits%uint32(l.named())) + 1
	}
	return int(p.Bits&l.mask()) + 1
}

// named is Named, at least 1: a sharded layout always has a shard for the
// Services placed by name.
func (l TableLayout) named() int { return max(l.Named, 1) }

// takesNamed reports whether shard i holds Services placed by name, and
// with them the stages for external and load balancer IPs and node ports.
func (l TableLayout) takesNamed(i int) bool { return i <= l.named() }

// ShardGuard returns the match that lets into shard i's service IP stage
// only packets sent to an address ShardOf places in shard i.
func (l TableLayout) ShardGuard(i int) DestBits {
	return DestBits{Mask: l.mask(), Value: uint32(i-1) & l.mask()}
}

func (l TableLayout) mask() uint32 { return uint32(l.Shards - 1) }

// IsShardMap reports whether the elements of map name live in the shard of
// the Service that adds them: the nat dispatch maps, whose elements jump
// to the Service's chains. The other maps' elements name only shared
// chains and stay in the main table.
func IsShardMap(name string) bool {
	return name == MapServiceIPs || name == MapServiceNodePorts
}

// Names of the base chains that only shard tables have: the guarded
// cluster IP stage, one priority before every table's service IP stage
// (ChainNATPrerouting, ChainNATOutput), and the node port stage one
// priority after it, so that a service IP is matched before a node port as
// in kube-proxy's KUBE-SERVICES whichever shard either is in. The stages
// that tables made by earlier releases have keep their names and
// priorities, so that an upgrade only adds the cluster IP stage (the
// kernel cannot move a base chain to another priority).
const (
	ChainNATPreroutingClusterIPs = "nat-prerouting-cluster-ips"
	ChainNATOutputClusterIPs     = "nat-output-cluster-ips"
	ChainNATPreroutingNodePorts  = "nat-prerouting-nodeports"
	ChainNATOutputNodePorts      = "nat-output-nodeports"
)

// Priorities of a shard's cluster IP and node port stages.
const (
	PriorityClusterIPs = PriorityDstNAT - 1
	PriorityNodePorts  = PriorityDstNAT + 1
)

// ShardTop returns the shared chains of shard i of layout l: its nat base
// chains, KUBE-SERVICES with its dispatch map, KUBE-NODEPORTS and
// KUBE-MARK-MASQ, which the Services' chains reach. The NAT hooks call every
// table's base chains for a connection's first packet until one binds it,
// in three stages, the last two only in the shards that take the Services
// placed by name (TableLayout.Named), so that a packet that is no Service's
// passes a compare in most shards and a look-up in few:
//   - cluster IPs: the dispatch look-up behind the shard's guard
//     (ShardGuard), so that a connection to a cluster IP pays one look-up,
//     in its own shard, and a compare in each shard before it;
//   - any service IP: the same look-up unguarded, for external and load
//     balancer IPs, which do not tell their shard;
//   - node ports: a guard on the shard's own node ports, then the same tests
//     as KUBE-SERVICES' last rules.
//
// The rules of the chains a merged view shows are the main table's, so that
// the compat view shows a sharded node as it shows a single table.
func (g *Generator) ShardTop(l TableLayout, i int) *Fragment {
	base := func(name string, h Hook, prio int32, rules ...Rule) *Chain {
		return &Chain{Name: name, Base: &BaseChain{Type: NATType, Hook: h, Priority: prio}, Rules: rules, Compat: IptablesNAT}
	}
	nat := func(name string, rules ...Rule) *Chain { return &Chain{Name: name, Rules: rules, Compat: IptablesNAT} }
	var nodePorts []Rule
	for _, r := range g.nodePortsJumps() {
		nodePorts = append(nodePorts, NewRule(r.Comment, append([]Stmt{ProtoPortIn{Map: MapServiceNodePorts}}, r.Stmts...)...))
	}
	guarded := NewRule("kubernetes service portals", l.ShardGuard(i), jump(ChainServices))
	anyIP := NewRule("kubernetes service portals", jump(ChainServices))
	chains := []*Chain{
		base(ChainNATPreroutingClusterIPs, HookPrerouting, PriorityClusterIPs, guarded),
		base(ChainNATOutputClusterIPs, HookOutput, PriorityClusterIPs, guarded),
	}
	if l.takesNamed(i) {
		chains = append(chains,
			base(ChainNATPrerouting, HookPrerouting, PriorityDstNAT, anyIP),
			base(ChainNATOutput, HookOutput, PriorityDstNAT, anyIP),
			base(ChainNATPreroutingNodePorts, HookPrerouting, PriorityNodePorts, nodePorts...),
			base(ChainNATOutputNodePorts, HookOutput, PriorityNodePorts, nodePorts...))
	}
	chains = append(chains,
		nat(ChainServices, NewRule("", DispatchMap{Map: MapServiceIPs})),
		nat(ChainNodePorts, g.nodePortRules()...),
		nat(ChainMarkMasq, NewRule("", MarkOr{Bits: g.markBits})))
	var counters []string
	if g.cfg.Family == FamilyIPv4 && g.cfg.LocalhostNodePorts {
		counters = []string{CounterLocalhostNodePorts}
	}
	return &Fragment{Chains: chains, Counters: counters}
}

// ShardTops returns the top of every table of layout l but the main
// table's: index i (1..Shards) is ShardTop(l, i), index 0 nil.
func (g *Generator) ShardTops(l TableLayout) []*Fragment {
	if !l.Sharded() {
		return nil
	}
	out := make([]*Fragment, l.Shards+1)
	for i := 1; i <= l.Shards; i++ {
		out[i] = g.ShardTop(l, i)
	}
	return out
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
// of the main table's shared chains (or the later stages), which a merged
// view of the tables shows once.
// It allocates nothing: a merged read asks it of every chain.
func IsShardTopChain(name string) bool {
	names := shardTopChains()
	return slices.Contains(names[:], name)
}

// ShardTopChainNames names the chains a shard's ShardTop may have, in its
// order.
func ShardTopChainNames() []string {
	names := shardTopChains()
	return names[:]
}

// shardTopChains is ShardTopChainNames as a value.
func shardTopChains() [9]string {
	return [9]string{ChainNATPreroutingClusterIPs, ChainNATOutputClusterIPs, ChainNATPrerouting, ChainNATOutput,
		ChainNATPreroutingNodePorts, ChainNATOutputNodePorts, ChainServices, ChainNodePorts, ChainMarkMasq}
}

// Place is where a Service's fragments live in a sharded layout
// (TableLayout.ShardOf).
type Place struct {
	// Bits are the last 32 bits of the cluster IP (AddrLow32), or, with
	// ByName, a hash of the Service's namespace and name.
	Bits uint32
	// ByName is set for a Service with node ports, external or load
	// balancer IPs: their packets do not tell their shard, so the Service
	// goes to one of the layout's first Named shards, the only ones that
	// look those up.
	ByName bool
}

// ClusterIPPlace is the Place of a Service placed by its cluster IP a.
func ClusterIPPlace(a netip.Addr) Place { return Place{Bits: AddrLow32(a)} }

// placeOf returns the Place of fragment f of the Service called
// namespacedName whose cluster IP is vip: by name when f has a node port or
// a dispatch element for another address, else by vip's low bits.
func placeOf(f *Fragment, vip netip.Addr, namespacedName string) Place {
	open := len(f.Elements[MapServiceNodePorts]) > 0
	for _, e := range f.Elements[MapServiceIPs] {
		open = open || e.Key.Addr != vip
	}
	if !open {
		return Place{Bits: AddrLow32(vip)}
	}
	h := fnv.New32a()
	h.Write([]byte(namespacedName))
	return Place{Bits: h.Sum32(), ByName: true}
}
