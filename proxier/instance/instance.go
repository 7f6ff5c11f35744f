package instance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"
)

// Name is the abstract socket name of the lock.
const Name = "nftproxy-kube-proxy-table"

// ErrHeld is returned by TryLock when another process holds the lock.
var ErrHeld = errors.New("another nftproxy holds this node's lock")

// Lock is the held lock; Release lets it go.
type Lock struct {
	release func()
}

// Release lets the lock go. It is safe to call more than once.
func (l *Lock) Release() {
	if l != nil && l.release != nil {
		l.release()
		l.release = nil
	}
}

// Options configure Wait.
type Options struct {
	// Namespace is the path of the network namespace to lock ("": the
	// current one).
	Namespace string
	// Name is the lock's name (Name when empty; tests set their own).
	Name string
	// Retry is how often the lock is tried again (250 ms when zero), and
	// Remind how often the wait is logged again (5 min when zero).
	Retry, Remind time.Duration
}

// Wait takes the lock, waiting while another nftproxy holds it: the one
// that runs first keeps the node, and this one takes over when it exits
// (a rolling update's old pod ends, a run by hand stops). It says so in the
// log when it starts waiting, and again every Remind. It returns ctx's
// error if ctx ends first.
func Wait(ctx context.Context, o Options) (*Lock, error) {
	if o.Name == "" {
		o.Name = Name
	}
	if o.Retry <= 0 {
		o.Retry = 250 * time.Millisecond
	}
	if o.Remind <= 0 {
		o.Remind = 5 * time.Minute
	}
	logger := klog.FromContext(ctx)
	var said time.Time
	start := time.Now()
	for {
		l, holder, err := TryLock(o.Namespace, o.Name)
		if err == nil {
			if !said.IsZero() {
				logger.Info("The other nftproxy exited; this one programs the node now", "waited", time.Since(start).Round(time.Second))
			}
			return l, nil
		}
		if !errors.Is(err, ErrHeld) {
			return nil, err
		}
		if said.IsZero() || time.Since(said) >= o.Remind {
			said = time.Now()
			logger.Info("Another nftproxy programs this node's rules; waiting for it to exit, so that the two do not rewrite each other's table",
				"holderPID", holder, "waited", time.Since(start).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the other nftproxy (pid %d) to exit: %w", holder, ctx.Err())
		case <-time.After(o.Retry):
		}
	}
}
