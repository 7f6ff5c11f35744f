//go:build linux

package main

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// ShardStep is the kernel's cost of small commits to one shard of a
// sharded layout: a table of its own, beside the loaded one in the same
// namespace, holding Services of the same shape (a dispatch map from a
// base chain, a chain per Service with a random pick of its endpoints, a
// chain per endpoint with its DNAT). The kernel validates a table from its
// own base chains only, so a commit to a shard validates the shard; the
// walk of every chain of the namespace that each commit makes stays.
type ShardStep struct {
	// Shards is k: the shard holds 1/k of the loaded Services; 0 for the
	// empty shard, whose floor is what any commit to the namespace costs.
	Shards int `json:"shards"`
	// Services is how many Services the shard table holds.
	Services int `json:"services"`
	// FloorAdd is one jump rule added to a scratch chain of the shard
	// (the median of floorRounds), as FloorAdd of the loaded table.
	FloorAdd Step `json:"floor_add"`
	// AddService is one more Service added to the shard: its chains,
	// their rules and its dispatch element in one commit (the median of
	// floorRounds, each a new Service).
	AddService Step `json:"add_service"`
}

// shardTable is the scratch table that stands for one shard.
const shardTable = "nftproxy-bench-shard"

// dispatchKeyByte is the second byte of every shard table's dispatch keys,
// 10.200.x.y: each table has its own map, and no probe traffic goes there
// (the scale Services' cluster IPs are in 10.96.0.0/15).
const dispatchKeyByte = 200

// shardBuilder writes Services of nftproxy's shape into the shard table
// through google/nftables.
type shardBuilder struct {
	conn      *nftables.Conn
	table     *nftables.Table
	dispatch  *nftables.Set
	mark      *nftables.Chain
	endpoints int
	// next is the index of the next Service to add.
	next int
}

// newShardBuilder creates a shard table called name with its base chains,
// dispatch map and mark chain in the namespace open at netnsFd.
func newShardBuilder(netnsFd, endpoints int, name string) (*shardBuilder, error) {
	c, err := nftables.New(nftables.WithNetNSFd(netnsFd), nftables.AsLasting())
	if err != nil {
		return nil, fmt.Errorf("shard: open netlink: %w", err)
	}
	b := &shardBuilder{conn: c, endpoints: endpoints,
		table: &nftables.Table{Name: name, Family: nftables.TableFamilyIPv4}}
	c.AddTable(b.table)
	// Both nat hooks reach the Services, as in nftproxy's table: the
	// kernel validates a chain once for each hook that reaches it.
	var bases []*nftables.Chain
	for _, hook := range []*nftables.ChainHook{nftables.ChainHookPrerouting, nftables.ChainHookOutput} {
		bases = append(bases, c.AddChain(&nftables.Chain{Name: fmt.Sprintf("nat-%d", *hook), Table: b.table,
			Type: nftables.ChainTypeNAT, Hooknum: hook, Priority: nftables.ChainPriorityRef(*nftables.ChainPriorityNATDest - 1)}))
	}
	b.mark = c.AddChain(&nftables.Chain{Name: "KUBE-MARK-MASQ", Table: b.table})
	c.AddRule(&nftables.Rule{Table: b.table, Chain: b.mark, Exprs: []expr.Any{
		&expr.Immediate{Register: 1, Data: binary.NativeEndian.AppendUint32(nil, 0x4000)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
	}})
	b.dispatch = &nftables.Set{Table: b.table, Name: "service-ips", IsMap: true,
		KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict}
	if err := c.AddSet(b.dispatch, nil); err != nil {
		return nil, fmt.Errorf("shard: dispatch map: %w", err)
	}
	for _, base := range bases {
		c.AddRule(&nftables.Rule{Table: b.table, Chain: base, Exprs: []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Lookup{SourceRegister: 1, SetName: b.dispatch.Name, SetID: b.dispatch.ID, DestRegister: 0, IsDestRegSet: true},
		}})
	}
	if err := c.Flush(); err != nil {
		return nil, fmt.Errorf("shard: create table: %w", err)
	}
	return b, nil
}

// queueService adds the next Service's chains, rules and dispatch element
// to the connection's pending batch.
func (b *shardBuilder) queueService() error {
	i := b.next
	b.next++
	svc := b.conn.AddChain(&nftables.Chain{Name: fmt.Sprintf("S%d", i), Table: b.table})
	b.conn.AddRule(&nftables.Rule{Table: b.table, Chain: svc, Exprs: []expr.Any{
		&expr.Verdict{Kind: expr.VerdictJump, Chain: b.mark.Name},
	}})
	for e := range b.endpoints {
		ep := b.conn.AddChain(&nftables.Chain{Name: fmt.Sprintf("E%d-%d", i, e), Table: b.table})
		addr := netip.AddrFrom4([4]byte{10, 244, byte(e), byte(i)}).As4()
		b.conn.AddRule(&nftables.Rule{Table: b.table, Chain: ep, Exprs: []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: addr[:]},
			&expr.Verdict{Kind: expr.VerdictJump, Chain: b.mark.Name},
		}})
		b.conn.AddRule(&nftables.Rule{Table: b.table, Chain: ep, Exprs: []expr.Any{
			&expr.Immediate{Register: 1, Data: addr[:]},
			&expr.Immediate{Register: 2, Data: binary.BigEndian.AppendUint16(nil, 8080)},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
		}})
		// numgen random mod (endpoints-e) == 0 goto the endpoint; the
		// last one without the pick, as nftproxy writes the cascade.
		var pick []expr.Any
		if left := b.endpoints - e; left > 1 {
			pick = []expr.Any{
				&expr.Numgen{Register: 1, Modulus: uint32(left), Type: unix.NFT_NG_RANDOM},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, 0)},
			}
		}
		b.conn.AddRule(&nftables.Rule{Table: b.table, Chain: svc,
			Exprs: append(pick, &expr.Verdict{Kind: expr.VerdictGoto, Chain: ep.Name})})
	}
	key := netip.AddrFrom4([4]byte{10, dispatchKeyByte, byte(i >> 8), byte(i)}).As4()
	if i >= 1<<16 {
		return fmt.Errorf("shard: more than %d Services", 1<<16)
	}
	return b.conn.SetAddElements(b.dispatch, []nftables.SetElement{{Key: key[:],
		VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: svc.Name}}})
}

// grow adds Services until the shard holds n, a thousand to a commit.
func (b *shardBuilder) grow(n int) error {
	for b.next < n {
		for range min(1000, n-b.next) {
			if err := b.queueService(); err != nil {
				return err
			}
		}
		if err := b.conn.Flush(); err != nil {
			return fmt.Errorf("shard: grow to %d Services: %w", n, err)
		}
	}
	return nil
}

// measure times floorRounds single jump rules into a scratch chain and
// floorRounds single Services added, and returns the medians.
func (b *shardBuilder) measure() (ShardStep, error) {
	before := b.next
	scratch := b.conn.AddChain(&nftables.Chain{Name: "scratch", Table: b.table})
	if err := b.conn.Flush(); err != nil {
		return ShardStep{}, fmt.Errorf("shard: scratch chain: %w", err)
	}
	timed := func() (float64, error) {
		start := time.Now()
		err := b.conn.Flush()
		return time.Since(start).Seconds(), err
	}
	var floors, adds []float64
	for range floorRounds {
		b.conn.AddRule(&nftables.Rule{Table: b.table, Chain: scratch, Exprs: []expr.Any{
			&expr.Verdict{Kind: expr.VerdictJump, Chain: b.mark.Name},
		}})
		f, err := timed()
		if err != nil {
			return ShardStep{}, fmt.Errorf("shard: floor add: %w", err)
		}
		b.conn.FlushChain(scratch)
		if err := b.conn.Flush(); err != nil {
			return ShardStep{}, fmt.Errorf("shard: floor delete: %w", err)
		}
		if err := b.queueService(); err != nil {
			return ShardStep{}, err
		}
		a, err := timed()
		if err != nil {
			return ShardStep{}, fmt.Errorf("shard: add a Service: %w", err)
		}
		floors, adds = append(floors, f), append(adds, a)
	}
	b.conn.DelChain(scratch)
	if err := b.conn.Flush(); err != nil {
		return ShardStep{}, fmt.Errorf("shard: scratch chain: %w", err)
	}
	slices.Sort(floors)
	slices.Sort(adds)
	st := ShardStep{Services: before}
	st.FloorAdd = Step{Seconds: floors[floorRounds/2], Ops: 1, Messages: 1}
	st.AddService = Step{Seconds: adds[floorRounds/2], Ops: 1 + 3*b.endpoints + 1 + b.endpoints + 1, Messages: 0}
	return st, nil
}

// close deletes the shard table and closes the connection.
func (b *shardBuilder) close() error {
	b.conn.DelTable(b.table)
	err := b.conn.Flush()
	if cerr := b.conn.CloseLasting(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("shard: delete table: %w", err)
	}
	return nil
}

// shardFloors builds a shard table beside the loaded one and measures it
// empty, then grown to n/k Services for each k of shards in turn (largest
// k first).
func shardFloors(netnsFd, n, endpoints int, shards []int) ([]ShardStep, error) {
	if len(shards) == 0 {
		return nil, nil
	}
	b, err := newShardBuilder(netnsFd, endpoints, shardTable)
	if err != nil {
		return nil, err
	}
	// The empty table is always measured first; 0 in shards asks for it
	// alone.
	ks := slices.DeleteFunc(slices.Clone(shards), func(k int) bool { return k == 0 })
	slices.SortFunc(ks, func(a, b int) int { return b - a })
	var out []ShardStep
	for _, k := range append([]int{0}, ks...) {
		if k > 0 {
			if err := b.grow(max(1, n/k)); err != nil {
				b.close()
				return nil, err
			}
		}
		st, err := b.measure()
		if err != nil {
			b.close()
			return nil, err
		}
		st.Shards = k
		out = append(out, st)
	}
	return out, b.close()
}

// extraServices is how many Services each extra table holds: a map
// lookup's cost does not grow with the map, so small tables stand for
// shards of any size on the data path.
const extraServices = 100

// addExtraTables leaves k tables in front of nftproxy's (see -extra-tables),
// each with both nat base chains and extraServices Services that no probe
// traffic matches: a new connection to a Service meets k lookups that
// miss before nftproxy's own, as the last shard of a sharded layout would.
func addExtraTables(netnsFd, endpoints, k int) error {
	for t := range k {
		b, err := newShardBuilder(netnsFd, endpoints, fmt.Sprintf("nftproxy-bench-extra-%d", t))
		if err != nil {
			return err
		}
		err = b.grow(extraServices)
		if cerr := b.conn.CloseLasting(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("extra table %d: %w", t, err)
		}
	}
	return nil
}

// shardList is the -shards flag: shard counts, comma-separated.
type shardList []int

// String implements flag.Value.
func (l *shardList) String() string {
	parts := make([]string, len(*l))
	for i, k := range *l {
		parts[i] = strconv.Itoa(k)
	}
	return strings.Join(parts, ",")
}

// Set implements flag.Value.
func (l *shardList) Set(v string) error {
	for p := range strings.SplitSeq(v, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || k < 0 {
			return fmt.Errorf("shard count %q: want a number, 0 for the empty table only", p)
		}
		*l = append(*l, k)
	}
	return nil
}
