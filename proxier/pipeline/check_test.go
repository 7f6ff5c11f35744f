package pipeline

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/model"
)

// TestCheckTableRecomputesWhatTheTableHolds: the check of a shard has the
// next sync recompute the Services placed in it; that of the main table
// none (they go with their shards); that of a family with one table
// beside another family's shards only that family's own Services, not
// every one the store holds.
func TestCheckTableRecomputesWhatTheTableHolds(t *testing.T) {
	g4, err := nftgen.NewGenerator(nftgen.Config{Family: nftgen.FamilyIPv4})
	if err != nil {
		t.Fatal(err)
	}
	g6, err := nftgen.NewGenerator(nftgen.Config{Family: nftgen.FamilyIPv6})
	if err != nil {
		t.Fatal(err)
	}
	store := model.NewStore()
	s := New(store, nftgen.NewFake(), g4, g6)
	clusterIPs := map[types.NamespacedName]netip.Addr{}
	for i := range nftgen.ShardFromServices + 100 {
		name := fmt.Sprintf("s%d", i)
		ip := fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)
		clusterIPs[types.NamespacedName{Namespace: "ns", Name: name}] = netip.MustParseAddr(ip)
		store.SetService(svc(name, ip))
		store.SetEndpointSlice(slice(name, fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)))
	}
	var v6 []types.NamespacedName
	for i := range 3 {
		name := fmt.Sprintf("v6-%d", i)
		sv := svc(name, fmt.Sprintf("fd00::%d", i+1))
		sv.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
		sl := slice(name, fmt.Sprintf("fd01::%d", i+1))
		sl.AddressType = discovery.AddressTypeIPv6
		store.SetService(sv)
		store.SetEndpointSlice(sl)
		v6 = append(v6, types.NamespacedName{Namespace: "ns", Name: name})
	}
	ctx := context.Background()
	if _, err := s.Sync(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if s.Tables(nftgen.FamilyIPv4) < 3 || s.Tables(nftgen.FamilyIPv6) != 1 {
		t.Fatalf("tables: %d IPv4, %d IPv6; want IPv4 sharded, IPv6 one table", s.Tables(nftgen.FamilyIPv4), s.Tables(nftgen.FamilyIPv6))
	}
	layout := s.families[nftgen.FamilyIPv4].layout
	check := func(f nftgen.Family, table int, want []types.NamespacedName) {
		t.Helper()
		clear(s.retry)
		if drift, err := s.CheckTable(ctx, f, table); drift != "" || err != nil {
			t.Fatalf("%s table %d: %q, %v", f, table, drift, err)
		}
		got := slices.SortedFunc(maps.Keys(s.retry), model.CompareNames)
		slices.SortFunc(want, model.CompareNames)
		if !slices.Equal(got, want) {
			t.Errorf("%s table %d recomputes %d Services, want %d: %v", f, table, len(got), len(want), got)
		}
	}
	check(nftgen.FamilyIPv6, 0, v6)
	check(nftgen.FamilyIPv4, 0, nil)
	var inShard []types.NamespacedName
	for nn, ip := range clusterIPs {
		if layout.ShardOf(nftgen.ClusterIPPlace(ip)) == 2 {
			inShard = append(inShard, nn)
		}
	}
	if len(inShard) == 0 {
		t.Fatal("no Service in shard 2")
	}
	check(nftgen.FamilyIPv4, 2, inShard)
}
