package xtables

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Layout is the size of an x_tables entry header in one family (struct
// ipt_entry, struct ip6t_entry) and where its offsets live.
type Layout struct {
	EntrySize    int // sizeof(ipt_entry)
	TargetOffset int // offset of target_offset (u16), next_offset follows
}

// The layouts of IPv4 (ipt_entry) and IPv6 (ip6t_entry).
var (
	Layout4 = Layout{EntrySize: 112, TargetOffset: 88}
	Layout6 = Layout{EntrySize: 168, TargetOffset: 140}
)

const (
	// TargetHeader is struct xt_entry_target's header: u16 size,
	// name[29], revision.
	TargetHeader = 32
	// Hooks is the number of netfilter hooks of a table.
	Hooks = 5
)

// Info is what IPT_SO_GET_INFO reports of a table.
type Info struct {
	ValidHooks uint32
	HookEntry  [Hooks]uint32
	Underflow  [Hooks]uint32
	NumEntries uint32
	Size       uint32
}

// Entry is one entry of a table's blob.
type Entry struct {
	Off     uint32
	Raw     []byte
	Target  string // "" for the standard target
	Verdict int32  // standard target: jump offset (>= 0) or verdict
	Chain   string // ERROR target: the user chain it heads
	Comment string // the comment match's text, if the entry has one
}

// MatchHeader is the size of struct xt_entry_match's header: u16 size,
// name[29], revision.
const MatchHeader = 32

// ParseEntries splits a table's blob into its entries.
func ParseEntries(blob []byte, l Layout) ([]Entry, error) {
	var out []Entry
	for off := 0; off < len(blob); {
		if off+l.EntrySize > len(blob) {
			return nil, fmt.Errorf("entry at %d overruns the table", off)
		}
		tOff := int(binary.NativeEndian.Uint16(blob[off+l.TargetOffset:]))
		next := int(binary.NativeEndian.Uint16(blob[off+l.TargetOffset+2:]))
		if next < l.EntrySize || off+next > len(blob) || tOff < l.EntrySize || tOff+TargetHeader > next {
			return nil, fmt.Errorf("entry at %d has bad offsets (target %d, next %d)", off, tOff, next)
		}
		e := Entry{Off: uint32(off), Raw: blob[off : off+next]}
		for m := l.EntrySize; m+MatchHeader <= tOff; {
			size := int(binary.NativeEndian.Uint16(e.Raw[m:]))
			if size < MatchHeader || m+size > tOff {
				return nil, fmt.Errorf("entry at %d has a bad match at %d", off, m)
			}
			if string(bytes.TrimRight(e.Raw[m+2:m+2+29], "\x00")) == "comment" {
				e.Comment = string(bytes.TrimRight(bytes.SplitN(e.Raw[m+MatchHeader:m+size], []byte{0}, 2)[0], "\x00"))
			}
			m += size
		}
		t := e.Raw[tOff:]
		e.Target = string(bytes.TrimRight(t[2:2+29], "\x00"))
		data := t[TargetHeader:]
		switch e.Target {
		case "":
			if len(data) >= 4 {
				e.Verdict = int32(binary.NativeEndian.Uint32(data))
			}
		case "ERROR":
			e.Chain = string(bytes.TrimRight(data[:min(32, len(data))], "\x00"))
		}
		out = append(out, e)
		off += next
	}
	return out, nil
}

// BuiltinChains names the built-in chains by hook number.
var BuiltinChains = [Hooks]string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}
