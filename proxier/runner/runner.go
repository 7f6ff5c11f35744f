package runner

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Reason says why a run happens.
type Reason string

// Reasons for a run.
const (
	Requested Reason = "requested"
	Periodic  Reason = "periodic"
	Retry     Reason = "retry"
)

// Runner calls Fn in Loop. It is safe to call Run from any goroutine.
type Runner struct {
	fn       func(Reason) error
	min, max time.Duration
	clock    clock.Clock
	requests chan struct{}
}

// New returns a runner for fn; c may be nil for the real clock.
func New(fn func(Reason) error, minInterval, maxInterval time.Duration, c clock.Clock) *Runner {
	if c == nil {
		c = clock.RealClock{}
	}
	return &Runner{fn: fn, min: minInterval, max: maxInterval, clock: c, requests: make(chan struct{}, 1)}
}

// Run asks for a run as soon as minInterval allows. Requests made before
// that run are merged into it.
func (r *Runner) Run() {
	select {
	case r.requests <- struct{}{}:
	default:
	}
}

// backoff is the wait before the n-th retry: minInterval (at least 100ms)
// doubled per failure, capped at maxInterval.
func (r *Runner) backoff(failures int) time.Duration {
	d := max(r.min, 100*time.Millisecond)
	for i := 1; i < failures && d < r.max; i++ {
		d *= 2
	}
	return min(d, r.max)
}

// Loop runs until ctx ends. It starts with a run.
func (r *Runner) Loop(ctx context.Context) {
	pending, reason := true, Requested
	var last time.Time
	failures := 0
	for {
		now := r.clock.Now()
		next := last.Add(r.max)
		nextReason := Periodic
		if pending {
			earliest := last.Add(r.min)
			if failures > 0 {
				earliest = last.Add(r.backoff(failures))
			}
			if earliest.Before(next) {
				next, nextReason = earliest, reason
			}
		}
		if wait := next.Sub(now); wait > 0 {
			t := r.clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-r.requests:
				t.Stop()
				if !pending {
					pending, reason = true, Requested
				}
				continue
			case <-t.C():
			}
		}
		select {
		case <-r.requests: // merged into this run
		default:
		}
		last = r.clock.Now()
		if err := r.fn(nextReason); err != nil {
			failures++
			pending, reason = true, Retry
		} else {
			failures = 0
			pending = false
		}
	}
}
