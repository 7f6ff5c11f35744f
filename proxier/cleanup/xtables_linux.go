//go:build linux

package cleanup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// x_tables socket options (IPT_SO_* and IP6T_SO_*, which share values).
const (
	soSetReplace = 64
	soGetInfo    = 64
	soGetEntries = 65
	nameLen      = 32
	infoSize     = nameLen + 4 + 4*hooks*2 + 4 + 4 // struct ipt_getinfo
	getEntriesHd = 40                              // struct ipt_get_entries, padded
	replaceHd    = 96                              // struct ipt_replace, padded
)

// CleanupLegacy removes kube-proxy's rules from the legacy (x_tables) nat
// and filter tables of both families in the current network namespace.
//
// It holds the x_tables lock (XtablesLock) meanwhile, as iptables-legacy
// does, and changes nothing when it cannot take it (the lock file not
// mounted into the container, or another program holding it for longer
// than iptables' own wait): replacing a table without the lock could undo
// another program's concurrent change.
func CleanupLegacy() (Result, error) {
	return cleanupLegacy(XtablesLock, xtablesLockWait)
}

func cleanupLegacy(lock string, wait time.Duration) (Result, error) {
	var total Result
	var errs []error
	release, err := lockXtables(lock, wait)
	if err != nil {
		return total, fmt.Errorf("legacy iptables left unchanged, no x_tables lock: %w", err)
	}
	defer release()
	for _, fam := range []struct {
		domain, level int
		l             layout
	}{{unix.AF_INET, unix.SOL_IP, layout4}, {unix.AF_INET6, unix.SOL_IPV6, layout6}} {
		fd, err := unix.Socket(fam.domain, unix.SOCK_RAW, unix.IPPROTO_RAW)
		if err != nil {
			errs = append(errs, fmt.Errorf("raw socket: %w", err))
			continue
		}
		for _, table := range []string{"nat", "filter", "mangle"} {
			r, err := cleanupTable(fd, fam.level, table, fam.l)
			if err != nil {
				errs = append(errs, fmt.Errorf("legacy %s table: %w", table, err))
			}
			total.Add(r)
		}
		unix.Close(fd)
	}
	return total, errors.Join(errs...)
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

func cleanupTable(fd, level int, table string, l layout) (Result, error) {
	buf := make([]byte, infoSize)
	copy(buf, table)
	if err := getsockopt(fd, level, soGetInfo, buf); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOPROTOOPT) {
			return Result{}, nil // table or x_tables not loaded: nothing to clean
		}
		return Result{}, fmt.Errorf("get info: %w", err)
	}
	var info tableInfo
	p := nameLen
	u32 := func() uint32 { v := binary.NativeEndian.Uint32(buf[p:]); p += 4; return v }
	info.validHooks = u32()
	for h := 0; h < hooks; h++ {
		info.hookEntry[h] = u32()
	}
	for h := 0; h < hooks; h++ {
		info.underflow[h] = u32()
	}
	info.numEntries, info.size = u32(), u32()

	entries := make([]byte, getEntriesHd+int(info.size))
	copy(entries, table)
	binary.NativeEndian.PutUint32(entries[nameLen:], info.size)
	if err := getsockopt(fd, level, soGetEntries, entries); err != nil {
		return Result{}, fmt.Errorf("get entries: %w", err)
	}
	blob, ni, res, err := removeKubeProxy(table, entries[getEntriesHd:], info, l)
	if err != nil || blob == nil {
		return res, err
	}
	counters := make([]byte, 16*int(info.numEntries)+16)
	rep := make([]byte, replaceHd+len(blob))
	copy(rep, table)
	p = nameLen
	put := func(v uint32) { binary.NativeEndian.PutUint32(rep[p:], v); p += 4 }
	put(ni.validHooks)
	put(ni.numEntries)
	put(ni.size)
	for h := 0; h < hooks; h++ {
		put(ni.hookEntry[h])
	}
	for h := 0; h < hooks; h++ {
		put(ni.underflow[h])
	}
	put(info.numEntries) // num_counters: the old number of entries
	binary.NativeEndian.PutUint64(rep[88:], uint64(uintptr(unsafe.Pointer(&counters[0]))))
	copy(rep[replaceHd:], blob)
	err = setsockopt(fd, level, soSetReplace, rep)
	runtime.KeepAlive(counters)
	if err != nil {
		return res, fmt.Errorf("replace: %w", err)
	}
	return res, nil
}
