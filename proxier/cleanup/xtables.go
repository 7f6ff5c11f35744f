package cleanup

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
)

// layout is the size of an x_tables entry header in one family
// (struct ipt_entry, struct ip6t_entry) and where its offsets live.
type layout struct {
	entrySize    int // sizeof(ipt_entry)
	targetOffset int // offset of target_offset (u16), next_offset follows
}

var (
	layout4 = layout{entrySize: 112, targetOffset: 88}
	layout6 = layout{entrySize: 168, targetOffset: 140}
)

const (
	targetHeader = 32 // struct xt_entry_target: u16 size, name[29], revision
	hooks        = 5
)

// tableInfo is what IPT_SO_GET_INFO reports.
type tableInfo struct {
	validHooks uint32
	hookEntry  [hooks]uint32
	underflow  [hooks]uint32
	numEntries uint32
	size       uint32
}

type entry struct {
	off     uint32
	raw     []byte
	target  string // "" for the standard target
	verdict int32  // standard target: jump offset (>= 0) or verdict
	chain   string // ERROR target: the user chain it heads
	comment string // the comment match's text, if the entry has one
}

// matchHeader is the size of struct xt_entry_match's header: u16 size,
// name[29], revision.
const matchHeader = 32

func parseEntries(blob []byte, l layout) ([]entry, error) {
	var out []entry
	for off := 0; off < len(blob); {
		if off+l.entrySize > len(blob) {
			return nil, fmt.Errorf("entry at %d overruns the table", off)
		}
		tOff := int(binary.NativeEndian.Uint16(blob[off+l.targetOffset:]))
		next := int(binary.NativeEndian.Uint16(blob[off+l.targetOffset+2:]))
		if next < l.entrySize || off+next > len(blob) || tOff < l.entrySize || tOff+targetHeader > next {
			return nil, fmt.Errorf("entry at %d has bad offsets (target %d, next %d)", off, tOff, next)
		}
		e := entry{off: uint32(off), raw: blob[off : off+next]}
		for m := l.entrySize; m+matchHeader <= tOff; {
			size := int(binary.NativeEndian.Uint16(e.raw[m:]))
			if size < matchHeader || m+size > tOff {
				return nil, fmt.Errorf("entry at %d has a bad match at %d", off, m)
			}
			if string(bytes.TrimRight(e.raw[m+2:m+2+29], "\x00")) == "comment" {
				e.comment = string(bytes.TrimRight(bytes.SplitN(e.raw[m+matchHeader:m+size], []byte{0}, 2)[0], "\x00"))
			}
			m += size
		}
		t := e.raw[tOff:]
		e.target = string(bytes.TrimRight(t[2:2+29], "\x00"))
		data := t[targetHeader:]
		switch e.target {
		case "":
			if len(data) >= 4 {
				e.verdict = int32(binary.NativeEndian.Uint32(data))
			}
		case "ERROR":
			e.chain = string(bytes.TrimRight(data[:min(32, len(data))], "\x00"))
		}
		out = append(out, e)
		off += next
	}
	return out, nil
}

// builtinChains names the built-in chains by hook number.
var builtinChains = [hooks]string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}

// removeKubeProxy rewrites the blob of the x_tables table named table
// without what PlanTable removes. It returns the new blob, the new table
// info and what it removed; an unchanged table returns a nil blob.
func removeKubeProxy(table string, blob []byte, info tableInfo, l layout) ([]byte, tableInfo, Result, error) {
	entries, err := parseEntries(blob, l)
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
		if e.target == "ERROR" {
			current = -1
			if e.chain != "ERROR" {
				chains = append(chains, Chain{Name: e.chain})
				current = len(chains) - 1
				if i+1 < len(entries) {
					startOf[entries[i+1].off] = e.chain
				}
			}
			chainOf[i] = -1
			continue
		}
		for h := 0; h < hooks; h++ {
			if info.validHooks&(1<<h) != 0 && info.hookEntry[h] == e.off {
				chains = append(chains, Chain{Name: builtinChains[h], Base: true})
				current = len(chains) - 1
				break
			}
		}
		chainOf[i] = current
	}
	position := make([]int, len(entries)) // the entry's rule index in its chain
	for i, e := range entries {
		if c := chainOf[i]; c >= 0 {
			r := Rule{Comment: e.comment}
			if e.target == "" && e.verdict >= 0 {
				r.Jump = startOf[uint32(e.verdict)]
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
		if e.target == "ERROR" {
			remove[i] = removeChain[e.chain]
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
		newOff[e.off] = uint32(out.Len())
		out.Write(e.raw)
		kept++
	}
	newBlob := out.Bytes()
	// Remap jumps, then hook entries and underflows.
	for i, e := range entries {
		if remove[i] || e.target != "" || e.verdict < 0 {
			continue
		}
		to, ok := newOff[uint32(e.verdict)]
		if !ok {
			return nil, info, res, fmt.Errorf("a kept rule jumps to a removed entry at %d", e.verdict)
		}
		tOff := int(binary.NativeEndian.Uint16(e.raw[l.targetOffset:]))
		binary.NativeEndian.PutUint32(newBlob[newOff[e.off]+uint32(tOff)+targetHeader:], to)
	}
	// A hook whose first rule was removed now starts at the next kept
	// entry of its chain; the policy entry (underflow) is always kept.
	firstKept := func(off uint32) (uint32, bool) {
		for i, e := range entries {
			if e.off < off {
				continue
			}
			for j := i; j < len(entries); j++ {
				if !remove[j] {
					return newOff[entries[j].off], true
				}
			}
			break
		}
		return 0, false
	}
	ni := info
	for h := 0; h < hooks; h++ {
		if info.validHooks&(1<<h) == 0 {
			continue
		}
		var ok1, ok2 bool
		ni.hookEntry[h], ok1 = firstKept(info.hookEntry[h])
		ni.underflow[h], ok2 = newOff[info.underflow[h]]
		if !ok1 || !ok2 {
			return nil, info, res, fmt.Errorf("hook %d lost its entry", h)
		}
	}
	ni.numEntries, ni.size = uint32(kept), uint32(len(newBlob))
	return newBlob, ni, res, nil
}

func isHookEntry(info tableInfo, off uint32) bool {
	for h := 0; h < hooks; h++ {
		if info.validHooks&(1<<h) != 0 && info.hookEntry[h] == off {
			return true
		}
	}
	return false
}
