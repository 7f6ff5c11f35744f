package cleanup

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/nftproxy/nftproxy/proxier/host/xtables"
)

// removeKubeProxy rewrites the blob of the x_tables table named table
// without what PlanTable removes. It returns the new blob, the new table
// info and what it removed; an unchanged table returns a nil blob.
func removeKubeProxy(table string, blob []byte, info xtables.Info, l xtables.Layout) ([]byte, xtables.Info, Result, error) {
	entries, err := xtables.ParseEntries(blob, l)
	if err != nil {
		return nil, info, Result{}, err
	}
	t := chainsOf(entries, info)
	plan := PlanTable(table, t.chains)
	remove, res := t.marked(entries, plan)
	if res.Chains == 0 && res.Rules == 0 {
		return nil, info, res, nil
	}
	newBlob, ni, err := without(entries, remove, info, l)
	return newBlob, ni, res, err
}

// entryChains is a table's entries seen as chains of rules.
type entryChains struct {
	chains []Chain
	// chainOf is each entry's index into chains, -1 for chain heads;
	// position is the entry's rule index in its chain.
	chainOf, position []int
}

// chainsOf groups a table's entries into its chains: a built-in chain
// starts at its hook entry, a user chain at the entry after its ERROR
// head. A rule that jumps to a user chain names it.
func chainsOf(entries []xtables.Entry, info xtables.Info) entryChains {
	t := entryChains{chainOf: make([]int, len(entries)), position: make([]int, len(entries))}
	startOf := map[uint32]string{} // first entry of a user chain
	current := -1
	for i, e := range entries {
		if e.Target == "ERROR" {
			current = -1
			if e.Chain != "ERROR" {
				t.chains = append(t.chains, Chain{Name: e.Chain})
				current = len(t.chains) - 1
				if i+1 < len(entries) {
					startOf[entries[i+1].Off] = e.Chain
				}
			}
			t.chainOf[i] = -1
			continue
		}
		for h := 0; h < xtables.Hooks; h++ {
			if info.ValidHooks&(1<<h) != 0 && info.HookEntry[h] == e.Off {
				t.chains = append(t.chains, Chain{Name: xtables.BuiltinChains[h], Base: true})
				current = len(t.chains) - 1
				break
			}
		}
		t.chainOf[i] = current
	}
	for i, e := range entries {
		if c := t.chainOf[i]; c >= 0 {
			r := Rule{Comment: e.Comment}
			if e.Target == "" && e.Verdict >= 0 {
				r.Jump = startOf[uint32(e.Verdict)]
			}
			t.position[i] = len(t.chains[c].Rules)
			t.chains[c].Rules = append(t.chains[c].Rules, r)
		}
	}
	return t
}

// marked returns which entries plan removes (whole chains, heads
// included, and single rules) and counts them.
func (t entryChains) marked(entries []xtables.Entry, plan Plan) ([]bool, Result) {
	res := Result{Kept: plan.Kept}
	removeChain := map[string]bool{}
	for _, name := range plan.Chains {
		removeChain[name] = true
	}
	remove := make([]bool, len(entries))
	for i, e := range entries {
		if e.Target == "ERROR" {
			remove[i] = removeChain[e.Chain]
			if remove[i] {
				res.Chains++
			}
			continue
		}
		c := t.chainOf[i]
		if c < 0 {
			continue
		}
		if removeChain[t.chains[c].Name] || slices.Contains(plan.Rules[t.chains[c].Name], t.position[i]) {
			remove[i] = true
			res.Rules++
		}
	}
	return remove, res
}

// without returns the table's blob and info without the removed entries:
// jumps, hook entries and underflows point at the kept entries' new
// offsets.
func without(entries []xtables.Entry, remove []bool, info xtables.Info, l xtables.Layout) ([]byte, xtables.Info, error) {
	newOff := map[uint32]uint32{}
	var out bytes.Buffer
	kept := 0
	for i, e := range entries {
		if remove[i] {
			continue
		}
		newOff[e.Off] = uint32(out.Len())
		out.Write(e.Raw)
		kept++
	}
	newBlob := out.Bytes()
	for i, e := range entries {
		if remove[i] || e.Target != "" || e.Verdict < 0 {
			continue
		}
		to, ok := newOff[uint32(e.Verdict)]
		if !ok {
			return nil, info, fmt.Errorf("a kept rule jumps to a removed entry at %d", e.Verdict)
		}
		tOff := int(binary.NativeEndian.Uint16(e.Raw[l.TargetOffset:]))
		binary.NativeEndian.PutUint32(newBlob[newOff[e.Off]+uint32(tOff)+xtables.TargetHeader:], to)
	}
	// A hook whose first rule was removed now starts at the next kept
	// entry of its chain; the policy entry (underflow) is always kept.
	firstKept := func(off uint32) (uint32, bool) {
		for i, e := range entries {
			if e.Off < off {
				continue
			}
			for j := i; j < len(entries); j++ {
				if !remove[j] {
					return newOff[entries[j].Off], true
				}
			}
			break
		}
		return 0, false
	}
	ni := info
	for h := 0; h < xtables.Hooks; h++ {
		if info.ValidHooks&(1<<h) == 0 {
			continue
		}
		var ok1, ok2 bool
		ni.HookEntry[h], ok1 = firstKept(info.HookEntry[h])
		ni.Underflow[h], ok2 = newOff[info.Underflow[h]]
		if !ok1 || !ok2 {
			return nil, info, fmt.Errorf("hook %d lost its entry", h)
		}
	}
	ni.NumEntries, ni.Size = uint32(kept), uint32(len(newBlob))
	return newBlob, ni, nil
}
