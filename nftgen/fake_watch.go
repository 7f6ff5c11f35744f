package nftgen

import (
	"context"
	"slices"
)

// ElementCounts implements Dataplane.
func (f *Fake) ElementCounts(_ context.Context, fam Family) (map[string]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for _, t := range f.familyTables(fam) {
		for name, els := range t.maps {
			out[name] += len(els)
		}
	}
	return out, nil
}

// Counters implements Dataplane. The fake counts no packets: every named
// counter reads zero.
func (f *Fake) Counters(_ context.Context, fam Family) (map[string]uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]uint64{}
	for _, t := range f.familyTables(fam) {
		for name := range t.counters {
			out[name] = 0
		}
	}
	return out, nil
}

// Watch implements Dataplane: it reports what ApplyForeign and Notify
// send, until ctx ends.
func (f *Fake) Watch(ctx context.Context) (<-chan Change, error) {
	ch := make(chan Change, 16)
	f.mu.Lock()
	if f.watchers == nil {
		f.watchers = map[chan Change]context.Context{}
	}
	f.watchers[ch] = ctx
	f.mu.Unlock()
	go func() {
		<-ctx.Done()
		f.mu.Lock()
		delete(f.watchers, ch)
		close(ch)
		f.mu.Unlock()
	}()
	return ch, nil
}

// Notify sends ch to every watcher, as the kernel's monitor would.
func (f *Fake) Notify(ch Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for w, ctx := range f.watchers {
		select {
		case w <- ch:
		case <-ctx.Done():
		}
	}
}

// ApplyForeign applies tx as another process would and tells the
// watchers, naming process as its author. Only element changes leave Ours
// unset, as the kernel's element notifications do not name their table.
func (f *Fake) ApplyForeign(process string, tx *Transaction) error {
	f.mu.Lock()
	err := f.commit(tx)
	f.mu.Unlock()
	if err != nil {
		return err
	}
	ours := slices.ContainsFunc(tx.Ops, func(op Op) bool { return op.Kind != OpAddElement && op.Kind != OpDeleteElement })
	what := "no change"
	if len(tx.Ops) > 0 {
		what = tx.Ops[0].Text(tx.Family)
	}
	f.Notify(Change{Process: process, Ours: ours, What: what})
	return nil
}
