//go:build linux

package instance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"
)

// TestSecondInstanceWaitsForTheFirst: while one holder has the lock, a
// second TryLock is refused and told the holder's PID; Wait waits, and
// takes the lock once the first lets go.
func TestSecondInstanceWaitsForTheFirst(t *testing.T) {
	name := fmt.Sprintf("nftproxy-test-%d", os.Getpid())
	first, _, err := TryLock("", name)
	if err != nil {
		t.Fatal(err)
	}
	_, pid, err := TryLock("", name)
	if !errors.Is(err, ErrHeld) || pid != os.Getpid() {
		t.Fatalf("second TryLock: pid %d, err %v; want ErrHeld and pid %d", pid, err, os.Getpid())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := Wait(ctx, Options{Name: name, Retry: 20 * time.Millisecond}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait while held: %v, want the context's deadline", err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := Wait(context.Background(), Options{Name: name, Retry: 20 * time.Millisecond})
		l.Release()
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	first.Release()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not take the lock after the holder let go")
	}
}
