package compat

import (
	"fmt"
	"net/netip"
	"strings"
)

// iptRule is one iptables rule in the canonical order iptables-save prints:
// source and destination, protocol, then the matches in the order
// kube-proxy wrote them, then the target.
type iptRule struct {
	chain    string
	src, dst string
	notSrc   bool
	notDst   bool
	// in is the input interface ("-i cbr0", "-i veth+"), notIn its "!".
	in      string
	notIn   bool
	proto   string
	matches []string
	target  string
}

func (r *iptRule) match(m string) { r.matches = append(r.matches, m) }

func (r *iptRule) comment(c string) {
	if c != "" {
		r.match("-m comment --comment " + quote(c))
	}
}

// quote quotes a comment as iptables-save does: always, escaping quotes
// and backslashes.
func quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' || s[i] == '"' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// String renders the rule without the "-A CHAIN" prefix.
func (r *iptRule) String() string {
	n := len(r.src) + len(r.dst) + len(r.in) + len(r.proto) + len(r.target) + 16
	for _, m := range r.matches {
		n += len(m) + 1
	}
	var b strings.Builder
	b.Grow(n)
	word := func(s string) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s)
	}
	if r.src != "" {
		if r.notSrc {
			word("!")
		}
		word("-s")
		word(r.src)
	}
	if r.dst != "" {
		if r.notDst {
			word("!")
		}
		word("-d")
		word(r.dst)
	}
	if r.in != "" {
		if r.notIn {
			word("!")
		}
		word("-i")
		word(r.in)
	}
	if r.proto != "" {
		word("-p")
		word(r.proto)
	}
	for _, m := range r.matches {
		word(m)
	}
	if r.target != "" {
		word(r.target)
	}
	return b.String()
}

// prefixString prints a prefix as iptables does: always with a length.
func prefixString(p netip.Prefix) string {
	return p.Masked().String()
}

func hostString(a netip.Addr) string {
	return netip.PrefixFrom(a, a.BitLen()).String()
}

// probability returns the probability kube-proxy writes for the i-th of n
// endpoints ("%0.10f" of 1/(n-i)) as iptables-save prints it back: the
// kernel keeps round(2^31 * p) and iptables prints it with %.11f.
func probability(remaining int) string {
	var p float64
	fmt.Sscanf(fmt.Sprintf("%0.10f", 1.0/float64(remaining)), "%g", &p)
	stored := uint32(p*0x80000000 + 0.5)
	return fmt.Sprintf("%.11f", float64(stored)/0x80000000)
}

// markString prints a mark value as iptables-save does: lower-case hex
// without padding.
func markString(v uint32) string { return fmt.Sprintf("0x%x", v) }
