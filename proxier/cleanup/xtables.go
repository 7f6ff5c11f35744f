package cleanup

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/nftproxy/nftproxy/proxier/xtables"
)

// removeKubeProxy rewrites the blob of the x_tables table named table
// without what PlanTable removes. It returns the new blob, the new table
// info and what it removed; an unchanged table returns a nil blob.
func removeKubeProxy(table string, blob []byte, info xtables.Info, l xtables.Layout) ([]byte, xtables.Info, Result, error) {
	entries, err := xtables.ParseEntries(blob, l)
	if err != nil {
		return nil, info, Result{}, err
	}
	// Which chain each entry belongs to: a built-in chain starts at its
	// hook entry, a user chain at the entry after its ERROR head.
	chainOf := make([]int, len(entries)) // index into chains, -1 for heads
	startOf := map[uint32]string{}       // first entry of a user chain
	var chains []Chain
	current := -1
	for i, e := range entries {
		if e.Target == "ERROR" {
			current = -1
			if e.Chain != "ERROR" {
				chains = append(chains, Chain{Name: e.Chain})
				current = len(chains) - 1
				if i+1 < len(entries) {
					startOf[entries[i+1].Off] = e.Chain
				}
			}
			chainOf[i] = -1
			continue
		}
		for h := 0; h < xtables.Hooks; h++ {
			if info.ValidHooks&(1<<h) != 0 && info.HookEntry[h] == e.Off {
				chains = append(chains, Chain{Name: xtables.BuiltinChains[h], Base: true})
				current = len(chains) - 1
				break
			}
		}
		chainOf[i] = current
	}
	position := make([]int, len(entries)) // the entry's rule index in its chain
	for i, e := range entries {
		if c := chainOf[i]; c >= 0 {
			r := Rule{Comment: e.Comment}
			if e.Target == "" && e.Verdict >= 0 {
				r.Jump = startOf[uint32(e.Verdict)]
			}
			position[i] = len(chains[c].Rules)
			chains[c].Rules = append(chains[c].Rules, r)
		}
	}
	plan := PlanTable(table, chains)
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
		c := chainOf[i]
		if c < 0 {
			continue
		}
		if removeChain[chains[c].Name] || slices.Contains(plan.Rules[chains[c].Name], position[i]) {
			remove[i] = true
			res.Rules++
		}
	}
	if res.Chains == 0 && res.Rules == 0 {
		return nil, info, res, nil
	}
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
	// Remap jumps, then hook entries and underflows.
	for i, e := range entries {
		if remove[i] || e.Target != "" || e.Verdict < 0 {
			continue
		}
		to, ok := newOff[uint32(e.Verdict)]
		if !ok {
			return nil, info, res, fmt.Errorf("a kept rule jumps to a removed entry at %d", e.Verdict)
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
			return nil, info, res, fmt.Errorf("hook %d lost its entry", h)
		}
	}
	ni.NumEntries, ni.Size = uint32(kept), uint32(len(newBlob))
	return newBlob, ni, res, nil
}
