package nftgen

// RuleCounts are the numbers of -A rules per iptables table ("nat", "filter")
// that the compat view of a ruleset shows.
type RuleCounts map[string]int

// Add adds o to c.
func (c RuleCounts) Add(o RuleCounts) {
	for t, n := range o {
		c[t] += n
	}
}

// Sub subtracts o from c.
func (c RuleCounts) Sub(o RuleCounts) {
	for t, n := range o {
		c[t] -= n
	}
}

// FragmentRuleCounts is what a RuleCounter counts for one fragment, whose rules
// are all in the nat and filter tables, small enough to keep one per
// fragment of a large ruleset.
type FragmentRuleCounts struct{ NAT, Filter int32 }

// Plus returns the sum of fc and o.
func (fc FragmentRuleCounts) Plus(o FragmentRuleCounts) FragmentRuleCounts {
	return FragmentRuleCounts{NAT: fc.NAT + o.NAT, Filter: fc.Filter + o.Filter}
}

// AddFragment adds sign times fc to c.
func (c RuleCounts) AddFragment(fc FragmentRuleCounts, sign int) {
	c["nat"] += sign * int(fc.NAT)
	c["filter"] += sign * int(fc.Filter)
}

// RuleCounter counts the rules of the compat view of the fragments of one
// ruleset without rendering them. How a map element is shown can depend on
// the top level: where a rule counts the packets that match a map's keys
// (the localhost node port counter), kube-proxy writes each of that map's
// rules twice.
type RuleCounter struct {
	// copies is the number of rules each element of a map stands for,
	// where it is not one.
	copies map[string]int
}

// NewRuleCounter returns the RuleCounter of the ruleset whose top level is top.
func NewRuleCounter(top *Fragment) RuleCounter {
	c := RuleCounter{copies: map[string]int{}}
	for _, ch := range top.Chains {
		for _, r := range ch.Rules {
			if m, ok := CountedMap(r); ok {
				c.copies[m] = 2
			}
		}
	}
	return c
}

// Compact is Fragment as FragmentRuleCounts.
func (c RuleCounter) Compact(f *Fragment) FragmentRuleCounts {
	n := c.Fragment(f)
	return FragmentRuleCounts{NAT: int32(n["nat"]), Filter: int32(n["filter"])}
}

// Fragment returns the number of iptables rules a fragment stands for,
// without rendering them: one per rule, one per map element (one per named
// port for a health check node port, two where the map's keys are counted),
// and one per numgen target. It reads what the generator recorded (each
// chain's iptables table, the health check rules), never names or comments,
// so it counts generated fragments only. The counts of all fragments of a ruleset add
// up to the -A lines of its compat view, so the rules-count metric can be
// kept at sync time from the fragments that changed.
func (cn RuleCounter) Fragment(f *Fragment) RuleCounts {
	c := RuleCounts{}
	if f == nil {
		return c
	}
	for m, els := range f.Elements {
		table, _ := MapRoleOf(m)
		if m == MapHealthCheckNodePorts && len(els) > 0 {
			// A port's fragment has at most one, which the generator
			// counted (one rule per port it names).
			c[table] += f.HealthCheckRules
			continue
		}
		c[table] += len(els) * max(cn.copies[m], 1)
	}
	for _, ch := range f.Chains {
		if ch.Compat == NoIptablesTable {
			continue // the reject chain stands for no iptables rule
		}
		for _, r := range ch.Rules {
			c[ch.Compat.String()] += ruleCount(r)
		}
	}
	return c
}

func ruleCount(r Rule) int {
	if _, ok := AffinityRecord(r); ok {
		return 0 // part of the DNAT rule that follows
	}
	for _, s := range r.Stmts {
		switch s := s.(type) {
		case DispatchMap, ProtoPortMap, ProtoPortIn:
			return 0 // counted by its elements
		case NumgenVmap:
			return len(s.Targets)
		}
	}
	return 1
}
