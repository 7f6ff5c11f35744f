package compat

import (
	"strings"

	"github.com/nftproxy/nftproxy/nftgen"
)

// Counts are the numbers of -A rules per iptables table ("nat", "filter")
// that the compat view of a ruleset shows.
type Counts map[string]int

// Add adds o to c.
func (c Counts) Add(o Counts) {
	for t, n := range o {
		c[t] += n
	}
}

// Sub subtracts o from c.
func (c Counts) Sub(o Counts) {
	for t, n := range o {
		c[t] -= n
	}
}

// FragmentCounts is what CountFragment returns for one fragment, whose
// rules are all in the nat and filter tables, small enough to keep one per
// fragment of a large ruleset.
type FragmentCounts struct{ NAT, Filter int32 }

// CountFragmentCompact is CountFragment as FragmentCounts.
func CountFragmentCompact(f *nftgen.Fragment) FragmentCounts {
	c := CountFragment(f)
	return FragmentCounts{NAT: int32(c["nat"]), Filter: int32(c["filter"])}
}

// Plus returns the sum of fc and o.
func (fc FragmentCounts) Plus(o FragmentCounts) FragmentCounts {
	return FragmentCounts{NAT: fc.NAT + o.NAT, Filter: fc.Filter + o.Filter}
}

// AddFragment adds sign times fc to c.
func (c Counts) AddFragment(fc FragmentCounts, sign int) {
	c["nat"] += sign * int(fc.NAT)
	c["filter"] += sign * int(fc.Filter)
}

// mapTable is the iptables table whose chain a map's elements stand for.
func mapTable(m string) string {
	if m == nftgen.MapServiceIPs || m == nftgen.MapServiceNodePorts {
		return "nat"
	}
	return "filter"
}

// CountFragment returns the number of iptables rules a fragment stands
// for, without rendering them: one per rule, one per map element (one per
// named port for a health check node port), and one per numgen target. The counts of all fragments of a ruleset add up to
// the -A lines of its compat view, so the rules-count metric can be kept at
// sync time from the fragments that changed.
func CountFragment(f *nftgen.Fragment) Counts {
	c := Counts{}
	if f == nil {
		return c
	}
	for m, els := range f.Elements {
		if m != nftgen.MapHealthCheckNodePorts {
			c[mapTable(m)] += len(els)
			continue
		}
		for _, e := range els {
			c[mapTable(m)] += len(nftgen.SplitHealthCheckComment(e.Comment))
		}
	}
	for _, ch := range f.Chains {
		table := "nat"
		if strings.HasPrefix(ch.Name, "filter-") {
			table = "filter"
		}
		if ch.Name == nftgen.ChainReject {
			continue
		}
		for _, r := range ch.Rules {
			c[table] += ruleCount(r)
		}
	}
	return c
}

func ruleCount(r nftgen.Rule) int {
	for _, s := range r.Stmts {
		switch s := s.(type) {
		case nftgen.DispatchMap, nftgen.ProtoPortMap:
			return 0 // counted by its elements
		case nftgen.NumgenVmap:
			return len(s.Targets)
		}
	}
	return 1
}
