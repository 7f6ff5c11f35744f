// Package forward keeps forwarded Service traffic alive on hosts whose
// iptables FORWARD chain drops (Docker sets its policy to DROP; some
// distributions do). nftproxy's own table cannot override a drop in
// another table, so, as kube-proxy's iptables mode does, it writes
// kube-proxy's KUBE-FORWARD chain (accept what is marked for masquerade,
// and what conntrack knows as established or related) and the jump to it
// at the head of FORWARD, in the filter table of each iptables backend in
// use (iptables-nft's nftables tables, legacy x_tables), both families,
// through netlink and setsockopt alone. They are exactly kube-proxy's
// rules: kube-proxy, started again (a rollback), adopts and rewrites
// them, and `nftproxy --cleanup` removes them with kube-proxy's.
package forward

import "fmt"

// Names and comments of kube-proxy's forwarding rules.
const (
	Chain            = "KUBE-FORWARD"
	JumpComment      = "kubernetes forwarding rules"
	AcceptComment    = "kubernetes forwarding rules"
	ConntrackComment = "kubernetes forwarding conntrack rule"
)

// Result says where the rules were written: "nft ip", "legacy ip6", ...
type Result struct {
	Written []string
}

// needed reports whether a FORWARD chain can drop forwarded traffic: its
// policy is DROP, or a rule of its own (not one behind a jump, such as a
// CNI's chain) drops or rejects.
func needed(policyDrop bool, dropRules int) bool { return policyDrop || dropRules > 0 }

// conntrackInfo is struct xt_conntrack_mtinfo3 (revision 3, 168 bytes with
// its alignment) matching --ctstate RELATED,ESTABLISHED, as iptables
// writes it.
func conntrackInfo() []byte {
	b := make([]byte, 168)
	const (
		matchFlagsOff = 146 // after 8 addresses, 2 u32 expires and 5 u16
		stateMaskOff  = 150
		flagState     = 1 << 0       // XT_CONNTRACK_STATE
		established   = 1 << (0 + 1) // XT_CONNTRACK_STATE_BIT(IP_CT_ESTABLISHED)
		related       = 1 << (1 + 1) // XT_CONNTRACK_STATE_BIT(IP_CT_RELATED)
	)
	putU16(b[matchFlagsOff:], flagState)
	putU16(b[stateMaskOff:], established|related)
	return b
}

// commentInfo is struct xt_comment_info: the comment, NUL padded to 256
// bytes.
func commentInfo(c string) ([]byte, error) {
	if len(c) > 255 {
		return nil, fmt.Errorf("comment %q is longer than 255 bytes", c)
	}
	b := make([]byte, 256)
	copy(b, c)
	return b, nil
}

// markInfo is struct xt_mark_mtinfo1 (revision 1) matching --mark
// bit/bit, aligned to 16 bytes.
func markInfo(bit uint32) []byte {
	b := make([]byte, 16)
	putU32(b, bit)
	putU32(b[4:], bit)
	return b
}
