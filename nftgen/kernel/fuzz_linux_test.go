//go:build linux

package kernel

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/nftproxy/nftproxy/nftgen"
)

// TestMain sets up the fuzz target's kernel check when running as root: a
// network namespace of its own per process (each fuzzing worker is one),
// programmed through one lasting netlink socket and removed when the tests
// end.
func TestMain(m *testing.M) {
	var cleanup func()
	if os.Geteuid() == 0 {
		name := "nfp-fuzz-" + itoa(os.Getpid())
		if exec.Command("ip", "netns", "add", name).Run() == nil {
			cleanup = func() { _ = exec.Command("ip", "netns", "del", name).Run() }
			if dp, f, err := NewNetlinkInNamespace("/run/netns/" + name); err == nil {
				delNS := cleanup
				cleanup = func() { dp.Close(); f.Close(); delNS() }
				fuzzKernel = func(t *testing.T, rs *nftgen.Ruleset) {
					// Each ruleset replaces the last one in one transaction, as
					// a full resync of a live table does. Deleting the table
					// every time would register and unregister its base
					// chains' hooks, which patches kernel text on every CPU
					// and made inputs that reach the kernel slow.
					ctx := context.Background()
					inv, err := dp.Inventory(ctx, rs.Family, rs.ChainNames())
					if err != nil {
						t.Fatal(err)
					}
					if err := dp.Apply(ctx, nftgen.PlanFull(rs, inv)); err != nil {
						t.Fatalf("the kernel rejected a generated ruleset: %v\n%s", err, rs.Text())
					}
				}
			}
		}
	}
	code := m.Run()
	if cleanup != nil {
		cleanup()
	}
	removeOrphanNamespaces()
	os.Exit(code)
}

func itoa(n int) string {
	b := []byte{}
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// removeOrphanNamespaces deletes the fuzz namespaces of processes that are
// gone: the fuzzing coordinator kills workers that do not stop in time, and
// a killed worker cannot remove its own.
func removeOrphanNamespaces() {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, ok := strings.CutPrefix(e.Name(), "nfp-fuzz-")
		if !ok || pid == itoa(os.Getpid()) {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); os.IsNotExist(err) {
			_ = exec.Command("ip", "netns", "del", e.Name()).Run()
		}
	}
}
