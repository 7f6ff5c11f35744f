package nftgen

import "iter"

// ChunkOps is the number of operations of one transaction of a streamed
// cold sync: about 7 MB of netlink messages, so that neither nftproxy nor
// the kernel holds the whole ruleset as messages at once.
const ChunkOps = 32768

// PlanCold returns the transactions that build desired in a table that does
// not exist yet, in chunks of about maxOps operations, each made only when
// the one before has been taken (so that only one chunk's operations exist
// at a time). The table gets no
// base chain until the last transaction, so nothing of it is hooked up, no
// packet sees it and the kernel validates nothing while it is being built;
// the last, small transaction adds the base chains and their rules, and the
// kernel validates the whole graph once. A Service's chains, sets, rules and
// map elements stay in one transaction. If a chunk fails, the table is left
// unhooked: the next full sync deletes it and starts again (see Hooked).
func PlanCold(desired *Ruleset, maxOps int) iter.Seq[*Transaction] {
	return func(yield func(*Transaction) bool) {
		cur := &Transaction{Family: desired.Family}
		cur.Ops = append(cur.Ops, Op{Kind: OpAddTable})
		for i := range desired.Maps {
			cur.Ops = append(cur.Ops, Op{Kind: OpAddMap, Name: desired.Maps[i].Name, Map: &desired.Maps[i]})
		}
		var base []*Chain
		regular := &Fragment{Sets: desired.Top.Sets, Elements: desired.Top.Elements}
		for _, c := range desired.Top.Chains {
			if c.Base != nil {
				base = append(base, c)
			} else {
				regular.Chains = append(regular.Chains, c)
			}
		}
		addFragment(cur, desired.Maps, regular)
		for _, k := range desired.serviceKeys() {
			if len(cur.Ops) >= maxOps {
				if !yield(cur) {
					return
				}
				cur = &Transaction{Family: desired.Family}
			}
			addFragment(cur, desired.Maps, desired.Services[k])
		}
		if !yield(cur) {
			return
		}
		cur = &Transaction{Family: desired.Family}
		for _, c := range base {
			cur.Ops = append(cur.Ops, Op{Kind: OpAddChain, Name: c.Name, Base: c.Base})
		}
		for _, c := range base {
			addRules(cur, c)
		}
		yield(cur)
	}
}

// addFragment appends the operations that create f: chains before the rules
// that jump to them, sets before the rules that use them, map elements last.
func addFragment(tx *Transaction, maps []MapSpec, f *Fragment) {
	for _, c := range f.Chains {
		tx.Ops = append(tx.Ops, Op{Kind: OpAddChain, Name: c.Name})
	}
	for i := range f.Sets {
		tx.Ops = append(tx.Ops, Op{Kind: OpAddSet, Name: f.Sets[i].Name, Set: &f.Sets[i]})
	}
	for _, c := range f.Chains {
		addRules(tx, c)
	}
	for _, m := range maps {
		for i := range f.Elements[m.Name] {
			tx.Ops = append(tx.Ops, Op{Kind: OpAddElement, Name: m.Name, Element: &f.Elements[m.Name][i]})
		}
	}
}

// Hooked reports whether the table that inv describes has any of desired's
// base chains, that is, whether packets can reach it. A table without them
// is one whose streamed cold sync did not finish.
func (inv *Inventory) Hooked(desired *Ruleset) bool {
	if inv == nil {
		return false
	}
	have := make(map[string]bool, len(inv.Chains))
	for _, c := range inv.Chains {
		have[c] = true
	}
	for _, c := range desired.Top.Chains {
		if c.Base != nil && have[c.Name] {
			return true
		}
	}
	return false
}
