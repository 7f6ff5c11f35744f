//go:build linux

package xtables

import (
	"path/filepath"
	"testing"
	"time"
)

// TestXtablesLockWaitsForTheHolder: while another holder has the lock,
// taking it waits; once released, it is taken; a holder that never lets go
// makes it fail after the wait.
func TestXtablesLockWaitsForTheHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "xtables.lock")
	release, err := Lock(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(path, 100*time.Millisecond); err == nil {
		t.Fatal("took a lock that is held")
	}
	got := make(chan error, 1)
	go func() {
		r, err := Lock(path, 5*time.Second)
		if err == nil {
			r()
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("did not wait for the holder")
	default:
	}
	release()
	if err := <-got; err != nil {
		t.Errorf("after the release: %v", err)
	}
}
