package cleanup

import (
	"bytes"
	"encoding/binary"
	"fmt"
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
}

func parseEntries(blob []byte, l layout) ([]entry, error) {
	var out []entry
	for off := 0; off < len(blob); {
		if off+l.entrySize > len(blob) {
			return nil, fmt.Errorf("entry at %d overruns the table", off)
		}
		tOff := int(binary.NativeEndian.Uint16(blob[off+l.targetOffset:]))
		next := int(binary.NativeEndian.Uint16(blob[off+l.targetOffset+2:]))
		if next < l.entrySize || off+next > len(blob) || tOff+targetHeader > next {
			return nil, fmt.Errorf("entry at %d has bad offsets (target %d, next %d)", off, tOff, next)
		}
		e := entry{off: uint32(off), raw: blob[off : off+next]}
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

// removeKubeProxy rewrites a table blob without kube-proxy's chains and
// without the rules that jump to them. It returns the new blob, the new
// table info and what it removed; an unchanged table returns a nil blob.
func removeKubeProxy(blob []byte, info tableInfo, l layout) ([]byte, tableInfo, Result, error) {
	entries, err := parseEntries(blob, l)
	if err != nil {
		return nil, info, Result{}, err
	}
	// Chain starts: a user chain starts at the entry after its ERROR head.
	remove := make([]bool, len(entries))
	kubeStart := map[uint32]bool{}
	var res Result
	inKube := false
	for i, e := range entries {
		if e.target == "ERROR" {
			inKube = e.chain != "ERROR" && owned(e.chain)
			if inKube {
				res.Chains++
				if i+1 < len(entries) {
					kubeStart[entries[i+1].off] = true
				}
			}
		} else if isHookEntry(info, e.off) {
			inKube = false
		}
		remove[i] = inKube
	}
	for i, e := range entries {
		if !remove[i] && e.target == "" && e.verdict >= 0 && kubeStart[uint32(e.verdict)] {
			remove[i] = true
		}
	}
	for i := range entries {
		if remove[i] && entries[i].target != "ERROR" {
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
