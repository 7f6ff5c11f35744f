package nftgen

import "fmt"

// MergeShards returns the state of a sharded family as one table, as the
// compat view, explain and save read it: main with every shard's Service
// chains, sets and set members added, and the elements of each shard's
// dispatch maps added to the main table's maps of the same names. A
// shard's copies of the shared chains (IsShardTopChain) are shown once,
// as the main table's; a copy that differs from the main table's where
// the two are the same by design (every one but KUBE-SERVICES and the node
// port stage) is listed in Unknown, so that a tampered shard is rewritten.
// names[i] is the table name of shards[i]. main is changed and returned.
func MergeShards(main *TableState, names []string, shards []*TableState) *TableState {
	if main.Members == nil {
		main.Members = map[string][]SetMember{}
	}
	for i, sh := range shards {
		name := names[i]
		for _, c := range sh.Chains {
			if !IsShardTopChain(c.Name) {
				main.Chains = append(main.Chains, c)
				continue
			}
			if shardCopyDiffers(main, c) {
				main.Unknown = append(main.Unknown, fmt.Sprintf("chain %s of table %s differs from the main table's", c.Name, name))
			}
		}
		for _, m := range sh.Maps {
			if mm := main.Map(m.Spec.Name); mm != nil {
				mm.Elements = append(mm.Elements, m.Elements...)
			} else {
				main.Maps = append(main.Maps, m)
			}
		}
		main.Sets = append(main.Sets, sh.Sets...)
		main.SetNames = append(main.SetNames, sh.SetNames...)
		for set, members := range sh.Members {
			main.Members[set] = members
		}
		for _, u := range sh.Unknown {
			main.Unknown = append(main.Unknown, u+" (table "+name+")")
		}
		main.Unreached += sh.Unreached
		if sh.Dormant {
			main.Unknown = append(main.Unknown, "table "+name+" is dormant")
		}
	}
	return main
}

// shardCopyDiffers reports whether a shard's copy c of a shared chain
// differs from the main table's chain of the same name, for the chains
// whose copies are the same by design.
func shardCopyDiffers(main *TableState, c *Chain) bool {
	switch c.Name {
	case ChainServices, ChainNATPreroutingNodePorts, ChainNATOutputNodePorts:
		return false
	}
	m := main.Chain(c.Name)
	return m == nil || !m.Equal(c)
}
