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

// FragmentCounts is what a Counter counts for one fragment, whose rules
// are all in the nat and filter tables, small enough to keep one per
// fragment of a large ruleset.
type FragmentCounts struct{ NAT, Filter int32 }

// Plus returns the sum of fc and o.
func (fc FragmentCounts) Plus(o FragmentCounts) FragmentCounts {
	return FragmentCounts{NAT: fc.NAT + o.NAT, Filter: fc.Filter + o.Filter}
}

// AddFragment adds sign times fc to c.
func (c Counts) AddFragment(fc FragmentCounts, sign int) {
	c["nat"] += sign * int(fc.NAT)
	c["filter"] += sign * int(fc.Filter)
}

// Counter counts the rules of the compat view of the fragments of one
// ruleset without rendering them. How a map element is shown can depend on
// the top level: where a rule counts the packets that match a map's keys
// (the localhost node port counter), kube-proxy writes each of that map's
// rules twice.
type Counter struct {
	// copies is the number of rules each element of a map stands for,
	// where it is not one.
	copies map[string]int
}

// NewCounter returns the Counter of the ruleset whose top level is top.
func NewCounter(top *nftgen.Fragment) Counter {
	c := Counter{copies: map[string]int{}}
	for _, ch := range top.Chains {
		for _, r := range ch.Rules {
			if m, ok := countedMap(r); ok {
				c.copies[m] = 2
			}
		}
	}
	return c
}

// countedMap returns the map a rule counts the keys of (see
// builder.countedCopy), if it is such a rule.
func countedMap(r nftgen.Rule) (string, bool) {
	var m string
	counted := false
	for _, s := range r.Stmts {
		switch s := s.(type) {
		case nftgen.ProtoPortIn:
			m = s.Map
		case nftgen.CounterRef:
			counted = true
		}
	}
	return m, m != "" && counted
}

// Compact is Fragment as FragmentCounts.
func (c Counter) Compact(f *nftgen.Fragment) FragmentCounts {
	n := c.Fragment(f)
	return FragmentCounts{NAT: int32(n["nat"]), Filter: int32(n["filter"])}
}

// mapTable is the iptables table whose chain a map's elements stand for.
func mapTable(m string) string {
	if m == nftgen.MapServiceIPs || m == nftgen.MapServiceNodePorts {
		return "nat"
	}
	return "filter"
}

// Fragment returns the number of iptables rules a fragment stands for,
// without rendering them: one per rule, one per map element (one per named
// port for a health check node port, two where the map's keys are counted),
// and one per numgen target. The counts of all fragments of a ruleset add
// up to the -A lines of its compat view, so the rules-count metric can be
// kept at sync time from the fragments that changed.
func (cn Counter) Fragment(f *nftgen.Fragment) Counts {
	c := Counts{}
	if f == nil {
		return c
	}
	for m, els := range f.Elements {
		if m != nftgen.MapHealthCheckNodePorts {
			c[mapTable(m)] += len(els) * max(cn.copies[m], 1)
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
		case nftgen.DispatchMap, nftgen.ProtoPortMap, nftgen.ProtoPortIn:
			return 0 // counted by its elements
		case nftgen.NumgenVmap:
			return len(s.Targets)
		}
	}
	return 1
}
