package forward

import (
	"bytes"
	"fmt"

	"github.com/nftproxy/nftproxy/proxier/host/xtables"
)

// Standard target verdicts of x_tables (-NF_verdict - 1) and the FORWARD
// hook's number.
const (
	verdictDrop   = -1
	verdictAccept = -2
	verdictReturn = -5
	hookForward   = 2
)

// xtMatch is a struct xt_entry_match: u16 size, name[29], revision, data.
func xtMatch(name string, rev uint8, data []byte) []byte {
	b := make([]byte, xtables.MatchHeader+len(data))
	putU16(b, uint16(len(b)))
	copy(b[2:], name)
	b[xtables.MatchHeader-1] = rev
	copy(b[xtables.MatchHeader:], data)
	return b
}

// standardTarget is a struct xt_standard_target: a verdict, or a jump
// offset.
func standardTarget(verdict int32) []byte {
	b := make([]byte, 40) // XT_ALIGN(32 + 4)
	putU16(b, uint16(len(b)))
	putU32(b[xtables.TargetHeader:], uint32(verdict))
	return b
}

// errorTarget heads a user chain (struct xt_error_target).
func errorTarget(chain string) []byte {
	b := make([]byte, 64)
	putU16(b, uint16(len(b)))
	copy(b[2:], "ERROR")
	copy(b[xtables.TargetHeader:], chain)
	return b
}

// xtEntry is an entry matching any packet of any interface, with the
// matches and the target.
func xtEntry(l xtables.Layout, target []byte, matches ...[]byte) []byte {
	size := l.EntrySize + len(target)
	for _, m := range matches {
		size += len(m)
	}
	b := make([]byte, l.EntrySize, size)
	for _, m := range matches {
		b = append(b, m...)
	}
	putU16(b[l.TargetOffset:], uint16(len(b)))
	putU16(b[l.TargetOffset+2:], uint16(size))
	return append(b, target...)
}

// withForwardRules returns the legacy filter table blob with kube-proxy's
// KUBE-FORWARD chain (written anew) and its jump at the head of FORWARD,
// when FORWARD can drop (see needed); a nil blob when nothing changes.
func withForwardRules(blob []byte, info xtables.Info, l xtables.Layout, rules forwardRules) ([]byte, xtables.Info, error) {
	if info.ValidHooks&(1<<hookForward) == 0 {
		return nil, info, nil
	}
	entries, err := xtables.ParseEntries(blob, l)
	if err != nil {
		return nil, info, err
	}
	f, err := findForward(entries, info)
	if err != nil {
		return nil, info, err
	}
	policy := entries[f.end]
	if !needed(policy.Target == "" && policy.Verdict == verdictDrop, f.drops) {
		return nil, info, nil
	}
	comment := func(c string) []byte { b, _ := commentInfo(c); return xtMatch("comment", 0, b) }
	jump := xtEntry(l, standardTarget(0), comment(rules.jumpComment)) // offset patched below
	chain := [][]byte{xtEntry(l, errorTarget(Chain))}
	for _, r := range rules.accepts {
		match := xtMatch("conntrack", 3, conntrackInfo(r.ctState))
		if r.mark != 0 {
			match = xtMatch("mark", 1, markInfo(r.mark))
		}
		chain = append(chain, xtEntry(l, standardTarget(verdictAccept), comment(r.comment), match))
	}
	chain = append(chain, xtEntry(l, standardTarget(verdictReturn)))
	if f.oldHead >= 0 && f.remove[f.start] && f.others == f.end-f.start-1 && sameRules(entries[f.oldHead+1:], chain[1:], l) {
		return nil, info, nil // in place: the jump first, the chain as written
	}
	return f.rebuild(entries, info, l, jump, chain)
}

// forwardPlace is where the filter table's FORWARD chain and an earlier
// KUBE-FORWARD chain are among its entries.
type forwardPlace struct {
	// start and end are FORWARD's first entry and its policy (underflow);
	// oldHead is the ERROR head of an earlier KUBE-FORWARD (-1 for none)
	// and oldStart the offset of its first rule.
	start, end, oldHead int
	oldStart            uint32
	// remove marks the old chain's entries and FORWARD's jumps to it.
	remove []bool
	// others counts FORWARD's other rules, drops those of them that drop
	// or reject.
	others, drops int
}

// findForward locates FORWARD and an earlier KUBE-FORWARD in entries.
func findForward(entries []xtables.Entry, info xtables.Info) (forwardPlace, error) {
	f := forwardPlace{start: -1, end: -1, oldHead: -1, remove: make([]bool, len(entries))}
	for i, e := range entries {
		switch {
		case e.Off == info.HookEntry[hookForward]:
			f.start = i
		case e.Target == "ERROR" && e.Chain == Chain:
			f.oldHead = i
		}
		if e.Off == info.Underflow[hookForward] {
			f.end = i
		}
	}
	if f.start < 0 || f.end < f.start || entries[len(entries)-1].Target != "ERROR" {
		return f, fmt.Errorf("the filter table's FORWARD chain or end is not where its info says")
	}
	if f.oldHead >= 0 {
		for i := f.oldHead; i < len(entries) && (i == f.oldHead || entries[i].Target != "ERROR"); i++ {
			f.remove[i] = true
		}
		if f.oldHead+1 < len(entries) {
			f.oldStart = entries[f.oldHead+1].Off
		}
	}
	for i := f.start; i < f.end; i++ {
		e := entries[i]
		switch {
		case f.oldHead >= 0 && e.Target == "" && e.Verdict >= 0 && uint32(e.Verdict) == f.oldStart:
			f.remove[i] = true
			continue
		case e.Target == "REJECT", e.Target == "" && e.Verdict == verdictDrop:
			f.drops++
		}
		f.others++
	}
	return f, nil
}

// rebuild returns the table with jump first in FORWARD and chain (head,
// rules) before the table's end, the old chain and jumps removed, and
// every jump, hook entry and underflow moved to its entry's new offset.
func (f forwardPlace) rebuild(entries []xtables.Entry, info xtables.Info, l xtables.Layout, jump []byte, chain [][]byte) ([]byte, xtables.Info, error) {
	var out []byte
	newOff := map[uint32]uint32{}
	var jumpOff, chainStart uint32
	n := 0
	emit := func(b []byte) uint32 { off := uint32(len(out)); out = append(out, b...); n++; return off }
	for i, e := range entries {
		if i == f.start {
			jumpOff = emit(jump)
		}
		if i == len(entries)-1 {
			emit(chain[0])
			chainStart = emit(chain[1])
			for _, b := range chain[2:] {
				emit(b)
			}
		}
		if !f.remove[i] {
			newOff[e.Off] = emit(e.Raw)
		}
	}
	if f.oldHead >= 0 {
		newOff[f.oldStart] = chainStart // another chain's jump to the old one
	}
	// Jumps: the new one to the new chain, the kept ones where their
	// target moved.
	putU32(out[jumpOff+uint32(int(getU16(jump[l.TargetOffset:])))+xtables.TargetHeader:], chainStart)
	for i, e := range entries {
		if f.remove[i] || e.Target != "" || e.Verdict < 0 {
			continue
		}
		to, ok := newOff[uint32(e.Verdict)]
		if !ok {
			return nil, info, fmt.Errorf("a rule jumps to a removed entry at %d", e.Verdict)
		}
		tOff := uint32(getU16(e.Raw[l.TargetOffset:]))
		putU32(out[newOff[e.Off]+tOff+xtables.TargetHeader:], to)
	}
	ni := info
	var err error
	for h := 0; h < xtables.Hooks; h++ {
		if info.ValidHooks&(1<<h) == 0 {
			continue
		}
		if h == hookForward {
			ni.HookEntry[h] = jumpOff
		} else if ni.HookEntry[h], err = moved(newOff, info.HookEntry[h]); err != nil {
			return nil, info, err
		}
		if ni.Underflow[h], err = moved(newOff, info.Underflow[h]); err != nil {
			return nil, info, err
		}
	}
	ni.NumEntries, ni.Size = uint32(n), uint32(len(out))
	return out, ni, nil
}

// sameRules reports whether the entries start with want, each equal
// after the entry header (which holds counters the kernel updates), and
// then the next chain or the table's end.
func sameRules(entries []xtables.Entry, want [][]byte, l xtables.Layout) bool {
	if len(entries) <= len(want) || entries[len(want)].Target != "ERROR" {
		return false
	}
	for i, w := range want {
		if !bytes.Equal(entries[i].Raw[l.EntrySize:], w[l.EntrySize:]) {
			return false
		}
	}
	return true
}

func moved(newOff map[uint32]uint32, off uint32) (uint32, error) {
	to, ok := newOff[off]
	if !ok {
		return 0, fmt.Errorf("a hook's entry at %d was removed", off)
	}
	return to, nil
}
