//go:build linux

package source

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// openForWriting reports whether a process (of those this one can see in
// /proc) holds the file at path open for writing: a file written in place
// is incomplete until its writer closes it, however long it pauses.
func openForWriting(path string) bool {
	var want syscall.Stat_t
	if err := syscall.Stat(path, &want); err != nil {
		return false
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		dir := filepath.Join("/proc", p.Name(), "fd")
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue // gone, or not ours to look at
		}
		for _, fd := range fds {
			var st syscall.Stat_t
			if syscall.Stat(filepath.Join(dir, fd.Name()), &st) != nil || st.Dev != want.Dev || st.Ino != want.Ino {
				continue
			}
			if writable(filepath.Join("/proc", p.Name(), "fdinfo", fd.Name())) {
				return true
			}
		}
	}
	return false
}

// writable reads the access mode from an fdinfo file's flags line.
func writable(fdinfo string) bool {
	f, err := os.Open(fdinfo)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err == nil && flags&syscall.O_ACCMODE != syscall.O_RDONLY
		}
	}
	return false
}
