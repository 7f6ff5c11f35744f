package nftgen

import (
	"net/netip"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen/nftgentest"
)

// TestChooseLayoutPowersOfTwo: automatic layouts are powers of two of
// about ServicesPerShard Services a shard, grow as soon as the shards would
// hold more and shrink only at a quarter; a configured count is rounded up;
// a count left by an older release that is no power of two is replaced.
// The shards that take the Services with node ports, external or load
// balancer IPs are counted the same way, at least one.
func TestChooseLayoutPowersOfTwo(t *testing.T) {
	for _, c := range []struct {
		configured, services, open int
		current, want              TableLayout
	}{
		{0, 1000, 0, TableLayout{}, TableLayout{}},
		{0, ShardFromServices, 0, TableLayout{}, TableLayout{}},
		{0, ShardFromServices + 1, 0, TableLayout{}, TableLayout{Shards: 8, Named: 1}},
		{0, 10000, 10, TableLayout{}, TableLayout{Shards: 32, Named: 1}},
		{0, 30000, 600, TableLayout{}, TableLayout{Shards: 64, Named: 2}},
		{0, 30000, 30000, TableLayout{}, TableLayout{Shards: 64, Named: 64}},
		{0, 100000, 5000, TableLayout{}, TableLayout{Shards: 64, Named: 16}},
		{0, 16001, 0, TableLayout{Shards: 32, Named: 1}, TableLayout{Shards: 64, Named: 1}}, // 33 wanted: grow
		{0, 16000, 0, TableLayout{Shards: 64, Named: 1}, TableLayout{Shards: 64, Named: 1}}, // 32 wanted: stay
		{0, 8000, 0, TableLayout{Shards: 64, Named: 1}, TableLayout{Shards: 16, Named: 1}},  // a quarter: shrink
		{0, 30000, 1500, TableLayout{Shards: 64, Named: 8}, TableLayout{Shards: 64, Named: 8}},
		{0, 30000, 900, TableLayout{Shards: 64, Named: 8}, TableLayout{Shards: 64, Named: 2}},
		{0, 1500, 0, TableLayout{Shards: 8, Named: 1}, TableLayout{Shards: 8, Named: 1}}, // just below the threshold
		{0, 900, 0, TableLayout{Shards: 8, Named: 1}, TableLayout{}},                     // well below it
		{0, 30000, 0, TableLayout{Shards: 60}, TableLayout{Shards: 64, Named: 1}},        // an older release's count
		{3, 100, 0, TableLayout{}, TableLayout{Shards: 4, Named: 1}},
		{1, 30000, 0, TableLayout{Shards: 64, Named: 1}, TableLayout{Shards: 1}},
		{1000, 10, 0, TableLayout{}, TableLayout{Shards: MaxShards, Named: 1}},
	} {
		got := ChooseLayout(c.configured, c.services, c.open, c.current)
		if got != c.want {
			t.Errorf("ChooseLayout(%d, %d, %d, %+v) = %+v, want %+v", c.configured, c.services, c.open, c.current, got, c.want)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("ChooseLayout(%d, %d, %d, %+v): %v", c.configured, c.services, c.open, c.current, err)
		}
	}
	for _, l := range []TableLayout{{Shards: 6, Named: 1}, {Shards: 8}, {Shards: 8, Named: 9}} {
		if l.Validate() == nil {
			t.Errorf("%+v validates", l)
		}
	}
}

// TestShardGuardLetsInItsShardsAddressesOnly: for IPv4 and IPv6 cluster
// IPs, the guard of shard i matches exactly the addresses ShardOf places in
// shard i, so a connection to a cluster IP is looked up in its own shard
// and no other.
func TestShardGuardLetsInItsShardsAddressesOnly(t *testing.T) {
	l := TableLayout{Shards: 16, Named: 2}
	for _, base := range []string{"10.96.0.0", "fd00:10:96::"} {
		a := netip.MustParseAddr(base)
		for range 600 {
			a = a.Next()
			shard := l.ShardOf(ClusterIPPlace(a))
			for i := 1; i <= l.Shards; i++ {
				if l.ShardGuard(i).Matches(a) != (i == shard) {
					t.Fatalf("%s in shard %d: the guard of shard %d matches: %v", a, shard, i, i != shard)
				}
			}
		}
	}
}

// TestOpenServicesLiveWhereTheyAreLookedUp: in a layout whose first two of
// eight shards take the Services placed by name, every node port and every
// dispatch element for an address other than its Service's cluster IP (an
// external or load balancer IP) is in a shard whose top level has the
// unguarded stage and the node port stage, and the other shards have
// neither, so a packet that is no Service's passes only their guard.
func TestOpenServicesLiveWhereTheyAreLookedUp(t *testing.T) {
	g := featureGenerator(t)
	ports := nftgentest.FeaturePorts()
	rs := g.Ruleset(ports)
	l := TableLayout{Shards: 8, Named: 2}
	parts := SplitRuleset(rs, l, g.ShardTops(l), g.ShardMaps())
	vips := map[string]netip.Addr{}
	for _, p := range ports {
		vips[ServiceKey(p.Name)] = p.ClusterIPs[0]
	}
	open := 0
	for i := 1; i <= l.Shards; i++ {
		stages := map[string]bool{}
		for _, c := range parts[i].Top.Chains {
			stages[c.Name] = true
		}
		lookedUp := stages[ChainNATPrerouting] && stages[ChainNATOutput] && stages[ChainNATPreroutingNodePorts] && stages[ChainNATOutputNodePorts]
		if lookedUp != (i <= l.Named) || !stages[ChainNATPreroutingClusterIPs] || !stages[ChainNATOutputClusterIPs] {
			t.Errorf("shard %d of %+v has the stages %v", i, l, stages)
		}
		for key, f := range parts[i].Services {
			for _, e := range f.Elements[MapServiceIPs] {
				if e.Key.Addr != vips[key] {
					open++
					if !lookedUp {
						t.Errorf("%s's dispatch element for %s is in shard %d, which does not look it up", key, e.Key.Addr, i)
					}
				}
			}
			if n := len(f.Elements[MapServiceNodePorts]); n > 0 {
				open++
				if !lookedUp {
					t.Errorf("%s's node ports are in shard %d, which does not look them up", key, i)
				}
			}
		}
	}
	if open == 0 {
		t.Fatal("the feature ports have no node port, external or load balancer IP")
	}
}
