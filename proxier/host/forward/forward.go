package forward

import (
	"fmt"

	"github.com/nftproxy/nftproxy/nftgen"
)

// Chain is kube-proxy's forwarding chain, which the writers manage (its
// rules, and FORWARD's jump to it, are the generator's: nftgen.HostForward).
const Chain = nftgen.IptablesForwardChain

// Result says where the rules were written: "nft ip", "legacy ip6", ...
type Result struct {
	Written []string
}

// rule is one KUBE-FORWARD accept as both iptables backends write it: its
// comment and its one match, a mark or a conntrack state.
type rule struct {
	comment string
	mark    uint32 // -m mark --mark mark/mark, when not 0
	ctState uint32 // -m conntrack --ctstate, when not 0
}

// forwardRules is what both iptables backends write: the comment of
// FORWARD's jump to Chain, and Chain's accepts.
type forwardRules struct {
	jumpComment string
	accepts     []rule
}

// rulesOf translates the generator's forwarding rules (nftgen.HostForward)
// into what iptables writes: a jump to Chain with a comment, and accepts,
// each a comment, a mark or conntrack state match, and accept. Any other
// shape is an error, so that a rule the generator adds cannot be written
// half.
func rulesOf(hf nftgen.HostForward) (forwardRules, error) {
	if len(hf.Jump.Stmts) != 1 || hf.Jump.Stmts[0] != (nftgen.Verdict{Kind: nftgen.VerdictJump, Chain: Chain}) {
		return forwardRules{}, fmt.Errorf("forwarding jump %q: want one jump to %s", hf.Jump.Comment, Chain)
	}
	out := forwardRules{jumpComment: hf.Jump.Comment, accepts: make([]rule, 0, len(hf.Accepts))}
	for _, r := range hf.Accepts {
		x := rule{comment: r.Comment}
		if len(r.Stmts) != 2 || r.Stmts[1] != (nftgen.Verdict{Kind: nftgen.VerdictAccept}) {
			return forwardRules{}, fmt.Errorf("forwarding rule %q: want one match and accept", r.Comment)
		}
		switch s := r.Stmts[0].(type) {
		case nftgen.MatchMark:
			if s.Zero {
				return forwardRules{}, fmt.Errorf("forwarding rule %q: a negated mark match", r.Comment)
			}
			x.mark = s.Mask
		case nftgen.MatchCtState:
			if s.None {
				return forwardRules{}, fmt.Errorf("forwarding rule %q: a negated conntrack match", r.Comment)
			}
			x.ctState = s.Mask
		default:
			return forwardRules{}, fmt.Errorf("forwarding rule %q: no iptables match for %T", r.Comment, s)
		}
		out.accepts = append(out.accepts, x)
	}
	return out, nil
}

// needed reports whether a FORWARD chain can drop forwarded traffic: its
// policy is DROP, or a rule of its own (not one behind a jump, such as a
// CNI's chain) drops or rejects.
func needed(policyDrop bool, dropRules int) bool { return policyDrop || dropRules > 0 }

// conntrackInfo is struct xt_conntrack_mtinfo3 (revision 3, 168 bytes with
// its alignment) matching --ctstate of the states, as iptables writes it.
// xt_conntrack's state bits are nft's (nftgen.CtInvalid 1, CtEstablished
// 2, CtRelated 4, CtNew 8: XT_CONNTRACK_STATE_BIT(ctinfo) is 1 << (ctinfo
// + 1), as NF_CT_STATE_BIT is).
func conntrackInfo(states uint32) []byte {
	b := make([]byte, 168)
	const (
		matchFlagsOff = 146 // after 8 addresses, 2 u32 expires and 5 u16
		stateMaskOff  = 150
		flagState     = 1 << 0 // XT_CONNTRACK_STATE
	)
	putU16(b[matchFlagsOff:], flagState)
	putU16(b[stateMaskOff:], uint16(states))
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
