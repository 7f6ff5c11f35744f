package proxier

import (
	"context"
	"fmt"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/runner"
)

// TestShardedStopHandsOverAndLeavesNoTable: a stopping nftproxy whose
// tables are sharded leaves the handover and deletes its tables, which a
// kube-proxy started next would not (it deletes only the table of
// nftproxy's name); one with the single table leaves it in place.
func TestShardedStopHandsOverAndLeavesNoTable(t *testing.T) {
	for _, shards := range []int{1, 4} {
		fake := nftgen.NewFake()
		e, err := New(Config{Families: []nftgen.Config{{Family: nftgen.FamilyIPv4}}, TableShards: shards}, fake)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			name := fmt.Sprintf("s%d", i)
			e.SetService(svc(name, fmt.Sprintf("10.96.0.%d", i+1)))
			e.SetEndpointSlice(slice(name, fmt.Sprintf("10.0.%d.1", i)))
		}
		if _, err := e.Sync(context.Background(), runner.Requested); err != nil {
			t.Fatal(err)
		}
		if got := len(fake.ShardTables(nftgen.FamilyIPv4)); shards > 1 && got != shards {
			t.Fatalf("%d shards configured, %d tables", shards, got)
		}
		e.handOver(context.Background())
		if spec := fake.Handovers[nftgen.FamilyIPv4]; spec == nil || spec.Destinations() != 8 {
			t.Errorf("shards=%d: handover %+v, want 8 destinations", shards, spec)
		}
		st := fake.State(nftgen.FamilyIPv4)
		switch {
		case shards > 1 && (st != nil || len(fake.ShardTables(nftgen.FamilyIPv4)) > 0):
			t.Errorf("shards=%d: tables left after the stop", shards)
		case shards == 1 && st == nil:
			t.Errorf("the single table was deleted at the stop")
		}
	}
}
