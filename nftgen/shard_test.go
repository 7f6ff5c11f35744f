package nftgen

import (
	"net/netip"
	"testing"
)

// TestChooseLayoutPowersOfTwo: automatic layouts are powers of two of
// about ServicesPerShard Services a shard, grow as soon as the shards would
// hold more and shrink only at a quarter; a configured count is rounded up;
// a count left by an older release that is no power of two is replaced.
func TestChooseLayoutPowersOfTwo(t *testing.T) {
	for _, c := range []struct {
		configured, services, current, want int
	}{
		{0, 1000, 0, 0},
		{0, ShardFromServices, 0, 0},
		{0, ShardFromServices + 1, 0, 8},
		{0, 10000, 0, 32},
		{0, 30000, 0, 64},
		{0, 100000, 0, 64},
		{0, 16001, 32, 64}, // 33 wanted: grow
		{0, 16000, 64, 64}, // 32 wanted: stay
		{0, 8000, 64, 16},  // 16 wanted, a quarter: shrink
		{0, 1500, 8, 8},    // just below the threshold: stay sharded
		{0, 900, 8, 0},     // well below it: one table
		{0, 30000, 60, 64}, // no power of two: replaced
		{3, 100, 0, 4},     // configured: rounded up
		{1, 30000, 64, 1},  // configured single table
		{1000, 10, 0, MaxShards},
	} {
		got := ChooseLayout(c.configured, c.services, TableLayout{Shards: c.current})
		if got.Shards != c.want {
			t.Errorf("ChooseLayout(%d, %d, %d) = %d shards, want %d", c.configured, c.services, c.current, got.Shards, c.want)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("ChooseLayout(%d, %d, %d): %v", c.configured, c.services, c.current, err)
		}
	}
	if (TableLayout{Shards: 6}).Validate() == nil {
		t.Error("6 shards validate")
	}
}

// TestShardGuardLetsInItsShardsAddressesOnly: for IPv4 and IPv6 cluster
// IPs, the guard of shard i matches exactly the addresses ShardOf places in
// shard i, so a connection to a cluster IP is looked up in its own shard
// and no other.
func TestShardGuardLetsInItsShardsAddressesOnly(t *testing.T) {
	l := TableLayout{Shards: 16}
	for _, base := range []string{"10.96.0.0", "fd00:10:96::"} {
		a := netip.MustParseAddr(base)
		for range 600 {
			a = a.Next()
			shard := l.ShardOf(AddrLow32(a))
			for i := 1; i <= l.Shards; i++ {
				if l.ShardGuard(i).Matches(a) != (i == shard) {
					t.Fatalf("%s in shard %d: the guard of shard %d matches: %v", a, shard, i, i != shard)
				}
			}
		}
	}
}
