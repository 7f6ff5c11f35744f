package nftgen

import "github.com/google/nftables/userdata"

// appendComment encodes a rule comment as the userdata TLV that nft and
// iptables-nft use, so that `nft list` shows it.
func appendComment(b []byte, comment string) []byte {
	return userdata.AppendString(b, userdata.TypeComment, comment)
}
