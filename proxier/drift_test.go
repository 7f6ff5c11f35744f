package proxier

import (
	"testing"
	"time"
)

// TestDriftGuardBacksOffAReturningChange: the first change of a kind is
// repaired at once; one that comes back right after each repair waits
// twice as long each time, is named once per step, and is reported as
// contested after contestedStreak returns; a writer that changes the table
// every 100 ms for a minute gets a handful of repairs, not 600. A change
// that stays away for its window starts over, and another kind of change
// is repaired at once meanwhile.
func TestDriftGuardBacksOffAReturningChange(t *testing.T) {
	g := newDriftGuard(time.Second, 30*time.Second)
	now := time.Unix(1e9, 0)
	start := now
	repairs, named := 0, 0
	var delays []time.Duration
	contestedAt := -1
	for now.Sub(start) < time.Minute {
		v := g.observe("chain KUBE-SERVICES flushed", now)
		if v.name {
			named++
		}
		if v.contested && contestedAt < 0 {
			contestedAt = repairs
		}
		delays = append(delays, v.delay)
		repairs++
		now = now.Add(v.delay + 100*time.Millisecond) // repaired, then changed again
	}
	if repairs > 8 {
		t.Errorf("%d repairs in a minute (delays %v), want a handful", repairs, delays)
	}
	if named != repairs {
		t.Errorf("named %d times in %d repairs: once per step of the backoff", named, repairs)
	}
	for i := 1; i < len(delays); i++ {
		if delays[i] != time.Second<<(i-1) {
			t.Errorf("delay %d = %v, want %v (doubling from the minimum sync period)", i, delays[i], time.Second<<(i-1))
		}
	}
	if delays[0] != 0 {
		t.Errorf("the first repair waits %v, want at once", delays[0])
	}
	if contestedAt != contestedStreak {
		t.Errorf("contested after %d repairs, want %d", contestedAt, contestedStreak)
	}
	if v := g.observe("rule added to KUBE-NODEPORTS", now); v.delay != 0 || v.contested {
		t.Errorf("another kind of change: %+v, want an immediate repair", v)
	}
	// At the cap a kind is named once per delay, not per change.
	for range 20 {
		g.observe("chain KUBE-SERVICES flushed", now)
		now = now.Add(time.Second)
	}
	if v := g.observe("chain KUBE-SERVICES flushed", now); v.name || v.delay != g.maxDelay {
		t.Errorf("at the cap: %+v, want the longest delay, not named again", v)
	}
	now = now.Add(g.kinds["chain KUBE-SERVICES flushed"].window())
	if v := g.observe("chain KUBE-SERVICES flushed", now); v.delay != 0 || v.contested || !v.name {
		t.Errorf("after staying away for its window: %+v, want an immediate repair", v)
	}
}
