package proxier

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// MemoryLimitShare is the share of its cgroup's memory limit (a
// container's resources.limits.memory) that nftproxy gives the garbage
// collector as its soft limit when GOMEMLIMIT is not set. Near the soft
// limit the collector runs more often and returns free pages to the
// system at once, so a sync whose peak would cross the hard limit costs
// some CPU instead of the kernel killing the process. Measured with
// scaleprobe: the first sync of a restart at 100,000 Services peaked at
// 373-375 MiB under a 360 MiB soft limit (434-440 MiB without) for 10%
// more user CPU; the cold sync at 30,000 at 126 MiB under 110 MiB (153
// without) at the same CPU. Without a cgroup limit nothing changes.
const MemoryLimitShare = 0.9

// SetMemoryLimit sets the collector's soft memory limit to
// MemoryLimitShare of the memory limit of the process's cgroup, unless
// GOMEMLIMIT is set (the operator's choice wins) or no limit applies. It
// returns the soft limit it set and the cgroup limit, in bytes; 0 and 0
// when it set none.
func SetMemoryLimit() (soft, cgroup int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, 0
	}
	limit, ok := cgroupMemoryLimit("/proc/self/cgroup", "/sys/fs/cgroup")
	if !ok {
		return 0, 0
	}
	soft = int64(float64(limit) * MemoryLimitShare)
	debug.SetMemoryLimit(soft)
	return soft, limit
}

// cgroupMemoryLimit returns the memory limit that applies to the process
// whose /proc/PID/cgroup is procCgroup, with the cgroup file systems
// mounted at root: the smallest limit of its cgroup and the cgroups above
// it, in cgroup v2 (memory.max) or v1 (the memory controller's
// memory.limit_in_bytes). ok is false when none is set or none can be
// read.
func cgroupMemoryLimit(procCgroup, root string) (limit int64, ok bool) {
	f, err := os.Open(procCgroup)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			if limit, ok = smallestLimit(root, parts[2], "memory.max"); ok {
				return limit, true
			}
		case controllerListed(parts[1], "memory"):
			if limit, ok = smallestLimit(filepath.Join(root, "memory"), parts[2], "memory.limit_in_bytes"); ok {
				return limit, true
			}
		}
	}
	return 0, false
}

// controllerListed reports whether a v1 hierarchy's controller list names
// controller.
func controllerListed(list, controller string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == controller {
			return true
		}
	}
	return false
}

// smallestLimit returns the smallest limit in file of the cgroup at path
// under mount and of each cgroup above it up to mount itself. A cgroup
// namespace shows the process's own cgroup as "/", and a mount may show
// less than the path says: directories that are not there are skipped.
func smallestLimit(mount, path, file string) (int64, bool) {
	limit, found := int64(math.MaxInt64), false
	dir := filepath.Join(mount, filepath.Clean("/"+path))
	for {
		if v, ok := readLimit(filepath.Join(dir, file)); ok && v < limit {
			limit, found = v, true
		}
		if dir == mount || len(dir) < len(mount) {
			return limit, found
		}
		dir = filepath.Dir(dir)
	}
}

// readLimit reads a memory limit file: false for "max", for v1's "no
// limit" (a page-rounded maximum, above 2^62) and for what cannot be read.
func readLimit(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v <= 0 || v >= 1<<62 {
		return 0, false
	}
	return v, true
}
