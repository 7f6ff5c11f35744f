//go:build linux

package xtables

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// LockPath is the lock file every x_tables user takes (iptables-legacy,
// kube-proxy, CNI plugins), so that two programs never replace a table
// from the same snapshot.
const LockPath = "/run/xtables.lock"

// LockWait bounds the wait for the lock, as iptables' --wait does.
const LockWait = 5 * time.Second

// Lock takes the x_tables lock at path, waiting up to wait, and returns
// its release. Replacing a table without it could undo another program's
// concurrent change.
func Lock(path string, wait time.Duration) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
		}
		if err != unix.EWOULDBLOCK || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
