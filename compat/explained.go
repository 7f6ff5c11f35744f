package compat

import (
	"regexp"
	"strings"

	"github.com/nftproxy/nftproxy/nftgen"
)

// KindExplained marks a Difference that is not drift: nftproxy differs
// from kube-proxy there by design, and Note says why.
const KindExplained = "explained"

// Drift reports whether d is a real difference (not one explained by
// nftproxy's design).
func (d Difference) Drift() bool { return d.Kind != KindExplained }

// DriftCount returns how many of diffs are drift.
func DriftCount(diffs []Difference) int {
	n := 0
	for _, d := range diffs {
		if d.Drift() {
			n++
		}
	}
	return n
}

// shadowedNote explains a destination named more than once.
const shadowedNote = "the destination is named more than once (twice in one Service, or by several Services); " +
	"kube-proxy writes a rule for each and only the first can match, nftproxy's map holds one element per destination"

// destinationRe takes the destination of a dispatch rule: address,
// protocol and port.
var destinationRe = regexp.MustCompile(`^(?:-d (\S+) )?-p (\S+) .*--dport (\d+)`)

// destinationOf returns a dispatch rule's destination, or "".
func destinationOf(rule string) string {
	m := destinationRe.FindStringSubmatch(rule)
	if m == nil {
		return ""
	}
	return strings.Join(m[1:], " ")
}

// shadowed splits the legacy rules missing from a dispatch chain into those
// that are drift and those whose destination a rule of current serves: the
// same destination named again, where kube-proxy's later rule can never
// match.
func shadowed(missing, current []string) (drift, explained []string) {
	served := map[string]bool{}
	for _, r := range current {
		if d := destinationOf(r); d != "" {
			served[d] = true
		}
	}
	for _, r := range missing {
		if d := destinationOf(r); d != "" && served[d] {
			explained = append(explained, r)
			continue
		}
		drift = append(drift, r)
	}
	return drift, explained
}

// failClosedNote explains a firewall kube-proxy would not write.
const failClosedNote = "the Service's loadBalancerSourceRanges could not be parsed; kube-proxy writes no firewall " +
	"and accepts every source, nftproxy writes one that accepts none (fails closed)"

// explainFailClosed marks as explained the differences that come from a
// firewall nftproxy wrote for a Service whose source ranges did not parse:
// a KUBE-FW- chain that only kube-proxy lacks and that lets no source on,
// the rules that lead to it and KUBE-PROXY-FIREWALL's drops for it.
func explainFailClosed(diffs []Difference, current Save) {
	nat := current["nat"]
	if nat == nil {
		return
	}
	closed := map[string]bool{}
	for _, d := range diffs {
		if d.Kind != "extra" || d.Table != "nat" || !strings.HasPrefix(d.Chain, nftgen.PrefixFirewall) || closed[d.Chain] {
			continue
		}
		allows := false
		for _, r := range nat.Rules[d.Chain] {
			allows = allows || strings.Contains(r, "-j ")
		}
		if !allows {
			closed[d.Chain] = true
		}
	}
	if len(closed) == 0 {
		return
	}
	for i := range diffs {
		d := &diffs[i]
		for fw := range closed {
			if d.Chain == fw || strings.Contains(d.Current, "-j "+fw) || strings.Contains(d.Current, "not accepted by "+fw) {
				d.Kind, d.Note = KindExplained, failClosedNote
			}
		}
	}
}
