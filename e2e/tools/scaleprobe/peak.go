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

// memoryClasses are the runtime's memory classes (runtime/metrics,
// /memory/classes/...) that make up the process's resident memory, as
// MiB, at the moment their sum was largest during a step: what the peak
// RSS beyond the heap's live objects is made of.
type memoryClasses struct {
	// Objects are the heap's objects, live and not yet collected.
	Objects float64 `json:"heap_objects_mib"`
	// Unused is heap memory in spans that hold objects but not here
	// (fragmentation), Free heap memory in no span, not yet returned to
	// the system.
	Unused float64 `json:"heap_unused_mib"`
	Free   float64 `json:"heap_free_mib"`
	// Stacks, Metadata (the collector's and the allocator's) and Other
	// (the profiling buckets, buffers) are the runtime's own.
	Stacks   float64 `json:"stacks_mib"`
	Metadata float64 `json:"metadata_mib"`
	Other    float64 `json:"other_mib"`
}

// classNames are the runtime/metrics names memoryClasses sums, in the
// order of its fields.
var classNames = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/stacks:bytes",
	"/memory/classes/metadata/other:bytes",
	"/memory/classes/other:bytes",
}

// classWatcher samples the memory classes every 20 ms (as often as the
// peak profiler looks) and keeps those of the sample whose sum was
// largest.
type classWatcher struct {
	stop chan struct{}
	done chan memoryClasses
}

// watchClasses starts a classWatcher.
func watchClasses() *classWatcher {
	w := &classWatcher{stop: make(chan struct{}), done: make(chan memoryClasses, 1)}
	go w.run()
	return w
}

func (w *classWatcher) run() {
	samples := make([]metrics.Sample, len(classNames))
	for i, name := range classNames {
		samples[i].Name = name
	}
	var best memoryClasses
	var bestSum uint64
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			w.done <- best
			return
		case <-tick.C:
		}
		metrics.Read(samples)
		var sum uint64
		v := make([]float64, len(samples))
		for i, s := range samples {
			if s.Value.Kind() == metrics.KindUint64 {
				sum += s.Value.Uint64()
				v[i] = float64(s.Value.Uint64()) / (1 << 20)
			}
		}
		if sum > bestSum {
			bestSum = sum
			best = memoryClasses{Objects: v[0], Unused: v[1], Free: v[2], Stacks: v[3], Metadata: v[4], Other: v[5]}
		}
	}
}

// Stop stops w and returns the classes at the largest sum it saw.
func (w *classWatcher) Stop() memoryClasses {
	close(w.stop)
	return <-w.done
}
