package nftgen

import "fmt"

// The statements below are those of the handover table (HandoverTable):
// look-ups in sets and maps that the kernel fills from nftproxy's live
// tables, rather than the per-Service chains of the main table.

// DestIn matches when "daddr . l4proto . dport" is an element of the named
// set ("ip daddr . meta l4proto . th dport @set").
type DestIn struct{ Set string }

func (s DestIn) nft(f Family) string {
	return fmt.Sprintf("%s daddr . meta l4proto . th dport @%s", f, s.Set)
}

// AddrIn matches when the source or destination address is an element of
// the named set ("ip daddr @set").
type AddrIn struct {
	Dir AddrDir
	Set string
}

func (s AddrIn) nft(f Family) string { return fmt.Sprintf("%s %s @%s", f, s.Dir, s.Set) }

// BucketDNAT DNATs to the "address . port" the named map holds for the
// packet's destination ("daddr . l4proto . dport", or with NodePort
// "l4proto . dport") and a random bucket of Buckets, having set the mark
// bits MarkBits (KUBE-MARK-MASQ's) so that the connection is masqueraded.
// The map is looked up first: a packet whose key it does not hold is
// neither marked nor DNATed, and the rule ends.
type BucketDNAT struct {
	Map      string
	NodePort bool
	Buckets  uint32
	MarkBits uint32
}

func (s BucketDNAT) nft(f Family) string {
	key := "meta l4proto . th dport"
	if !s.NodePort {
		key = fmt.Sprintf("%s daddr . %s", f, key)
	}
	return fmt.Sprintf("%s dnat %s to %s . numgen random mod %d map @%s", MarkOr{Bits: s.MarkBits}.nft(f), f, key, s.Buckets, s.Map)
}
