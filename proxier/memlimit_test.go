package proxier

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

// cgroupTree writes files (path relative to root: content) under a new
// directory and returns it.
func cgroupTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCgroupMemoryLimitIsTheSmallestAbove(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  int64 // 0: no limit
	}{{
		name: "v2, the pod's limit above the container's",
		files: map[string]string{
			"proc":                                 "0::/kubepods/pod1/ctr\n",
			"fs/memory.max":                        "max\n",
			"fs/kubepods/memory.max":               "max\n",
			"fs/kubepods/pod1/memory.max":          "536870912\n",
			"fs/kubepods/pod1/ctr/memory.max":      "max\n",
			"fs/kubepods/pod1/ctr/memory.current":  "1000\n",
			"fs/kubepods/pod1/other/memory.max":    "1024\n",
			"fs/kubepods/pod1/ctr/cgroup.controls": "memory\n",
		},
		want: 512 << 20,
	}, {
		name:  "v2 in a cgroup namespace",
		files: map[string]string{"proc": "0::/\n", "fs/memory.max": "1073741824\n"},
		want:  1 << 30,
	}, {
		name:  "v2 without a limit",
		files: map[string]string{"proc": "0::/a/b\n", "fs/memory.max": "max\n", "fs/a/b/memory.max": "max\n"},
	}, {
		name: "v1, the container unlimited under a limited parent",
		files: map[string]string{
			"proc": "7:cpu,cpuacct:/kubepods/x\n5:memory:/kubepods/x\n0::/\n",
			"fs/memory/kubepods/x/memory.limit_in_bytes": "9223372036854771712\n",
			"fs/memory/kubepods/memory.limit_in_bytes":   "268435456\n",
			"fs/memory/memory.limit_in_bytes":            "9223372036854771712\n",
		},
		want: 256 << 20,
	}, {
		name:  "no cgroup file",
		files: map[string]string{"fs/memory.max": "1024\n"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := cgroupTree(t, c.files)
			got, ok := cgroupMemoryLimit(filepath.Join(root, "proc"), filepath.Join(root, "fs"))
			if c.want == 0 && ok {
				t.Errorf("limit %d, want none", got)
			}
			if c.want != 0 && (!ok || got != c.want) {
				t.Errorf("limit %d (found %v), want %d", got, ok, c.want)
			}
		})
	}
}

func TestSetMemoryLimitYieldsToGOMEMLIMIT(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(before)
	t.Setenv("GOMEMLIMIT", "1GiB")
	if soft, cgroup := SetMemoryLimit(); soft != 0 || cgroup != 0 {
		t.Errorf("with GOMEMLIMIT set: soft limit %d from a cgroup limit of %d, want none", soft, cgroup)
	}
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("with GOMEMLIMIT set the soft limit changed from %d to %d", before, got)
	}
}
