package runner

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

type recorder struct {
	mu    sync.Mutex
	runs  []Reason
	times []time.Time
	fail  int
	clk   *clocktesting.FakeClock
	ran   chan struct{}
}

func (r *recorder) fn(reason Reason) error {
	r.mu.Lock()
	r.runs = append(r.runs, reason)
	r.times = append(r.times, r.clk.Now())
	fail := r.fail > 0
	if fail {
		r.fail--
	}
	r.mu.Unlock()
	r.ran <- struct{}{}
	if fail {
		return errors.New("injected")
	}
	return nil
}

// waitRun waits for the loop to run fn once.
func (r *recorder) waitRun(t *testing.T) {
	t.Helper()
	select {
	case <-r.ran:
	case <-time.After(5 * time.Second):
		t.Fatal("no run")
	}
}

// waitTimer waits until the loop sleeps on its timer.
func waitTimer(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("loop never waited")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestBoundedFrequency(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	rec := &recorder{clk: clk, ran: make(chan struct{}, 10)}
	r := New(rec.fn, time.Second, 30*time.Second, clk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Loop(ctx)
	rec.waitRun(t) // initial run

	// A burst right after a run is merged into one run a min interval later.
	waitTimer(t, clk)
	r.Run()
	r.Run()
	r.Run()
	waitTimer(t, clk)
	clk.Step(999 * time.Millisecond)
	select {
	case <-rec.ran:
		t.Fatal("ran before the minimum interval")
	case <-time.After(50 * time.Millisecond):
	}
	clk.Step(time.Millisecond)
	rec.waitRun(t)

	// With nothing requested, the next run is periodic, at max interval.
	waitTimer(t, clk)
	clk.Step(30 * time.Second)
	rec.waitRun(t)

	// A failure is retried with backoff: 1s, then 2s.
	rec.mu.Lock()
	rec.fail = 2
	rec.mu.Unlock()
	waitTimer(t, clk)
	r.Run()
	waitTimer(t, clk)
	clk.Step(time.Second)
	rec.waitRun(t) // fails
	waitTimer(t, clk)
	clk.Step(time.Second)
	rec.waitRun(t) // first retry after 1s, fails
	waitTimer(t, clk)
	clk.Step(time.Second)
	select {
	case <-rec.ran:
		t.Fatal("second retry before its 2s backoff")
	case <-time.After(50 * time.Millisecond):
	}
	clk.Step(time.Second)
	rec.waitRun(t) // second retry succeeds

	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := []Reason{Requested, Requested, Periodic, Requested, Retry, Retry}
	if len(rec.runs) != len(want) {
		t.Fatalf("runs %v, want %v", rec.runs, want)
	}
	for i := range want {
		if rec.runs[i] != want[i] {
			t.Errorf("run %d: %s, want %s (all: %v)", i, rec.runs[i], want[i], rec.runs)
		}
	}
}
