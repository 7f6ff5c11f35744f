//go:build linux

package e2e

import (
	"testing"
	"time"
)

// pollInterval is how often poll tries again.
const pollInterval = 50 * time.Millisecond

// poll calls f until it returns nil or limit has passed, and returns how
// long that took and f's last error.
func poll(limit time.Duration, f func() error) (time.Duration, error) {
	return pollEvery(limit, pollInterval, f)
}

// pollEvery is poll, trying again every interval.
func pollEvery(limit, interval time.Duration, f func() error) (time.Duration, error) {
	start := time.Now()
	for {
		err := f()
		if err == nil || time.Since(start) > limit {
			return time.Since(start), err
		}
		time.Sleep(interval)
	}
}

// eventually is poll that fails the test, saying what did not happen, when
// f still fails after limit.
func eventually(t *testing.T, what string, limit time.Duration, f func() error) time.Duration {
	t.Helper()
	d, err := poll(limit, f)
	if err != nil {
		t.Fatalf("%s: not within %v: %v", what, limit, err)
	}
	return d
}
