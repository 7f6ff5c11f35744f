package nftgen

import (
	"fmt"
	"maps"
	"slices"
)

// Merged returns the state of a sharded family as one table, as the
// compat view, explain and save read it: s (the main table) with every
// shard's Service chains, sets and set members added, and the elements of
// each shard's dispatch maps added to the main table's maps of the same
// names. A shard's copies of the shared chains (IsShardTopChain) are shown
// once, as the main table's; a copy that differs from the main table's
// where the two are the same by design (every one but KUBE-SERVICES and the
// stages only shards have) is listed in Unknown, as is anything a shard holds that
// nftproxy cannot decode. s is not changed; without shards it is returned
// as it is.
func (s *TableState) Merged() *TableState {
	if s == nil || len(s.Shards) == 0 {
		return s
	}
	out := *s
	out.Shards = nil
	out.Chains = slices.Clone(s.Chains)
	out.Unread = slices.Clone(s.Unread)
	out.Maps = make([]MapState, len(s.Maps))
	for i, m := range s.Maps {
		out.Maps[i] = MapState{Spec: m.Spec, Elements: slices.Clone(m.Elements)}
	}
	out.Sets = slices.Clone(s.Sets)
	out.SetNames = slices.Clone(s.SetNames)
	out.Unknown = slices.Clone(s.Unknown)
	out.Members = maps.Clone(s.Members)
	if out.Members == nil {
		out.Members = map[string][]SetMember{}
	}
	for _, sh := range s.Shards {
		out.addShard(sh)
	}
	return &out
}

// addShard adds shard sh to the merged state s (see Merged).
func (s *TableState) addShard(sh *TableState) {
	for _, c := range sh.Chains {
		if !IsShardTopChain(c.Name) {
			s.Chains = append(s.Chains, c)
			continue
		}
		if shardCopyDiffers(s, c) {
			s.Unknown = append(s.Unknown, fmt.Sprintf("chain %s of table %s differs from the main table's", c.Name, sh.Name))
		}
	}
	for _, m := range sh.Maps {
		if mm := s.Map(m.Spec.Name); mm != nil {
			mm.Elements = append(mm.Elements, m.Elements...)
		} else {
			s.Maps = append(s.Maps, m)
		}
	}
	s.Unread = append(s.Unread, sh.Unread...)
	s.Sets = append(s.Sets, sh.Sets...)
	s.SetNames = append(s.SetNames, sh.SetNames...)
	maps.Copy(s.Members, sh.Members)
	for _, u := range sh.Unknown {
		s.Unknown = append(s.Unknown, u+" (table "+sh.Name+")")
	}
	s.Unreached += sh.Unreached
	if sh.Dormant {
		s.Unknown = append(s.Unknown, "table "+sh.Name+" is dormant")
	}
}

// shardCopyDiffers reports whether a shard's copy c of a shared chain
// differs from the main table's chain of the same name, for the chains
// whose copies are the same by design.
func shardCopyDiffers(main *TableState, c *Chain) bool {
	switch c.Name {
	case ChainServices, ChainNATPreroutingClusterIPs, ChainNATOutputClusterIPs, ChainNATPreroutingNodePorts, ChainNATOutputNodePorts:
		return false
	}
	m := main.Chain(c.Name)
	return m == nil || !m.Equal(c)
}
