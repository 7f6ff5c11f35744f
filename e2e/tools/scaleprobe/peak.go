package main

import (
	"fmt"
	"runtime/metrics"
	"time"
)

// peakProfiler writes the heap profile whenever the live heap, as the
// last garbage collection found it, reaches a new high (by 5%), so that
// the file ends up holding what was live at the peak of a step.
type peakProfiler struct {
	path string
	stop chan struct{}
	done chan error
}

// watchPeak starts a peakProfiler for path, or returns nil if path is "".
func watchPeak(path string) *peakProfiler {
	if path == "" {
		return nil
	}
	p := &peakProfiler{path: path, stop: make(chan struct{}), done: make(chan error, 1)}
	go p.run()
	return p
}

func (p *peakProfiler) run() {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var highest uint64
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			p.done <- nil
			return
		case <-tick.C:
		}
		metrics.Read(sample)
		live := sample[0].Value.Uint64()
		if live < highest+highest/20 {
			continue
		}
		highest = live
		if err := writeProfile(p.path, "heap"); err != nil {
			p.done <- err
			return
		}
	}
}

// Stop stops p and returns the first error it met writing the profile.
func (p *peakProfiler) Stop() error {
	if p == nil {
		return nil
	}
	close(p.stop)
	if err := <-p.done; err != nil {
		return fmt.Errorf("peak heap profile: %w", err)
	}
	return nil
}
