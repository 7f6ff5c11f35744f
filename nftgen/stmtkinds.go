package nftgen

import "net/netip"

// StmtKinds returns one statement of every kind nftproxy writes (two of a
// kind whose variants encode differently), the closed list of Stmt
// implementations (Unknown, which only the decoder makes, last). Every layer that switches on a statement's kind (the
// kernel's encoder and decoder, the compat view, explain) is tested with
// each of them, and a test fails when a type that implements Stmt is
// missing here: a new kind cannot reach a `default:` unnoticed.
func StmtKinds() []Stmt {
	ep := netip.MustParseAddrPort("10.244.0.2:8080")
	return []Stmt{
		MatchProto{Proto: ProtoTCP},
		MatchAddr{Dir: Saddr, Prefix: netip.MustParsePrefix("10.244.0.0/16"), Negate: true},
		DestBits{Mask: 63, Value: 5},
		MatchIifname{Name: "cni0"},
		MatchDport{Port: 80},
		MatchMark{Mask: 0x4000},
		MatchFibLocal{Dir: Daddr},
		MatchCtState{Mask: CtNew},
		MatchCtStatusDNAT{},
		MatchRandom{Mod: 2},
		DispatchMap{Map: MapServiceIPs},
		ProtoPortMap{Map: MapServiceNodePorts},
		ProtoPortIn{Map: MapServiceNodePorts},
		NumgenVmap{Map: EndpointMapName("KUBE-SVC-AAAAAAAAAAAAAAAA"), Targets: []string{"KUBE-SEP-AAAAAAAAAAAAAAAA", "KUBE-SEP-BBBBBBBBBBBBBBBB"}, Comments: []string{"ns/a:p -> 10.244.0.2:8080", "ns/a:p -> 10.244.0.3:8080"}},
		AffinityCheck{Set: PrefixAffinity + "KUBE-SEP-AAAAAAAAAAAAAAAA", Chain: "KUBE-SEP-AAAAAAAAAAAAAAAA"},
		AffinityUpdate{Set: PrefixAffinity + "KUBE-SVC-AAAAAAAAAAAAAAAA", Endpoint: ep},
		CounterRef{Name: "ct_state_invalid_dropped_pkts"},
		MarkOr{Bits: 0x4000},
		MarkXor{Bits: 0x4000},
		DNAT{Addr: ep.Addr(), Port: ep.Port()},
		Masquerade{FullyRandom: true},
		Reject{},
		Verdict{Kind: VerdictJump, Chain: "KUBE-SVC-AAAAAAAAAAAAAAAA"},
		DestIn{Set: HandoverServiceIPs},
		AddrIn{Dir: Daddr, Set: HandoverNodePortAddresses},
		BucketDNAT{Map: HandoverDNATIPs, Buckets: HandoverBuckets, MarkBits: 0x4000},
		BucketDNAT{Map: HandoverDNATNodePorts, NodePort: true, Buckets: HandoverBuckets, MarkBits: 0x4000},
		Unknown{Desc: "an expression of another program"},
	}
}
