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
