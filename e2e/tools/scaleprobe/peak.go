package main

import (
	"fmt"
	"runtime/metrics"
	"time"
)

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

// peakWatcher looks at the runtime every 20 ms during a step. It keeps
// the memory classes of the look whose sum was largest and, given a path,
// writes the heap profile there whenever the live heap, as the last
// garbage collection found it, reaches a new high (by 5%), so that the
// file ends up holding what was live at the step's peak.
type peakWatcher struct {
	path string
	stop chan struct{}
	done chan peakResult
}

// peakResult is what a peakWatcher found.
type peakResult struct {
	classes memoryClasses
	err     error
}

// watchPeak starts a peakWatcher; profile is where it writes the heap
// profile ("" for nowhere).
func watchPeak(profile string) *peakWatcher {
	w := &peakWatcher{path: profile, stop: make(chan struct{}), done: make(chan peakResult, 1)}
	go w.run()
	return w
}

func (w *peakWatcher) run() {
	// The classes memoryClasses holds, in the order of its fields, then
	// the live heap.
	names := []string{
		"/memory/classes/heap/objects:bytes",
		"/memory/classes/heap/unused:bytes",
		"/memory/classes/heap/free:bytes",
		"/memory/classes/heap/stacks:bytes",
		"/memory/classes/metadata/other:bytes",
		"/memory/classes/other:bytes",
		"/gc/heap/live:bytes",
	}
	samples := make([]metrics.Sample, len(names))
	for i, name := range names {
		samples[i].Name = name
	}
	var res peakResult
	var largest, highestLive uint64
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			w.done <- res
			return
		case <-tick.C:
		}
		metrics.Read(samples)
		var sum uint64
		mib := make([]float64, len(names)-1)
		for i := range mib {
			sum += samples[i].Value.Uint64()
			mib[i] = float64(samples[i].Value.Uint64()) / (1 << 20)
		}
		if sum > largest {
			largest = sum
			res.classes = memoryClasses{Objects: mib[0], Unused: mib[1], Free: mib[2], Stacks: mib[3], Metadata: mib[4], Other: mib[5]}
		}
		live := samples[len(names)-1].Value.Uint64()
		if w.path == "" || res.err != nil || live < highestLive+highestLive/20 {
			continue
		}
		highestLive = live
		if err := writeProfile(w.path, "heap"); err != nil {
			res.err = fmt.Errorf("peak heap profile: %w", err)
		}
	}
}

// Stop stops w and returns the memory classes at their largest sum, and
// the first error it met writing the profile.
func (w *peakWatcher) Stop() (memoryClasses, error) {
	close(w.stop)
	res := <-w.done
	return res.classes, res.err
}
