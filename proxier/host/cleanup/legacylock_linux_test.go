//go:build linux

package cleanup

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/proxier/host/xtables"
)

// TestLegacyCleanupNeverSkipsTheLock: while another program holds the
// x_tables lock past the wait, the legacy cleanup changes nothing and says
// why (it used to go ahead without the lock). It runs in a network
// namespace of its own, on a thread that never leaves it.
func TestLegacyCleanupNeverSkipsTheLock(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace (CI runs as root)")
	}
	path := filepath.Join(t.TempDir(), "xtables.lock")
	release, err := xtables.Lock(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		_, err := cleanupLegacy(path, 200*time.Millisecond)
		done <- err
	}()
	err = <-done
	if err == nil || !strings.Contains(err.Error(), "left unchanged") {
		t.Fatalf("cleanup with the lock held elsewhere: %v, want a refusal", err)
	}
}
