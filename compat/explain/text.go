package explain

import (
	"fmt"
	"io"
	"strings"
)

var vantageText = map[Vantage]string{
	FromPod:      "from a pod on this node",
	FromNode:     "from the node itself",
	FromExternal: "from another host",
}

// WriteText prints e for an operator: a summary of the outcomes, then each
// path step by step with the nftables rule and its iptables-mode form.
func WriteText(out io.Writer, e *Explanation) {
	fmt.Fprintf(out, "%s %s -> %s %s (table %s nftproxy)\n", e.Protocol, e.Src, e.Dst, vantageText[e.From], e.Family)
	if e.NoTable {
		fmt.Fprintln(out, "There is no nftproxy table in this family: nftproxy changes nothing for this packet.")
	}
	for _, p := range e.Paths {
		fmt.Fprintf(out, "  %s\n", summary(p))
	}
	if e.AffinityNotWalked > 0 {
		fmt.Fprintf(out, "  (%d more affinity cases not walked: explain --all, or all=1, walks each)\n", e.AffinityNotWalked)
	}
	for i, p := range e.Paths {
		fmt.Fprintf(out, "\npath %d: %s\n", i+1, summary(p))
		for _, s := range p.Steps {
			where := fmt.Sprintf("%s rule %d", s.Chain, s.Rule)
			if s.Element != "" {
				where += " [" + s.Element + "]"
			}
			chance := ""
			if s.Chance != "" {
				chance = " (" + s.Chance + ")"
			}
			fmt.Fprintf(out, "  %-11s %s: %s%s\n", s.Hook, where, s.Did, chance)
			fmt.Fprintf(out, "              nft       %s\n", s.NFT)
			for _, l := range s.Iptables {
				fmt.Fprintf(out, "              iptables  %s\n", l)
			}
		}
		if p.Masquerade && p.MasqueradeReason != "" {
			fmt.Fprintf(out, "  masquerade: %s\n", p.MasqueradeReason)
		}
	}
}

// summary is one line: the probability, the verdict and what it means.
func summary(p Path) string {
	var b strings.Builder
	switch {
	case p.AffinityLeft != "":
		fmt.Fprintf(&b, "the client is in @%s (%s left): ", p.Affinity, p.AffinityLeft)
	case p.Affinity != "":
		fmt.Fprintf(&b, "if the client is in @%s: ", p.Affinity)
	default:
		fmt.Fprintf(&b, "%5.1f%%: ", 100*p.Probability)
	}
	switch p.Verdict {
	case Accepted:
		switch {
		case p.Endpoint != "":
			fmt.Fprintf(&b, "DNAT to %s (%s)", p.Endpoint, p.EndpointChain)
		case p.Delivered == "local":
			b.WriteString("accepted, delivered to the node unchanged")
		default:
			b.WriteString("accepted, routed on unchanged")
		}
		if p.Masquerade {
			b.WriteString(", masqueraded")
		} else if p.Endpoint != "" {
			b.WriteString(", source kept")
		}
	case Dropped:
		b.WriteString("dropped (the client times out)")
	case Rejected:
		b.WriteString("rejected (the client is refused)")
	case More:
		fmt.Fprintf(&b, "%d more endpoints of the same pick, not walked (explain --all, or all=1, walks each)", p.More)
	default:
		b.WriteString("unknown: the walk stopped")
	}
	if p.Cause != "" {
		fmt.Fprintf(&b, ": %s", p.Cause)
	}
	return b.String()
}
