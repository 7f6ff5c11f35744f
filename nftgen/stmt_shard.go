package nftgen

import (
	"fmt"
	"net/netip"
)

// DestBits matches when the last 32 bits of the destination address,
// masked with Mask, equal Value: the guard of a shard table's cluster IP
// stage (see ShardTop), which tells from the packet alone whether the
// cluster IP it is sent to can be in this shard. It is a payload load, a
// bitwise and a compare, all on the kernel's inline fast path, so a
// connection pays tens of nanoseconds for each shard before its own (the
// base chain and the compare) rather than a map look-up.
type DestBits struct{ Mask, Value uint32 }

func (s DestBits) nft(f Family) string {
	if f == FamilyIPv4 {
		return fmt.Sprintf("ip daddr & %s == %s", addr32(s.Mask), addr32(s.Value))
	}
	return fmt.Sprintf("@nh,288,32 & %#x == %#x", s.Mask, s.Value)
}

// Matches reports whether a, an address of either family, passes the guard.
func (s DestBits) Matches(a netip.Addr) bool { return AddrLow32(a)&s.Mask == s.Value }

// AddrLow32 returns the last 32 bits of an address (all of an IPv4
// address), the part of a cluster IP that places its Service in a shard.
func AddrLow32(a netip.Addr) uint32 {
	b := a.As16()
	return uint32(b[12])<<24 | uint32(b[13])<<16 | uint32(b[14])<<8 | uint32(b[15])
}

// addr32 prints v as a dotted IPv4 address.
func addr32(v uint32) string {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
}
