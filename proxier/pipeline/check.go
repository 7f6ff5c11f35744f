package pipeline

import (
	"context"
	"fmt"

	"github.com/nftproxy/nftproxy/nftgen"
)

// Tables returns the number of tables of family f as of its last full
// sync: 1 for the single table, else the main table and its shards. The
// rolling check takes them in turn, 0 to Tables-1.
func (s *Pipeline) Tables(f nftgen.Family) int {
	fs := s.families[f]
	if fs == nil || !fs.layout.Sharded() {
		return 1
	}
	return fs.layout.Shards + 1
}

// CheckTable compares table t of family f (0 the main table, i its shard
// i) as the kernel holds it with what the pipeline applied there, and has
// the next sync recompute from the model every Service it applied in that
// table (only what differs from the applied rules is written). It returns
// "" when the table holds what was applied, or else what differs, which a
// full sync repairs (the caller's decision). A family whose table is not
// known (its next sync is a full one anyway), or a table beyond its
// layout, is not read.
func (s *Pipeline) CheckTable(ctx context.Context, f nftgen.Family, t int) (string, error) {
	fs := s.families[f]
	if fs == nil || fs.applied == nil || t >= s.Tables(f) {
		return "", nil
	}
	digests := fs.liveDigests(fs.applied)
	live, err := s.dp.ReadTable(ctx, f, t, digests.Finish)
	if err != nil {
		return "", fmt.Errorf("read %s table %s: %w", f, nftgen.ShardTable(t), err)
	}
	var shardTop *nftgen.Fragment
	if t > 0 {
		shardTop = fs.gen.ShardTop(fs.layout, t)
	}
	drift := fs.applied.CheckTable(t, live, digests, shardTop, fs.gen.ShardMaps())
	switch {
	case t == 0 && fs.layout.Sharded():
		return drift, nil // its Services are recomputed with their shards
	case !fs.layout.Sharded():
		// A single table beside another family's shards: its own
		// Services, not every one the store holds (the set is shared by
		// the families).
		for nn := range fs.keys {
			s.retry[nn] = true
		}
		return drift, nil
	}
	for nn, keys := range fs.keys {
		for _, key := range keys {
			if sum := fs.applied.Services[key]; sum != nil && fs.layout.ShardOf(sum.Place) == t {
				s.retry[nn] = true
				break
			}
		}
	}
	return drift, nil
}
