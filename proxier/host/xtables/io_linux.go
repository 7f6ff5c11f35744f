//go:build linux

package xtables

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// x_tables socket options (IPT_SO_* and IP6T_SO_*, which share values).
const (
	soSetReplace = 64
	soGetInfo    = 64
	soGetEntries = 65
	nameLen      = 32
	infoSize     = nameLen + 4 + 4*Hooks*2 + 4 + 4 // struct ipt_getinfo
	getEntriesHd = 40                              // struct ipt_get_entries, padded
	replaceHd    = 96                              // struct ipt_replace, padded
)

// Family is one address family's x_tables: its socket and layout.
type Family struct {
	Name          string // "ip" or "ip6"
	Domain, Level int
	Layout        Layout
}

// Families are IPv4's and IPv6's x_tables.
var Families = []Family{
	{"ip", unix.AF_INET, unix.SOL_IP, Layout4},
	{"ip6", unix.AF_INET6, unix.SOL_IPV6, Layout6},
}

// Socket opens the raw socket the family's tables are read and replaced
// through.
func (f Family) Socket() (int, error) {
	fd, err := unix.Socket(f.Domain, unix.SOCK_RAW, unix.IPPROTO_RAW)
	if err != nil {
		return -1, fmt.Errorf("raw socket: %w", err)
	}
	return fd, nil
}

// Read returns the table's info and blob; a table (or x_tables) that is
// not loaded gives a nil blob and no error.
func (f Family) Read(fd int, table string) (Info, []byte, error) {
	buf := make([]byte, infoSize)
	copy(buf, table)
	if err := getsockopt(fd, f.Level, soGetInfo, buf); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOPROTOOPT) {
			return Info{}, nil, nil
		}
		return Info{}, nil, fmt.Errorf("get info: %w", err)
	}
	var info Info
	p := nameLen
	u32 := func() uint32 { v := binary.NativeEndian.Uint32(buf[p:]); p += 4; return v }
	info.ValidHooks = u32()
	for h := 0; h < Hooks; h++ {
		info.HookEntry[h] = u32()
	}
	for h := 0; h < Hooks; h++ {
		info.Underflow[h] = u32()
	}
	info.NumEntries, info.Size = u32(), u32()
	entries := make([]byte, getEntriesHd+int(info.Size))
	copy(entries, table)
	binary.NativeEndian.PutUint32(entries[nameLen:], info.Size)
	if err := getsockopt(fd, f.Level, soGetEntries, entries); err != nil {
		return Info{}, nil, fmt.Errorf("get entries: %w", err)
	}
	return info, entries[getEntriesHd:], nil
}

// Replace replaces the table read as old with blob and its info ni.
func (f Family) Replace(fd int, table string, old Info, blob []byte, ni Info) error {
	counters := make([]byte, 16*int(old.NumEntries)+16)
	rep := make([]byte, replaceHd+len(blob))
	copy(rep, table)
	p := nameLen
	put := func(v uint32) { binary.NativeEndian.PutUint32(rep[p:], v); p += 4 }
	put(ni.ValidHooks)
	put(ni.NumEntries)
	put(ni.Size)
	for h := 0; h < Hooks; h++ {
		put(ni.HookEntry[h])
	}
	for h := 0; h < Hooks; h++ {
		put(ni.Underflow[h])
	}
	put(old.NumEntries) // num_counters: the old number of entries
	binary.NativeEndian.PutUint64(rep[88:], uint64(uintptr(unsafe.Pointer(&counters[0]))))
	copy(rep[replaceHd:], blob)
	err := setsockopt(fd, f.Level, soSetReplace, rep)
	runtime.KeepAlive(counters)
	if err != nil {
		return fmt.Errorf("replace: %w", err)
	}
	return nil
}

func getsockopt(fd, level, opt int, buf []byte) error {
	l := uint32(len(buf))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return e
	}
	return nil
}

func setsockopt(fd, level, opt int, buf []byte) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0)
	if e != 0 {
		return e
	}
	return nil
}
